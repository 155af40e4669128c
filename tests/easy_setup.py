"""What the tests against the independent EASY reference share: the reference itself
(bench/easy_reference.py), the cluster it stands for, and SWF records to feed both."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The reference lives in bench/ (the benchmark runs it too); loaded by path, under a
# name of its own, so that nothing of bench/ goes on sys.path.
_spec = importlib.util.spec_from_file_location(
    "bench_easy_reference", ROOT / "bench" / "easy_reference.py")
assert _spec is not None and _spec.loader is not None
easy = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = easy  # (dataclasses look their module up there)
_spec.loader.exec_module(easy)


def easy_cluster(processors: int, enforce: bool = False) -> str:
    """One 1-slot host per processor, one queue with backfill, `reserve_depth: 1`,
    sessions at every submit and end; limits enforced only with `enforce`."""
    return textwrap.dedent(f"""\
        cluster: easy
        session_interval: 1
        reserve_depth: 1
        hosts:
          - {{name: "h[0001-{processors:04d}]", slots: 1}}
        queues:
          - {{name: normal, priority: 30, backfill: true}}
        simulation: {{enforce_run_limits: {str(enforce).lower()}}}
        """)


def swf_text(processors: int, rows: Sequence[tuple[int, ...]]) -> str:
    """An SWF trace of `processors` with these records: (id, submit, run, processors,
    requested time; -1 for none) and, if given, the queue number (else 1; the
    simulator's queue `q<number>`)."""
    lines = [f"; MaxProcs: {processors}"] + [
        f"{i} {s} -1 {r} {p} -1 -1 {p} {q} -1 1 1 1 -1 {queue[0] if queue else 1} -1 -1 -1"
        for i, s, r, p, q, *queue in rows
    ]
    return "\n".join(lines) + "\n"
