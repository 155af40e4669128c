"""Summary values in human units for the report's page and `xce sim compare`: waits
and spans as durations (`8h27m`, `1264d12h`, not 109,256,857 s), utilization as a
percentage, host-hours with their unit, counts with thousands separators, costs to
the cent; and the difference between two values in the same units."""

from __future__ import annotations

from xce.model.durations import duration_text
from xce.sim.summary_text import SECONDS, format_value

HOURS = frozenset({"host_hours", "host_hours_busy", "token_hours"})
MONEY = frozenset({"cost", "cost_total"})
FRACTIONS = frozenset({"utilization"})


def _family(key: str) -> str:
    """The summary key a flattened key comes from (`host_hours.cloud` -> host_hours)."""
    return key.split(".", 1)[0]


def _number(value: float, key: str, whole: bool = False) -> str:
    """`value` in the units of `key`; a count (`whole`) with thousands separators."""
    family = _family(key)
    if family in SECONDS:
        return duration_text(value)
    if family in FRACTIONS:
        return f"{value:.1%}"
    if family in HOURS:
        return f"{value:,.1f} h"
    if family in MONEY:
        return f"{value:,.2f}"
    if whole and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3f}"


def human_value(value: object, key: str = "") -> str:
    """One summary value (or a flattened one, `host_hours.cloud`) in its units."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return _number(float(value), key, isinstance(value, int))
    if isinstance(value, dict):
        return ", ".join(f"{k}={human_value(v, key)}" for k, v in value.items()) or "-"
    return format_value(value, key)


def human_difference(delta: float, key: str, whole: bool = False) -> str:
    """`delta` (b - a) in the units of `key`, signed: `+2h10m`, `-3.5 pp`, `+1,200`
    (a difference of counts, `whole`, without decimals)."""
    if not delta:
        return "0"
    sign = "+" if delta > 0 else "-"
    if _family(key) in FRACTIONS:
        return f"{sign}{abs(delta) * 100:.1f} pp"
    return sign + _number(abs(delta), key, whole)
