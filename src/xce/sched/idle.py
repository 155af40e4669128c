"""The session-end handler's idle supply: provisioned hosts and borrowed tokens
unused for at least their idle time."""

from __future__ import annotations

import math
from collections.abc import Collection, Container, Sequence

from xce.model.result import Dispatch, Idle, IdleHost, IdleResource
from xce.sched.capacity import Capacity
from xce.sched.hosts import OPEN_STATE
from xce.sched.state import SchedulerState
from xce.sched.suspended import suspended_hosts


def idle_supply(
    state: SchedulerState, now: float, dispatch: list[Dispatch], cap: Capacity,
    booked: Collection[int] | None = None,
) -> Idle:
    """Reclaim candidates at `now`; `dispatch` is the work given this session,
    `booked` the hosts the plan holds for blocked jobs (none of them is idle). Nor is
    a host a job suspended by a preemption is on: its slots are free for the
    preemptor, but the job is still there and resumes there (maybe this very
    session); given back, it could never resume."""
    hosts: list[IdleHost] = []
    if state.idle_provisioned:
        if state.preemptions.suspended:
            booked = {*(booked or ()), *suspended_hosts(state)}
        _idle_hosts(state, now, dispatch, hosts, booked)
    resources: list[IdleResource] = []
    for pool in state.countable_pools:
        amount = pool.idle_tokens(now, cap.pool_free[pool])
        if amount > 0:
            resources.append(IdleResource(pool.label, amount))
    return Idle(hosts, resources)


def _idle_hosts(
    state: SchedulerState, now: float, dispatch: list[Dispatch], hosts: list[IdleHost],
    booked: Container[int] | None,
) -> None:
    """Provisioned hosts open, idle for their idle time, given no work this session
    (`dispatch`) and held for no job (`booked`), by name."""
    busy: set[str] | None = None  # the hosts given work: found once one is idle enough
    default = state.config.catalog.idle_time  # a host whose template is gone
    limits = state.idle_times
    # In order of idle time with one idle time for all: the first host not idle long
    # enough ends the search (every later one went idle after it).
    ordered = state.idle_in_order and state.one_idle_time
    for host in state.idle_provisioned.values():
        if host.template is None or not host.is_open:
            continue
        # Idle long enough once idle_since + limit <= now: the very sum idle_due
        # times it by (now - idle_since >= limit may differ by a rounding error, and
        # the host would be neither idle nor due).
        if host.idle_since + limits.get(host.template, default) > now:
            if ordered:
                break
            continue
        idle_for = now - host.idle_since
        if busy is None:
            busy = {name for d in dispatch for name in d.hosts}
        if host.name not in busy and (booked is None or host.index not in booked):
            hosts.append(IdleHost(host.name, host.template, idle_for))
    if len(hosts) > 1:
        hosts.sort(key=lambda h: h.host)


def idle_due(
    state: SchedulerState, now: float, dispatch: Sequence[Dispatch] = (), *,
    unseen_now: bool = False,
) -> float:
    """When the next idle threshold falls due after `now` (inf: none): an open idle
    provisioned host reaching its template's idle time (a host that went idle at
    `now` with an idle time of 0 is due now; a host given work in `dispatch` is not
    idle), or, while tokens are borrowed, a countable pool's idle time from now.

    `unseen_now`: no session has looked at the state at `now` yet (a job ended with
    no session to follow), so a host reaching its idle time at `now` is due now."""
    due = math.inf
    seen = now if unseen_now else math.nextafter(now, math.inf)  # (due from here)
    # The hosts given work, only where a provisioned host is idle (hot: every session
    # of a simulation calls this; bench_easy.py)
    busy = (
        {name for d in dispatch for name in d.hosts}
        if dispatch and state.idle_provisioned else None
    )
    idle_times = state.idle_times
    default = state.config.catalog.idle_time  # a host whose template is gone
    if state.idle_in_order:
        # Hosts are in order of idle time: per template, the first open one that is
        # not due yet is its soonest.
        left = len(idle_times)
        found: set[str] | None = set() if left > 1 else None  # (one template: its first)
        for host in state.idle_provisioned.values():
            template = host.template
            if host.state == OPEN_STATE and template is not None and (
                found is None or template not in found
            ) and (busy is None or host.name not in busy):
                at = host.idle_since + idle_times.get(template, default)
                if at >= seen or host.idle_since == now:
                    if at < due:
                        due = at
                    if found is None:
                        break
                    found.add(template)
                    left -= 1
                    if not left:
                        break
    else:
        for host in state.idle_provisioned.values():
            if host.state == OPEN_STATE and host.template is not None and (
                busy is None or host.name not in busy
            ):
                at = host.idle_since + idle_times.get(host.template, default)
                if (at >= seen or host.idle_since == now) and at < due:
                    due = at
    for pool in state.countable_pools:
        if pool.borrowed > 0 and pool.countable is not None:
            at = now + pool.countable.idle_time
            if now < at < due:
                due = at
    return due
