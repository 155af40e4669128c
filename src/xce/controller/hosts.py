"""Hosts and their agents in the live controller.

Admins (and provisioners, for the hosts of their provider's templates) open, close,
decommission, remove and report reclaimed hosts; agents join, register and heartbeat,
and are told which dispatched jobs to start and which to kill; hosts that stop
heartbeating become unreach, then lost (their jobs requeued or exited per queue), and
expected hosts that miss their join deadline fail. Every transition follows the host
lifecycle (`HOST_LIFE` of xce.model.lifecycle), each change with its cause where it has
one. Expected hosts count as in flight for the scheduler.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Collection, Sequence

from xce.controller.accounting import Usage, failure_text
from xce.controller.auth import Identity
from xce.controller.fencing import Fencing
from xce.controller.jobs import JobDesk
from xce.controller.kernel import FactKernel
from xce.controller.old_runs import OldRuns
from xce.controller.problems import ApiProblem
from xce.controller.view import RUN, ClusterView, ExpectedHost, HostView, JobRecord
from xce.model.api import (
    RUN_LIMIT_REACHED,
    STILL_RUNS,
    Heartbeat,
    HeartbeatReply,
    Launch,
    Registered,
    RegisterRequest,
)
from xce.model.causes import Cause
from xce.model.events import (
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobRequeued,
    SupplyChanged,
)
from xce.model.lifecycle import HOST_LIFE, HostState, TransitionError, host_change
from xce.sched.loss import lost_job
from xce.sched.queries import SchedulerQueries
from xce.sched.requested import jobs_served

log = logging.getLogger("xce.controller")


class HostDesk:
    """Host changes, the agents' joins, registrations and heartbeats, and the watch
    on hosts that went silent or never joined."""

    def __init__(self, facts: FactKernel, fencing: Fencing, jobs: JobDesk) -> None:
        self.facts = facts
        self.fencing = fencing
        self.jobs = jobs
        self.launchable: set[int] = set()  # jobs whose start is durable
        self.seen: set[tuple[int, str]] = set()  # (job, host) an agent reported running
        self.old_runs = OldRuns()  # requeued jobs whose old run may still live

    def restarted(self, now: float) -> None:
        """After recovery: a fresh grace period for every agent."""
        view = self.facts.view
        for host in view.hosts.values():
            if host.state in (HostState.OK, HostState.CLOSED):
                host.last_heartbeat = now
            elif host.state == HostState.UNREACH:  # the time the controller was down: not counted
                host.unreach_since = now
        # Dispatches in the log are durable: each agent is told again until it reports
        # the job (it starts a job at most once, and reports any it lost).
        self.launchable = {j.spec.id for j in view.jobs.values() if j.state == RUN}
        self.seen = set()

    def forget_run(self, job: JobRecord) -> None:
        """A running job is requeued: it is not dispatched again until its old run
        has ended on its hosts (old_runs.py)."""
        job_id = job.spec.id
        self.old_runs.add(job_id, job.hosts)
        for host in job.hosts:
            self.seen.discard((job_id, host))
        self.launchable.discard(job_id)

    def launch_when_durable(self, durable: asyncio.Future[int], jobs: list[int]) -> None:
        """Dispatches queued to the log: once on disk, their agents may be told to
        start them."""

        def on_disk(done: asyncio.Future[int]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.launchable.update(jobs)

        durable.add_done_callback(on_disk)

    # ------------------------------------------------------------------ agents
    def join_identity(self, token: str) -> Identity | None:
        """The agent a join token speaks for: an expected host before its deadline, or
        the provisioned host that joined with it."""
        view = self.facts.view
        digest = hashlib.sha256(token.encode()).hexdigest()
        for expected in view.expected.values():
            if expected.token_sha256 == digest:
                if (expected.state != HostState.EXPECTED
                        or self.facts.clock() > expected.deadline):
                    return None
                return Identity(expected.name, "agent")
        for host in view.hosts.values():
            if host.token_sha256 == digest:
                return Identity(host.name, "agent")
        return None

    async def register(self, name: str, request: RegisterRequest) -> Registered:
        facts = self.facts
        now = facts.clock()
        host = facts.view.hosts.get(name)
        events: list[Event] = []
        expected = facts.view.expected.get(name)
        if expected is not None:
            events.extend(self._join(expected, request, now))
        elif host is None:
            events.append(HostAdded(name, request.slots, request.type, request.model,
                                    dict(request.resources), None, HostState.OK, now,
                                    gpus=request.gpus))
        elif host.state not in (HostState.OK, HostState.CLOSED):
            events.append(self._back(host))
        if events:
            await facts.commit(now, events)
        host = facts.view.hosts[name]
        host.last_heartbeat = now
        for job in request.running:
            if job in host.jobs:
                self.seen.add((job, name))
        kill = [j for j in request.running if j not in host.jobs]
        return Registered(facts.settings.heartbeat_interval, kill)

    def _back(self, host: HostView) -> HostStateChanged:
        """The transition of a host whose agent is back (registered or heartbeating)."""
        if host.state == HostState.UNAVAIL:
            return self._transition(host.name, HostState.OK)
        if host.state == HostState.LOST and host.cause is Cause.RECLAIM:
            raise ApiProblem(409, f"host {host.name} was reclaimed by its provider: "
                                  "it cannot come back")
        state, reason, cause = host.resume
        # Checked like any transition: a decommissioned host's agent is refused (409).
        if state != HostState.CLOSED:
            return self._transition(host.name, state)
        return self._transition(host.name, state, reason, cause)

    def _join(self, expected: ExpectedHost, request: RegisterRequest, now: float) -> list[Event]:
        """An expected host's agent joins: the host takes the template's shape; the agent
        may add resources, never contradict the template's."""
        if expected.state != HostState.EXPECTED or now > expected.deadline:
            raise ApiProblem(409, f"host {expected.name} is {expected.state}: "
                                  "its join deadline passed")
        template = self.facts.state.templates[expected.template]
        for res, value in request.resources.items():
            if res in template.resources and template.resources[res] != value:
                raise ApiProblem(409, f"host {expected.name}: {res}={value} contradicts "
                                      f"template {template.name} ({template.resources[res]})")
        resources = {**request.resources, **template.resources}
        record = self.facts.records.requests.get(expected.request)
        jobs = jobs_served(record.jobs, record.count) if record is not None else ()
        return [
            HostAdded(expected.name, template.slots, template.type, template.model, resources,
                      template.name, HostState.OK, now, provider=expected.provider,
                      requested_for=jobs),
            self.in_flight(expected.template, {expected.name}),
        ]

    async def heartbeat(self, name: str, beat: Heartbeat) -> HeartbeatReply:
        facts = self.facts
        now = facts.clock()
        host = facts.view.hosts.get(name)
        if host is None or host.last_heartbeat is None or host.state not in (
            HostState.OK, HostState.CLOSED, HostState.UNREACH, HostState.LOST
        ):
            raise ApiProblem(409, f"host {name} is not registered: register first")
        host.last_heartbeat = now
        pending: list[asyncio.Future[int]] = []
        if host.state in (HostState.UNREACH, HostState.LOST):
            pending.append(facts.emit(now, [self._back(host)]))
        ended: list[Event] = []
        reported = set()
        usage: dict[int, Usage] = {}
        for report in beat.finished:
            reported.add(report.job)
            job = facts.view.jobs.get(report.job)
            if job is not None and job.state == RUN and next(iter(job.hosts)) == name:
                # Only a reason the agent may give (not free text into the log).
                why = report.reason if report.reason == RUN_LIMIT_REACHED else ""
                ended.append(JobFinished(report.job, now, report.exit_code, report.signal, why))
                usage[report.job] = Usage(failure_text(report.failure), report.cpu_time)
        if beat.reclaim_at is not None and (notice := self._reclaim_notice(host, reported, now)):
            pending.append(facts.emit(now, notice))
        running = set(beat.running)
        start: list[Launch] = []
        for job_id in list(host.jobs):
            if job_id in running:
                self.seen.add((job_id, name))
            elif job_id in reported:
                continue
            elif (job_id, name) in self.seen:
                ended.extend(self._lost(facts.view.jobs[job_id], now, f"lost on host {name}"))
            elif job_id in self.launchable:
                start.append(self._launch(facts.view.jobs[job_id], name))
        if ended:
            pending.append(facts.emit(now, ended, usage))
        for future in pending:
            await future
        kill = sorted(j for j in running if j not in host.jobs)
        self.old_runs.heard(name, running, reported, kill, facts.view)
        return HeartbeatReply(start, kill, sorted(reported), facts.settings.heartbeat_interval)

    def _launch(self, job: JobRecord, host: str) -> Launch:
        spec = job.spec
        return Launch(
            job=spec.id, user=spec.user, command=list(spec.command), hosts=dict(job.hosts),
            run=next(iter(job.hosts)) == host, cwd=spec.cwd, env=dict(spec.env),
            output=spec.output, error=spec.error, name=spec.name, queue=spec.queue,
            run_limit=self.jobs.run_limit(spec), gpus=spec.gpus, gpu_mode=spec.gpu_mode,
            gpu_exclusive=spec.gpu_exclusive, array=spec.array, index=spec.index,
        )

    def _reclaim_notice(self, host: HostView, reported: set[int], now: float) -> list[Event]:
        """The agent heard its provider's notice (EC2's spot interruption): the host
        closes at once (reclaim) and its running jobs (but those it reports ended) are
        requeued or exited per queue, as for a lost host, before the machine goes.
        Nothing when that is done already (the agent repeats the notice)."""
        events: list[Event] = []
        if host.state == HostState.OK:
            events.append(self._transition(host.name, HostState.CLOSED, Cause.RECLAIM.value))
            log.warning("host %s: its provider takes it back (notice from its agent): "
                        "closed, its jobs requeued", host.name)
        for job_id in sorted(host.jobs.keys() - reported):
            job = self.facts.view.jobs[job_id]
            if job.state == RUN:
                events.extend(self._lost(job, now, f"host {host.name} reclaim notice"))
        return events

    def _lost(self, job: JobRecord, now: float, why: str) -> list[Event]:
        """A running job whose host was lost: requeued, or exited per its queue."""
        for host in job.hosts:
            self.seen.discard((job.spec.id, host))
        self.launchable.discard(job.spec.id)
        ended = lost_job(self.facts.state, job.spec, now, why)
        log.warning("job %d %s: %s", job.spec.id, why,
                    "requeued" if isinstance(ended, JobRequeued) else "exited")
        return [ended]

    # ------------------------------------------------------------------ host changes
    def _may_manage(self, who: Identity, host: HostView | ExpectedHost) -> None:
        """Admins manage every host; a provisioner only hosts that came from templates,
        with the current fencing token of their provider's lease."""
        if who.role == "admin":
            return
        template = host.template
        if who.role != "provisioner" or template is None:
            raise ApiProblem(403, f"role {who.role} may not change host {host.name}")
        self.fencing.fenced(who, host.provider)

    def _transition(self, name: str, target: str, reason: str = "",
                    cause: Cause | None = None) -> HostStateChanged:
        host = self.facts.view.hosts[name]
        try:
            why, cause = host_change(name, host.state, target, reason, cause)
        except TransitionError as err:
            raise ApiProblem(409, str(err)) from err
        return HostStateChanged(name, target, self.facts.clock(), why, cause)

    def _host(self, who: Identity, name: str) -> HostView:
        view = self.facts.view
        host = view.hosts.get(name)
        if host is None:
            if name in view.expected:
                raise ApiProblem(409, f"host {name} is {view.expected[name].state}: "
                                      "it has not joined")
            raise ApiProblem(404, f"host {name}: no such host")
        self._may_manage(who, host)
        return host

    async def set_host_open(self, who: Identity, name: str, open_: bool,
                            reason: str = "") -> None:
        host = self._host(who, name)
        target = HostState.OK if open_ else HostState.CLOSED
        if host.state not in (HostState.OK, HostState.CLOSED):
            raise ApiProblem(409, f"host {name} is {host.state}: only an ok or closed host "
                                  "can be opened or closed")
        if host.state != target:
            await self.facts.commit(self.facts.clock(), [self._transition(name, target, reason)])

    async def decommission(self, who: Identity, name: str) -> None:
        """A drained (closed) host is given back: refused while jobs run on it."""
        host = self._host(who, name)
        if host.static:
            raise ApiProblem(409, f"host {name} is in the cluster file: close it instead "
                                  "(only provisioned hosts are decommissioned)")
        if host.jobs:
            raise ApiProblem(409, f"host {name} {STILL_RUNS} "
                                  f"{', '.join(map(str, sorted(host.jobs)))}: drain it first")
        await self.facts.commit(self.facts.clock(),
                                [self._transition(name, HostState.DECOMMISSIONED)])

    async def reclaimed(self, who: Identity, name: str) -> None:
        """The provider took a provisioned host back: it is lost, its jobs are
        requeued or exited per queue."""
        host = self._host(who, name)
        if host.static:
            raise ApiProblem(409, f"host {name} is in the cluster file: no provider has it")
        now = self.facts.clock()
        events: list[Event] = [self._transition(name, HostState.LOST, cause=Cause.RECLAIM)]
        for job_id in list(host.jobs):
            events.extend(self._lost(self.facts.view.jobs[job_id], now, f"host {name} reclaimed"))
        await self.facts.commit(now, events)

    async def remove(self, who: Identity, name: str) -> None:
        """A decommissioned host is gone (its provider released it); a failed expected
        host is cleared; an expected one is cancelled (it leaves the in-flight count)."""
        now = self.facts.clock()
        expected = self.facts.view.expected.get(name)
        if expected is not None:
            self._may_manage(who, expected)
            cancel = expected.state == HostState.EXPECTED  # (else a failed one cleared)
            why, cause = host_change(name, expected.state, HostState.REMOVED,
                                     cause=Cause.CANCELLED if cancel else None)
            events: list[Event] = [
                ExpectedHostEnded(name, HostState.REMOVED, why, now, cause)]
            if cancel:  # a failed one already left the count
                events.append(self.in_flight(expected.template, {name}))
            await self.facts.commit(now, events)
            return
        host = self._host(who, name)
        if host.static:
            raise ApiProblem(409, f"host {name} is in the cluster file: edit the file instead")
        self._transition(name, HostState.REMOVED)  # only a decommissioned host may go
        await self.facts.commit(now, [HostRemoved(name, now)])

    def in_flight(self, template: str, leaving: Collection[str] = (),
                  added: Sequence[float] = ()) -> SupplyChanged:
        """The scheduler's in-flight hosts of `template` once `leaving` (expected hosts
        that joined, failed or were cancelled) are gone and `added` (request times of
        new ones) are in: their count and when each was requested (its expected host's
        creation), so that the plan expects each at its own request time + lead time."""
        times = sorted([*self.facts.view.requested(template, leaving), *added])
        return SupplyChanged(in_flight={template: len(times)}, requested={template: times},
                             time=self.facts.clock())

    # ------------------------------------------------------------------ the watch
    async def watch_hosts(self) -> None:
        """Hosts that stopped heartbeating become unreach; after `requeue_after` their
        jobs are requeued or exited (never left as phantom RUN)."""
        facts = self.facts
        now = facts.clock()
        events: list[Event] = []
        for host in facts.view.hosts.values():
            if (
                host.state in (HostState.OK, HostState.CLOSED)
                and host.last_heartbeat is not None
                and now - host.last_heartbeat > facts.settings.unreach_after
            ):
                log.warning("host %s: no heartbeat for %.0f s: unreach",
                            host.name, now - host.last_heartbeat)
                why = HOST_LIFE.reason_for(host.name, host.state, HostState.UNREACH)
                events.append(HostStateChanged(host.name, HostState.UNREACH, now, why))
        if events:
            await facts.commit(now, events)
        lost: list[Event] = []
        late = [e for e in facts.view.expected.values()
                if e.state == HostState.EXPECTED and now > e.deadline]
        for expected in late:
            log.warning("expected host %s did not join by its deadline: failed", expected.name)
            why = HOST_LIFE.reason_for(expected.name, HostState.EXPECTED, HostState.FAILED)
            lost.append(ExpectedHostEnded(expected.name, HostState.FAILED, why, now))
        for template in sorted({e.template for e in late}):
            lost.append(self.in_flight(template, {e.name for e in late}))
        for host in facts.view.hosts.values():
            if (
                host.state == HostState.UNREACH
                and host.unreach_since is not None
                and now - host.unreach_since > facts.settings.requeue_after
            ):
                why = HOST_LIFE.reason_for(host.name, HostState.UNREACH, HostState.LOST)
                lost.append(HostStateChanged(host.name, HostState.LOST, now, why))
                for job_id in list(host.jobs):
                    job = facts.view.jobs[job_id]
                    if job.state == RUN and not any(
                        isinstance(e, JobRequeued | JobFinished) and e.job == job_id for e in lost
                    ):
                        lost.extend(self._lost(job, now, f"host {host.name} unreachable"))
        if lost:
            await facts.commit(now, lost)


def in_flight_drift(state: SchedulerQueries, view: ClusterView, now: float) -> list[Event]:
    """The in-flight hosts the scheduler state counts or times otherwise than the
    expected-host records, which are the truth (a log written before request times
    were sent to the scheduler): one SupplyChanged per template that differs."""
    events: list[Event] = []
    for template in state.templates:
        times = view.requested(template)
        count = max(0, state.in_flight.get(template, 0))
        if count != len(times) or (times and list(state.requested.get(template, ())) != times):
            events.append(SupplyChanged(in_flight={template: len(times)},
                                        requested={template: times}, time=now))
    return events
