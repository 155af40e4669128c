"""When the provisioning policy's own decisions fall due with no new input.

A policy round decides from the session's demand and idle supply and from what it
remembers (`PolicyMemory`). Some of its decisions change with time alone: demand that
has been reported long enough (`persistence`), a back-off that ends, a host that
reaches its `max_lifetime`, the end of a `scale_down_delay_after_add` that holds back
idle hosts. `next_due` is the earliest such time after now, so that
a driver (the simulator; the live provisioner) knows when to run the next round
without repeating these rules. The scheduler's own timers (idle thresholds of
provisioned hosts and borrowed tokens) come with its session result
(`SessionResult.next_due`).

Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from xce.model.policy import PolicyConfig
from xce.policy.decide import PolicyMemory

NEVER: Final = math.inf


def next_due(
    memory: PolicyMemory, policy: PolicyConfig, joined: Iterable[float], now: float
) -> float:
    """The earliest time after `now` at which a policy round could decide something
    new without any new input (inf: never).

    `joined`: when each open (not drained) provisioned host joined, earliest first
    (the order hosts join in): with a `max_lifetime`, the first of them not yet past
    it is the next to be drained for its age. (Only the hosts up to that one are
    read.)"""
    return due_at(
        memory.demand_since, memory.backoff_until, policy.persistence, policy.max_lifetime,
        joined, now, memory.held_until,
    )


def due_at(
    demand_since: dict[str, float],
    backoff_until: dict[str, float],
    persistence: float,
    max_lifetime: float,
    joined: Iterable[float],
    now: float,
    held_until: dict[str, float] | None = None,
) -> float:
    """`next_due` from the fields it reads (a compiled caller keeps them at hand:
    reading a field of a model struct is a slow generic call there).

    * persistence: demand first seen at `since` is requested at `since + persistence`
      (`decide`: `now - since >= persistence`);
    * back-off: a template backed off until `until` gets its allowance back then;
    * lifetime: a host that joined at `joined` is drained at `joined + max_lifetime`
      (0: no limit; `decide`: `now - joined >= max_lifetime`);
    * scale-down delay: idle hosts of a template that the last round held back for
      `scale_down_delay_after_add` may be drained when it ends (`PolicyMemory.
      held_until`; `decide`: drained once `now >= until`)."""
    when = NEVER
    if demand_since:
        for since in demand_since.values():
            at = since + persistence
            if now < at < when:
                when = at
    if backoff_until:
        for until in backoff_until.values():
            if now < until < when:
                when = until
    if held_until:
        for until in held_until.values():
            if now < until < when:
                when = until
    if max_lifetime > 0:
        for since in joined:  # (earliest first: the first one after now is the soonest)
            at = since + max_lifetime
            if at > now:
                if at < when:
                    when = at
                break
    return when
