"""The simulator's summary for humans: as `xce sim run` prints it, the REPL's
`summary` shows it and the report's table holds it. Durations read in their units
(`8h27m`, `731d06h`), not as 63,181,100 s; `--json` keeps the seconds."""

from __future__ import annotations

from xce.model.durations import duration_text

# The summary's values in seconds (FORMATS.md's simulator summary)
SECONDS = frozenset({"sim_seconds", "wall_seconds", "wait_mean", "wait_p50", "wait_p95",
                     "wait_p99", "wait_max", "wide_wait_max"})


def format_value(value: object, key: str = "") -> str:
    """One summary value: a duration (`key` one of SECONDS) in its units, another
    number to three decimals with thousands separators, a mapping as `k=v, ...`."""
    if key in SECONDS and isinstance(value, int | float) and not isinstance(value, bool):
        return duration_text(float(value))
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)
