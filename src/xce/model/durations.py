"""Durations for humans, in their two largest units and without blanks (so that awk
reads a table's columns): `0.4s`, `45.2s`, `4m05s`, `3h12m`, `731d06h`, never
63,181,100 s. Shown by the CLI (`xce acct`), the simulator's summaries and its
report alike, hence here, below both.
"""

from __future__ import annotations

import math

MINUTE, HOUR, DAY = 60, 3600, 86400


def duration_text(seconds: float) -> str:
    """`seconds` as `0.4s`, `45.2s`, `4m05s`, `3h12m`, `731d06h`; `-` for NaN."""
    if math.isnan(seconds):
        return "-"
    if seconds < 0:
        return "-" + duration_text(-seconds)
    if seconds < MINUTE:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < HOUR:
        return f"{whole // MINUTE}m{whole % MINUTE:02d}s"
    if whole < DAY:
        return f"{whole // HOUR}h{whole % HOUR // MINUTE:02d}m"
    return f"{whole // DAY}d{whole % DAY // HOUR:02d}h"


def seconds_figure(seconds: float) -> str:
    """A number of seconds as a reason or a log line gives it: whole seconds from 10 s
    on, to a tenth below (`0.3`, `2`, `60`, `1764459000`), never `2.00071` or
    `1.76446e+09`."""
    if abs(seconds) >= 10:
        return str(round(seconds))
    tenths = round(seconds, 1)
    return str(int(tenths)) if tenths == int(tenths) else str(tenths)
