"""Run limits on the command line: `xce submit -W [hh:]mm` (LSF's `bsub -W`) and the
`RUNLIMIT` line of `xce jobs -l`."""

from __future__ import annotations

import re

import click

from xce.model.result import number

_LIMIT = re.compile(r"(?:(\d+):([0-5]?\d)|(\d+))", re.ASCII)
USAGE = "expected [hh:]mm: minutes, or hours:minutes with minutes 0-59 (e.g. 90 or 1:30)"


class RunLimitError(ValueError):
    """A `-W` value that is not a run limit."""


def parse_run_limit(text: str) -> float:
    """`-W [hh:]mm` in seconds: `90` is 90 minutes, `1:30` an hour and a half. Raises
    RunLimitError for anything else, or for a limit of 0."""
    match = _LIMIT.fullmatch(text)
    if match is None:
        raise RunLimitError(f"{text!r} is not a run limit: {USAGE}")
    hours, minutes, alone = match.groups()
    seconds = 60.0 * (int(alone) if alone is not None else int(hours) * 60 + int(minutes))
    if seconds <= 0:
        raise RunLimitError(f"{text!r}: a run limit must be at least one minute")
    return seconds


def run_limit_option(ctx: click.Context, param: click.Parameter,
                     value: str | None) -> float | None:
    """The click callback of `-W`: its value in seconds (None: not given)."""
    if value is None:
        return None
    try:
        return parse_run_limit(value)
    except RunLimitError as err:
        raise click.BadParameter(str(err), ctx, param) from None


def limit_text(seconds: float) -> str:
    """A run limit as bjobs -l shows it: `60.0 min`; `2 s` when minutes to one decimal
    would not say it exactly."""
    if (seconds * 10) % 60 == 0:
        return f"{seconds / 60:.1f} min"
    return f"{number(seconds)} s"
