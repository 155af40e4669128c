"""Events that rebuild a scheduler state: for recordings that start mid-run and
for snapshots of the controller's durable log. Pure: reads a state, returns events."""

from __future__ import annotations

from xce.model.events import (
    ConfigLoaded,
    EndedJobsRestored,
    FairshareRestored,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobHeld,
    JobPreempted,
    JobStarted,
    JobSubmitted,
    PoolHistoryRestored,
    SchedulerEvent,
    SharedTotalChanged,
    SupplyChanged,
)
from xce.sched.state import SchedulerState


def state_events(state: SchedulerState) -> list[SchedulerEvent]:
    """Events that rebuild `state` on a fresh SchedulerState: its configuration, the
    hosts that are not static (with state, join time and idle time), static hosts that
    changed, running jobs (submitted, then started where they run), queued jobs in
    scheduling order, and the supply facts (hosts and tokens in flight, borrowed
    tokens, headroom, allowances, pool totals).

    Last, the recent use history of countable pools (which decides when borrowed
    tokens count as idle) and the fairshare queues' usage history of ended jobs
    (which, with the running jobs, decides users' dynamic priorities) are restored
    as they were.

    Jobs remembered as ended (for dependency conditions) come right after the
    configuration, so that every job a queued dependent names is known again when it
    is submitted; dependents come after the other queued jobs, in submission order."""
    events: list[SchedulerEvent] = [ConfigLoaded(config=state.config)]
    ended = state.waits.memory.records()
    if ended:
        events.append(EndedJobsRestored(jobs=ended))
    events.extend(_host_events(state))
    events.extend(_running_job_events(state))
    events.extend(_preemption_events(state))
    events.extend(_queued_job_events(state))
    events.extend(_supply_events(state))
    events.extend(_pool_history_events(state))
    history = state.fairshare.history()
    if history:
        events.append(FairshareRestored(usage=history))
    return events


def _host_events(state: SchedulerState) -> list[SchedulerEvent]:
    """The hosts that are not static, and static hosts that changed state or left."""
    static = {h.name for h in state.config.hosts}
    events: list[SchedulerEvent] = []
    for host in state.hosts:
        if host is None:
            continue
        if host.template is None and host.name in static:
            if host.state != "ok":
                events.append(HostStateChanged(name=host.name, state=host.state,
                                               time=host.joined))
            continue
        events.append(
            HostAdded(
                name=host.name, slots=host.slots, type=host.type, model=host.model,
                resources=dict(host.resources), template=host.template, state=host.state,
                time=host.joined, idle_since=host.idle_since, gpus=host.gpus,
                requested_for=host.requested_for,
            )
        )
    events.extend(HostRemoved(name=name) for name in sorted(static - set(state.host_by_name)))
    return events


def _running_job_events(state: SchedulerState) -> list[SchedulerEvent]:
    """The running jobs, by start: each submitted, then started on its hosts and pools."""
    events: list[SchedulerEvent] = []
    for run in sorted(state.running.values(), key=lambda r: (r.start, r.key)):
        events.append(JobSubmitted(job=run.spec))
        if run.spec.hold:
            events.append(JobHeld(job=run.spec.id, held=False))
        hosts: dict[str, int] = {}
        for index, slots in run.hosts.items():
            host = state.hosts[index]
            assert host is not None  # a host that runs jobs cannot be removed
            hosts[host.name] = slots
        pools = {res: pool.name for res, pool in run.pools.items()}
        events.append(JobStarted(job=run.spec.id, hosts=hosts, time=run.start, pools=pools))
    return events


def _queued_job_events(state: SchedulerState) -> list[SchedulerEvent]:
    """The pending, held and waiting jobs in scheduling order, each submitted (and held
    or released where that differs from its spec); those with a dependency condition
    last, in submission order (the jobs they name come first)."""
    events: list[SchedulerEvent] = []
    queued = sorted(
        [*state.pending.values(), *state.held.values(), *state.waiting.values()],
        key=lambda j: j.key,
    )
    dependents = sorted((j for j in queued if j.spec.depend),
                        key=lambda j: (j.spec.submit, j.id))
    for job in [*(j for j in queued if not j.spec.depend), *dependents]:
        events.append(JobSubmitted(job=job.spec))
        held = job.id in state.held
        if held != job.spec.hold:
            events.append(JobHeld(job=job.id, held=held))
    return events


def _supply_events(state: SchedulerState) -> list[SchedulerEvent]:
    """The pool totals that differ from the configuration's, then the supply facts
    (hosts and tokens in flight, borrowed tokens, headroom, allowances, lead times),
    if there are any."""
    configured = {(p.resource, p.pool): p.total for pools in state.config.shared.values()
                  for p in pools}
    events: list[SchedulerEvent] = []
    tokens_in_flight: dict[str, float] = {}
    borrowed: dict[str, float] = {}
    headroom: dict[str, float] = {}
    for resource, records in state.pools.items():
        for record in records:
            if record.base != configured.get((resource, record.name), record.base):
                events.append(SharedTotalChanged(resource=resource, total=record.base,
                                                 pool="" if len(records) == 1 else record.name))
            if record.tokens_in_flight:
                tokens_in_flight[record.label] = record.tokens_in_flight
            if record.borrowed:
                borrowed[record.label] = record.borrowed
            if record.headroom is not None:
                headroom[record.label] = record.headroom
    in_flight = {name: count for name, count in state.in_flight.items() if count}
    if (
        in_flight or tokens_in_flight or borrowed or headroom or state.allowance
        or state.lead_times
    ):
        events.append(
            SupplyChanged(
                in_flight=in_flight, tokens_in_flight=tokens_in_flight, borrowed=borrowed,
                headroom=headroom, allowance=dict(state.allowance),
                requested={n: list(t) for n, t in state.requested.items() if n in in_flight},
                lead_time=dict(state.lead_times),
            )
        )
    return events


def _preemption_events(state: SchedulerState) -> list[SchedulerEvent]:
    """The preemptions under way: suspended victims (their slots released) and those
    being requeued or killed. When other jobs were last preempted is not kept (their
    `preempt_delay` starts afresh)."""
    book = state.preemptions
    events: list[SchedulerEvent] = [
        JobPreempted(job, by, "suspend", since) for job, (by, since) in book.suspended.items()
    ]
    events.extend(
        JobPreempted(job, by, action, book.last.get(job, 0.0))
        for job, (by, action) in book.stopping.items()
    )
    return events


def _pool_history_events(state: SchedulerState) -> list[SchedulerEvent]:
    """The recent use history of each countable pool."""
    return [
        PoolHistoryRestored(pool=record.label, history=list(record.history))
        for records in state.pools.values()
        for record in records
        if record.countable is not None
    ]
