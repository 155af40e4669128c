"""How the REPL (`xce.sim.repl`) reads and shows things: times given and shown,
amounts, job id ranges, host ranges, titled tables, reservations and policy actions
in a few words; and the error of a command that cannot be carried out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from rich.table import Table

from xce.config.hostnames import fold_hostnames
from xce.model.job_ids import id_ranges
from xce.model.result import Reservation
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)

RANGES = 6  # id ranges shown per table cell

_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class ReplError(Exception):
    """A command that cannot be carried out: the message is shown on one line."""


def parse_time(text: str) -> float:
    """Seconds from `3600`, `90s`, `10m`, `2h`, `1.5d`."""
    found = _DURATION.match(text.strip().lower())
    if found is None:
        raise ReplError(f"bad time '{text}': give seconds or a number with s, m, h or d")
    return float(found.group(1)) * _UNITS[found.group(2)]


def show_time(seconds: float) -> str:
    """`t=5400 (1h30m)`: seconds, and days/hours/minutes/seconds when 60 s or more."""
    if not math.isfinite(seconds):
        return f"t={seconds}"
    text = show_number(seconds)
    if seconds < 60:
        return f"t={text}"
    rest = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return f"t={text} ({''.join(parts)})"


def show_number(value: float) -> str:
    """A time or an amount without exponent: `2674480`, `12.5`."""
    if math.isfinite(value) and value == int(value):
        return f"{value:.0f}"
    return f"{value:.3f}".rstrip("0")


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def short_ranges(jobs: Iterable[int]) -> str:
    return id_ranges(jobs, most=RANGES)


def hosts_text(hosts: Iterable[tuple[str, int]]) -> str:
    """Execution hosts with their slots as `4*n[011-014] 2*n020`: hosts of the same slot
    count folded into host ranges."""
    by_slots: dict[int, list[str]] = {}
    for name, slots in hosts:
        by_slots.setdefault(slots, []).append(name)
    return " ".join(f"{slots}*{pattern}" for slots, names in by_slots.items()
                    for pattern in fold_hostnames(names))


def titled_table(title: str, *columns: str, right: Iterable[str] = ()) -> Table:
    table = Table(title=title, title_justify="left")
    aligned = set(right)
    for column in columns:
        table.add_column(column, justify="right" if column in aligned else "left")
    return table


def expected_start(found: Reservation) -> str:
    """A reservation's start: `1800 (30m)`; `virtual` when it holds supply being
    obtained."""
    shown = show_time(found.start).removeprefix("t=")
    return f"{shown} virtual" if found.virtual else shown


def describe_action(action: Action) -> str:
    """A policy action in a few words: `request 3 cloud`, `drain cloud-4`."""
    match action:
        case RequestHosts(template=template, count=count):
            return f"request {count} {template}"
        case RequestTokens(resource=resource, amount=amount):
            return f"borrow {show_number(amount)} {resource}"
        case DrainHost(host=host):
            return f"drain {host}"
        case DecommissionHost(host=host):
            return f"decommission {host}"
        case ReturnTokens(resource=resource, amount=amount):
            return f"return {show_number(amount)} {resource}"
        case SetAllowance(template=template, allowance=allowance):
            if allowance is None:
                return f"lift allowance {template}"
            return f"allowance {template}={allowance}"
    return type(action).__name__
