"""The supply facts the scheduler state keeps (SupplyChanged): hosts in flight and
when they were requested, lead times and allowances per template, and the tokens of
pools in flight, borrowed or to borrow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xce.model.cluster import ClusterConfig
from xce.model.events import SupplyChanged
from xce.sched.errors import SchedulerInputError

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState


def apply_supply(state: SchedulerState, event: SupplyChanged) -> None:
    """Take the supply facts of `event`; an unknown template or pool is refused
    before anything changes."""
    templates = state.templates
    in_flight, allowances = event.in_flight, event.allowance
    requested, lead_times = event.requested, event.lead_time
    for names in (in_flight, allowances, requested, lead_times):
        for name in names:
            if name not in templates:
                raise SchedulerInputError(f"unknown template '{name}'")
    tokens, borrowed, headroom = event.tokens_in_flight, event.borrowed, event.headroom
    resolved = [
        (state.pool_by_key(key), field, value)
        for field, values in (
            ("tokens_in_flight", tokens), ("borrowed", borrowed), ("headroom", headroom),
        )
        for key, value in values.items()
    ] if tokens or borrowed or headroom else []
    state.in_flight.update(in_flight)
    for name, times in requested.items():
        state.requested[name] = sorted(times)
    for name, lead in lead_times.items():
        if lead < 0:
            state.lead_times.pop(name, None)
        else:
            state.lead_times[name] = float(lead)
    for name, allowance in allowances.items():
        if allowance < 0:  # a negative allowance lifts the runtime cap
            state.allowance.pop(name, None)
        else:
            state.allowance[name] = allowance
    for pool, field, value in resolved:
        if field == "headroom" and value < 0:  # a negative headroom lifts the runtime one
            pool.headroom = None
            continue
        setattr(pool, field, float(value))
        if field == "borrowed":
            pool.record(event.time)


def keep_supply(state: SchedulerState, config: ClusterConfig) -> None:
    """On a new configuration, the supply facts (hosts in flight, when requested,
    lead times) of the templates that stay."""
    state.in_flight = {
        name: count for name, count in state.in_flight.items()
        if any(t.name == name for t in config.catalog.templates)
    }
    state.requested = {n: t for n, t in state.requested.items() if n in state.in_flight}
    state.lead_times = {n: t for n, t in state.lead_times.items() if n in state.templates}


def arrivals(state: SchedulerState, template: str, now: float) -> list[float]:
    """When each in-flight host of `template` is expected to join, earliest first:
    its request time plus the lead time, one second from now when overdue; hosts
    in flight without a known request time, now plus the lead time."""
    count = max(0, state.in_flight.get(template, 0))
    if not count:
        return []
    lead = state.lead_time(template)
    soonest = now + 1.0
    times = state.requested.get(template, [])
    found = [max(soonest, t + lead) for t in times[:count]]
    found.extend([now + lead] * (count - len(found)))
    return found
