"""Pend reasons as plain LSF-like sentences, and the kinds the catalog pass reads."""

from __future__ import annotations

from typing import Final

from xce.resreq import Select

# A job that failed on resources may be helped by provisioning; the others may not.
RESOURCE: Final = "resource"
LIMIT: Final = "limit"
HOLD: Final = "hold"
DEPENDENCY: Final = "dependency"  # waiting for a dependency condition (-w)
PROVISIONING: Final = "provisioning"
# No configured host nor template could ever run the job (sched/ever.py): it pends,
# never enters the catalog pass and makes no demand.
NEVER: Final = "never"
NEVER_RUNS: Final = "No host or template can ever run this job"

HELD: Final = "The job was suspended by the user while pending"
# The exit reason of a pending job ended because its dependency condition can never be
# satisfied (LSF's -ti, orphan_job_term_timeout)
ORPHAN_ENDED: Final = "dependency condition can never be satisfied"


def no_host(select: Select | None, queue: str) -> str:
    if select is not None:
        return f"No host satisfies select[{select.text}]"
    return f"No host is available to queue {queue}"


def none_open(closed: int) -> str:
    return f"No eligible host is open: {closed} closed or unavailable"


def no_whole_host(open_hosts: int) -> str:
    return (
        "Exclusive job (-x): no eligible host is free of other jobs "
        f"({open_hosts} open, each running jobs)"
    )


def short_shared(resource: str, short: float, free: float) -> str:
    return f"Short {short:g} of {resource} (shared): {free:g} free"


RESERVED: Final = "Reserved: "  # how a reserved job's pend reason begins


def reserved(start: float, now: float, hosts: dict[str, int]) -> str:
    """A reserved job's pend reason: when and where it is expected to start."""
    when = f"{clock(start)} (in {span(start - now)})"
    return f"{RESERVED}expected to start at {when} on {on_hosts(hosts)}"


def reserved_and(reservation: str, why: str) -> str:
    """A reserved job's pend reason with why no supply could start it sooner (the
    catalog pass's reason, after a semicolon)."""
    return f"{reservation}; {why[:1].lower()}{why[1:]}"


def would_delay(job: int, start: float, now: float) -> str:
    """The pend reason of a job that fits now only on capacity a reservation holds."""
    return f"Would delay the reservation of job {job} (starts in {span(start - now)})"


def clock(time: float) -> str:
    """A time on the session's clock: a UTC date and minute when it is an epoch time
    (the live controller's), else the number of seconds (scenarios, simulations)."""
    if time >= 1e9:
        minutes = int(time // 60)
        year, month, day = civil_date(minutes // 1440)
        hour, minute = divmod(minutes % 1440, 60)
        return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d} UTC"
    return str(int(time)) if float(time).is_integer() else f"{time:.1f}"


def civil_date(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number since 1970-01-01 in the proleptic Gregorian
    calendar (H. Hinnant's civil_from_days: the core reads no clock and imports no
    datetime)."""
    days += 719468
    era = days // 146097
    day_of_era = days - era * 146097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (1 if month <= 2 else 0), month, day


def span(seconds: float) -> str:
    """A duration as an admin reads it: 40 s, 25 min, 2 h 5 min, 3 days 4 h."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = (whole + 30) // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} days {hours} h" if hours else f"{days} days"


def on_hosts(hosts: dict[str, int], most: int = 8) -> str:
    """Hosts of a placement: `n01 n02 (4 slots each)`, `n01 (4 slots) n02 (2 slots)`;
    past `most` hosts, the first ones and how many more."""
    names = list(hosts)
    shown = " ".join(names[:most])
    if len(names) > most:
        shown += f" and {len(names) - most} more"
    sizes = set(hosts.values())
    if len(sizes) == 1:
        (size,) = sizes
        each = " each" if len(names) > 1 else ""
        return f"{shown} ({_slots(size)}{each})"
    if len(names) <= most:
        return " ".join(f"{name} ({_slots(size)})" for name, size in hosts.items())
    return f"{shown} ({sum(hosts.values())} slots in all)"


def _slots(count: int) -> str:
    return plural(count, "slot")


def plural(count: int, word: str) -> str:
    """`1 host`, `2 hosts`."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
