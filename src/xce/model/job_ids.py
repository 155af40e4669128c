"""Compact job-id lists for humans: [3, 4, 5, 9] -> '3-5 9'.

Shown by the CLI's tables and the simulator's REPL alike, hence here, below both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def id_ranges(ids: Iterable[int], most: int = 12) -> str:
    """Consecutive ids folded into ranges; at most `most` ranges, then '...'."""
    ordered = sorted(ids)
    parts: list[str] = []
    start = prev = None
    for job in ordered:
        if start is None:
            start = prev = job
        elif prev is not None and job == prev + 1:
            prev = job
        else:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = job
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    if len(parts) > most:
        return " ".join(parts[:most]) + f" ... (+{len(parts) - most} more)"
    return " ".join(parts)


def jobs_column(jobs: Sequence[int], shown: int = 2) -> str:
    """A JOBS column: the first `shown` ids in their order, then how many more
    ([1203, 1204, ... 19 ids] -> '1203,1204,+17'); '-' for none."""
    if not jobs:
        return "-"
    if len(jobs) <= shown + 1:
        return ",".join(map(str, jobs))
    return ",".join(map(str, jobs[:shown])) + f",+{len(jobs) - shown}"
