"""The session-end handler's idle supply: provisioned hosts and borrowed tokens
unused for at least their idle time."""

from __future__ import annotations

from xce.model.result import Dispatch, Idle, IdleHost, IdleResource
from xce.sched.capacity import Capacity
from xce.sched.state import SchedulerState


def idle_supply(
    state: SchedulerState, now: float, dispatch: list[Dispatch], cap: Capacity
) -> Idle:
    """Reclaim candidates at `now`; `dispatch` is the work given this session."""
    hosts: list[IdleHost] = []
    if state.idle_provisioned:
        _idle_hosts(state, now, dispatch, hosts)
    resources: list[IdleResource] = []
    for pool in state.countable_pools:
        amount = pool.idle_tokens(now, cap.pool_free[pool])
        if amount > 0:
            resources.append(IdleResource(pool.label, amount))
    return Idle(hosts, resources)


def _idle_hosts(
    state: SchedulerState, now: float, dispatch: list[Dispatch], hosts: list[IdleHost]
) -> None:
    """Provisioned hosts open, idle for their idle time and given no work this
    session (`dispatch`), by name."""
    busy: set[str] | None = None  # the hosts given work: found once one is idle enough
    default = state.config.catalog.idle_time  # a host whose template is gone
    limits = state.idle_times
    # In order of idle time with one idle time for all: the first host not idle long
    # enough ends the search (every later one went idle after it).
    ordered = state.idle_in_order and state.one_idle_time
    for host in state.idle_provisioned.values():
        if host.template is None or not host.is_open:
            continue
        limit = limits.get(host.template, default)
        idle_for = now - host.idle_since
        if idle_for < limit:
            if ordered:
                break
            continue
        if busy is None:
            busy = {name for d in dispatch for name in d.hosts}
        if host.name not in busy:
            hosts.append(IdleHost(host.name, host.template, idle_for))
    if len(hosts) > 1:
        hosts.sort(key=lambda h: h.host)
