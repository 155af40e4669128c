"""The session-end handler's idle supply: provisioned hosts and borrowed tokens
unused for at least their idle time."""

from __future__ import annotations

from xce.model.result import Idle, IdleHost, IdleResource
from xce.sched.capacity import Capacity
from xce.sched.state import SchedulerState


def idle_supply(state: SchedulerState, now: float, busy: set[str], cap: Capacity) -> Idle:
    """Reclaim candidates at `now`; `busy` names hosts given work this session."""
    catalog = state.config.catalog
    templates = state.templates
    hosts: list[IdleHost] = []
    for host in state.idle_provisioned.values():
        if host.template is None or not host.is_open:
            continue
        if host.name in busy:
            continue
        template = templates.get(host.template)
        limit = catalog.idle_time
        if template is not None and template.idle_time is not None:
            limit = template.idle_time
        idle_for = now - host.idle_since
        if idle_for >= limit:
            hosts.append(IdleHost(host.name, host.template, idle_for))
    hosts.sort(key=lambda h: h.host)
    resources: list[IdleResource] = []
    for pools in state.pools.values():
        for pool in pools:
            amount = pool.idle_tokens(now, cap.pool_free[pool])
            if amount > 0:
                resources.append(IdleResource(pool.label, amount))
    return Idle(hosts, resources)
