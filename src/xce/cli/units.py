"""Times as people write them on the command line, for `xce acct`: `2026-11-29`,
`2026/11/29/18:00` (LSF's bacct -C), `18:00`, `-2h` (ago), `@1764441600`."""

from __future__ import annotations

import datetime as dt
import math
import re

_AGO = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# LSF's bacct -C: [[[year/]month/]day/]hour:minute
_LSF = re.compile(r"^(?:(?:(?:(\d{4})/)?(\d{1,2})/)?(\d{1,2})/)?(\d{1,2}):(\d{2})$")


class TimeError(ValueError):
    """A time that cannot be read; the message says which forms are understood."""


FORMS = ("YYYY-MM-DD[THH:MM[:SS]], [[[YYYY/]MM/]DD/]HH:MM (as LSF's bacct -C), "
         "-N[s|m|h|d] (that long ago) or @EPOCH_SECONDS")


def parse_time(text: str, now: float) -> float:
    """A time on the command line, in seconds since the epoch (local time unless it
    says otherwise): an ISO date and time, LSF's `[[[year/]month/]day/]hour:minute`
    (missing parts from today), `-2h` (ago), `@1764441600`."""
    text = text.strip()
    if text.startswith("@"):
        return _epoch(text[1:], text)
    ago = _AGO.match(text)
    if ago:
        return now - float(ago.group(1)) * _UNITS[ago.group(2)]
    lsf = _LSF.match(text)
    if lsf:
        today = dt.datetime.fromtimestamp(now)
        year, month, day, hour, minute = lsf.groups()
        try:
            when = today.replace(
                year=int(year or today.year), month=int(month or today.month),
                day=int(day or today.day), hour=int(hour), minute=int(minute),
                second=0, microsecond=0)
        except ValueError as err:
            raise TimeError(f"{text!r}: {err}") from None
        return when.timestamp()
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise TimeError(f"{text!r} is not a time: give {FORMS}") from None


def _epoch(number: str, text: str) -> float:
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise TimeError(f"{text!r} is not a time: give {FORMS}")
    return value
