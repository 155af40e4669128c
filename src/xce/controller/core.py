"""The controller: the single source of truth for jobs and hosts.

Every change is a fact (an `xce.model.events.Event`): it is applied in memory (the
controller's view and records, and, for a scheduler event, the scheduler state unless
a session is running, in which case it waits in the backlog), queued to the durable
log, and acknowledged only once durable. Facts that are only the controller's records
(leases, provisioning requests and instances, expected hosts, token steps) never reach
the scheduler state: a provisioner renewing its lease every round changes nothing the
scheduler decides on, so its cross-session caches hold (docs/cluster.md). Sessions
run off the event loop on the scheduler state; their dispatches are checked against
what changed meanwhile and dropped when stale, never applied half.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time as wallclock
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import msgspec

from xce.controller.auth import Identity
from xce.controller.journal import Journal
from xce.controller.leases import Lease, LeaseRefused, LeaseTable
from xce.controller.lifecycle import RECLAIMED, TransitionError, reason_for
from xce.controller.records import (
    InstanceRecord,
    RecordBook,
    RecordError,
    RequestRecord,
)
from xce.controller.runlimits import overdue, session_delay
from xce.controller.store import Store
from xce.controller.tokens import PoolTokens, TokenLedger
from xce.controller.view import (
    FINISHED,
    PEND,
    PSUSP,
    RUN,
    ClusterView,
    ExpectedHost,
    HostView,
    JobRecord,
)
from xce.model.api import (
    RUN_LIMIT_REACHED,
    Heartbeat,
    HeartbeatReply,
    Launch,
    Registered,
    RegisterRequest,
    SubmitRequest,
)
from xce.model.cluster import ClusterConfig
from xce.model.events import (
    ConfigLoaded,
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostExpected,
    HostRemoved,
    HostStateChanged,
    InstanceRecorded,
    JobFinished,
    JobHeld,
    JobKilled,
    JobRequeued,
    JobStarted,
    JobSubmitted,
    RequestRecorded,
    SchedulerEvent,
    SupplyChanged,
    is_scheduler_event,
)
from xce.model.jobs import JobSpec
from xce.model.recording import Recorder
from xce.model.result import Reservation, SessionResult
from xce.sched import SchedulerState, run_session
from xce.sched.admission import oversize
from xce.sched.loss import LOST_EXIT_CODE, lost_job
from xce.sched.rebuild import state_events
from xce.sched.room import template_room
from xce.sched.runlimit import run_limit
from xce.sched.state import SchedulerInputError, SubmitError
from xce.tuning import collector_paused, settle_heap

log = logging.getLogger("xce.controller")

Clock = Callable[[], float]


class ApiProblem(Exception):
    """A request the controller refuses: HTTP status and a message. Nothing changed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Settings(msgspec.Struct, frozen=True):
    """Controller timings (seconds) and housekeeping."""

    heartbeat_interval: float = 2.0
    unreach_after: float = 10.0  # no heartbeat for this long: the host is unreach
    requeue_after: float = 60.0  # unreach this long: its jobs are requeued or exited
    clean_period: float = 3600.0  # finished jobs are kept this long (LSF CLEAN_PERIOD)
    snapshot_every: int = 100_000  # facts between snapshots
    # A running job past its run limit by this long, not reported ended by its agent
    # (which ends it at the limit): the controller ends it itself.
    limit_grace: float = 30.0


class _HostExtra(msgspec.Struct):
    """What the scheduler state does not keep of a host."""

    reason: str
    provider: str
    token_sha256: str
    joined: float
    request: str = ""


class _Snapshot(msgspec.Struct):
    """What the controller keeps beside a scheduler-state snapshot."""

    last_job_id: int
    finished: list[JobRecord]
    expected: list[ExpectedHost] = []
    hosts: dict[str, _HostExtra] = {}
    last_host_number: int = 0
    tokens: dict[str, PoolTokens] = {}  # the token ledger (tokens.py)
    leases: list[Lease] = []  # provider leases (leases.py)
    requests: list[RequestRecord] = []  # provisioning records (records.py)
    instances: list[InstanceRecord] = []


class Controller:
    def __init__(
        self,
        config: ClusterConfig,
        store: Store,
        settings: Settings | None = None,
        clock: Clock = wallclock.time,
        recorder: Recorder | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.settings = settings or Settings()
        self.clock = clock
        self.recorder = recorder
        self.state = SchedulerState()
        self.view = ClusterView()
        self.tokens = TokenLedger()  # borrowed tokens per countable pool (supply.py)
        self.leases = LeaseTable()  # which provisioner owns which provider
        self.records = RecordBook()  # provisioning requests and their instances
        self.journal: Journal | None = None
        self.busy = False  # a session (or snapshot) reads the scheduler state
        self._quiet = asyncio.Event()  # set while none does and every fact is applied
        self._quiet.set()
        # scheduler events that arrived while a session (or snapshot) read the state
        self.backlog: list[tuple[float, SchedulerEvent]] = []
        self.launchable: set[int] = set()  # jobs whose start is durable
        self.seen: set[tuple[int, str]] = set()  # (job, host) an agent reported running
        self.sessions = 0
        # the scheduler state's failure-cache hits as of the end of the last session
        self.failure_cache_hits = 0
        self.last_result: SessionResult | None = None
        self._reasons: dict[int, tuple[str, str]] = {}  # pend reasons of the last session
        self._reservations: dict[int, Reservation] = {}  # of the last session, by job
        self._facts_since_snapshot = 0
        self._up_since = 0.0  # when start() ran: agents get a fresh limit_grace then
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="xce-session")

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        """Recover from the log, then log the configuration if it is new or changed, and
        the in-flight hosts' request times if the scheduler state lacks them."""
        with collector_paused():  # (bench_controller.py recovery: about 15 %)
            last = self._recover()
        settle_heap()  # what was recovered stays: keep it out of the collector's way
        self.journal = Journal(self.store, last, asyncio.get_running_loop())
        now = self._up_since = self.clock()
        for host in self.view.hosts.values():  # a fresh grace period for every agent
            if host.state in ("ok", "closed"):
                host.last_heartbeat = now
            elif host.state == "unreach":  # the time the controller was down not counted
                host.unreach_since = now
        # Dispatches in the log are durable: each agent is told again until it reports
        # the job (it starts a job at most once, and reports any it lost).
        self.launchable = {j.spec.id for j in self.view.jobs.values() if j.state == RUN}
        self.seen = set()
        if last == 0:
            static = [HostStateChanged(h.name, "unavail", now) for h in self.config.hosts]
            await self.commit(now, [ConfigLoaded(self.config), *static])
        elif self.state.config != self.config:
            added = [
                HostStateChanged(h.name, "unavail", now)
                for h in self.config.hosts
                if h.name not in self.view.hosts
            ]
            await self.commit(now, [ConfigLoaded(self.config), *added])
        drift = in_flight_drift(self.state, self.view, now)
        if drift:
            await self.commit(now, drift)

    def _recover(self) -> int:
        last = 0
        snapshot = self.store.latest_snapshot()
        if snapshot is not None:
            last, events = snapshot
            for event in events:
                self._apply(0.0, event, record=False)
            extra = self.store.snapshot_extra(last)
            if extra:
                kept = msgspec.msgpack.decode(extra, type=_Snapshot)
                self.view.restore_finished(kept.finished)
                self.view.last_job_id = max(self.view.last_job_id, kept.last_job_id)
                self.view.last_host_number = kept.last_host_number
                self.tokens.restore(kept.tokens)
                self.leases.restore(kept.leases)
                self.records.restore(kept.requests, kept.instances)
                self.view.expected = {e.name: e for e in kept.expected}
                for name, more in kept.hosts.items():
                    host = self.view.hosts[name]
                    host.reason, host.provider = more.reason, more.provider
                    host.token_sha256, host.joined = more.token_sha256, more.joined
                    host.request = more.request
        for fact in self.store.read(after=last):
            self._apply(fact.time, fact.event, record=False)
            self._facts_since_snapshot += 1
            last = fact.seq
        if self.recorder is not None and last > 0:  # the recording starts mid-run
            for event in state_events(self.state):
                self.recorder.event(self.clock(), event)
        log.info("recovered %d jobs, %d hosts up to fact %d",
                 len(self.view.jobs), len(self.view.hosts), last)
        return last

    async def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self.journal is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.journal.close)
        if self.recorder is not None:
            self.recorder.close()

    # ------------------------------------------------------------------ facts
    def _apply(self, time: float, event: Event, record: bool = True) -> None:
        """Follow one fact: the view and the records take every fact; the scheduler
        state (and the recording, its input) only scheduler events."""
        if is_scheduler_event(event):
            if self.busy:
                self.backlog.append((time, event))
            else:
                self.state.apply(event)
                if record and self.recorder is not None:
                    self.recorder.event(time, event)
        self.view.apply(event, time)
        self.tokens.apply(event)
        self.leases.apply(event)
        self.records.apply(event)

    def emit(self, time: float, events: Sequence[Event]) -> asyncio.Future[int]:
        """Apply `events` in memory and queue them to the log; the future resolves when
        they are durable. A host fact brings the record facts that follow from it
        (records.py) into the same commit."""
        assert self.journal is not None
        facts: list[Event] = []
        for event in events:
            self._apply(time, event)
            facts.append(event)
            for derived in self.records.follow(event, time):
                self._apply(time, derived)
                facts.append(derived)
        self._facts_since_snapshot += len(facts)
        return self.journal.append(time, facts)

    async def commit(self, time: float, events: Sequence[Event]) -> int:
        return await self.emit(time, events)

    # ------------------------------------------------------------------ sessions
    async def run_session(self) -> SessionResult | None:
        """One scheduling session on the scheduler state, off the event loop."""
        if self.busy:
            return None
        now = self.clock()
        self.reading()
        try:
            result, reasons = await asyncio.get_running_loop().run_in_executor(
                self._executor, _session, self.state, now
            )
        except BaseException:
            self.done_reading()
            raise
        if self.recorder is not None:  # (before the facts that waited: it did not see them)
            self.recorder.session(now, result)
        backlog = self.done_reading()
        self.sessions += 1
        self.failure_cache_hits = self.state.failure_cache_hits
        self.last_result = result
        self._reasons = reasons
        self._reservations = {found.job: found for found in result.reservations}
        stale_jobs: set[int] = set()
        stale_hosts: set[str] = set()
        for _time, event in backlog:
            _touched(event, stale_jobs, stale_hosts)
        started: list[JobStarted] = []
        for decision in result.dispatch:
            job = self.view.jobs.get(decision.job)
            if (
                decision.job in stale_jobs
                or job is None
                or job.state != PEND
                or any(h in stale_hosts for h in decision.hosts)
                or any(self._host_state(h) != "ok" for h in decision.hosts)
            ):
                log.info("session %d: dispatch of job %d dropped (changed meanwhile)",
                         self.sessions, decision.job)
                continue
            event = JobStarted(decision.job, dict(decision.hosts), now, dict(decision.pools))
            try:
                self.state.apply(event)
            except SchedulerInputError as err:  # should not happen: checked above
                log.error("session %d: dispatch of job %d refused: %s",
                          self.sessions, decision.job, err)
                continue
            if self.recorder is not None:
                self.recorder.event(now, event)
            self.view.apply(event, now)
            started.append(event)
        if started:
            assert self.journal is not None
            self._facts_since_snapshot += len(started)
            durable = self.journal.append(now, started)
            ids = [e.job for e in started]
            durable.add_done_callback(lambda f: self._started_durable(f, ids))
        if self._facts_since_snapshot >= self.settings.snapshot_every:
            await self.snapshot()
        return result

    def reading(self) -> None:
        """A session or snapshot starts reading the scheduler state off the loop: facts
        wait in the backlog until it is done."""
        self.busy = True
        self._quiet.clear()

    def done_reading(self) -> list[tuple[float, SchedulerEvent]]:
        """The state is no longer read: the facts that waited are applied (and
        returned), and whoever waits for a quiet state is woken."""
        self.busy = False
        backlog, self.backlog = self.backlog, []
        for time, event in backlog:
            self.state.apply(event)
            if self.recorder is not None:
                self.recorder.event(time, event)
        self._quiet.set()
        return backlog

    async def quiet(self) -> None:
        """Wait until no session or snapshot reads the scheduler state and every fact
        is applied to it (woken by done_reading, no polling)."""
        while self.busy:
            await self._quiet.wait()

    def _started_durable(self, durable: asyncio.Future[int], jobs: list[int]) -> None:
        """Dispatches on disk: their agents may now be told to start them."""
        if not durable.cancelled() and durable.exception() is None:
            self.launchable.update(jobs)

    def _host_state(self, name: str) -> str:
        host = self.view.hosts.get(name)
        return "gone" if host is None else host.state

    async def snapshot(self) -> None:
        """Snapshot the state as of every fact queued so far (finished jobs beside it)."""
        if self.busy or self.journal is None:
            return
        self.view.forget_finished(self.clock() - self.settings.clean_period)
        self.records.forget(self.clock() - self.settings.clean_period)
        requests, instances = self.records.snapshot()
        view = self.view
        extra = msgspec.msgpack.encode(_Snapshot(
            view.last_job_id, view.finished(), list(view.expected.values()),
            {h.name: _HostExtra(h.reason, h.provider, h.token_sha256, h.joined, h.request)
             for h in view.hosts.values()},
            view.last_host_number, tokens=self.tokens.snapshot(),
            leases=self.leases.snapshot(), requests=requests, instances=instances,
        ))
        # The state and the view reflect exactly the facts queued so far; facts that
        # arrive while the state is read wait in the backlog and follow the snapshot.
        seq = self.journal.queued_seq
        self.reading()
        try:
            events = await asyncio.get_running_loop().run_in_executor(
                self._executor, state_events, self.state
            )
            durable = self.journal.snapshot(seq, events, extra)
        finally:
            self.done_reading()
        self._facts_since_snapshot = 0
        await durable

    def pend_reason(self, job: int) -> tuple[str, str]:
        return self._reasons.get(job, ("New job is waiting for scheduling", "new"))

    def reservation(self, job: int) -> Reservation | None:
        """The pending job's reservation in the last session, if it got one."""
        return self._reservations.get(job)

    def session_delay(self) -> float:
        """Seconds until the next session: `session_interval`, or sooner when the last
        session's `next_due` says its decisions could change before then."""
        due = self.last_result.next_due if self.last_result is not None else float("inf")
        return session_delay(self.config.session_interval, self.clock(), due)

    def run_limit(self, spec: JobSpec) -> float | None:
        """The job's run limit in seconds: its own, else its queue's (None: none)."""
        return run_limit(spec, self.state.queues.get(spec.queue))

    # ------------------------------------------------------------------ jobs
    async def submit(self, who: Identity, request: SubmitRequest) -> tuple[int, str]:
        user = request.user or who.name
        if user != who.name and who.role != "admin":
            raise ApiProblem(403, f"only an admin may submit as another user ({user})")
        now = self.clock()
        spec = JobSpec(
            id=self.view.last_job_id + 1, user=user, queue=request.queue, n=request.n,
            res=request.res, submit=now, priority=request.priority, name=request.name,
            hold=request.hold, command=list(request.command), cwd=request.cwd,
            env=dict(request.env), output=request.output, error=request.error,
            run_limit=request.run_limit,
        )
        try:
            spec = self.state.resolve(spec)
        except SubmitError as err:
            raise ApiProblem(400, str(err)) from err
        too_large = oversize(self.state.config, self.state.live_hosts(), spec.n, spec.res)
        if too_large is not None:
            raise ApiProblem(400, too_large)
        self.view.last_job_id = spec.id  # reserved even if the commit fails
        await self.commit(now, [JobSubmitted(spec)])
        return spec.id, spec.queue

    def job(self, job_id: int) -> JobRecord:
        job = self.view.jobs.get(job_id)
        if job is None:
            raise ApiProblem(404, f"Job <{job_id}>: No matching job found")
        return job

    async def kill(self, who: Identity, job_id: int) -> JobRecord:
        job = self.job(job_id)
        if who.role != "admin" and job.spec.user != who.name:
            raise ApiProblem(403, f"Job <{job_id}>: not the owner of the job")
        if job.state in FINISHED:
            raise ApiProblem(409, f"Job <{job_id}>: Job has already finished")
        await self.commit(self.clock(), [JobKilled(job_id, self.clock())])
        return job

    async def hold(self, who: Identity, job_id: int, held: bool) -> JobRecord:
        job = self.job(job_id)
        if who.role != "admin" and job.spec.user != who.name:
            raise ApiProblem(403, f"Job <{job_id}>: not the owner of the job")
        if job.state not in (PEND, PSUSP):
            raise ApiProblem(409, f"Job <{job_id}>: only a pending job can be held or released")
        await self.commit(self.clock(), [JobHeld(job_id, held)])
        return job

    # ------------------------------------------------------------------ hosts
    def _may_manage(self, who: Identity, host: HostView | ExpectedHost) -> None:
        """Admins manage every host; a provisioner only hosts that came from templates,
        with the current fencing token of their provider's lease."""
        if who.role == "admin":
            return
        template = host.template
        if who.role != "provisioner" or template is None:
            raise ApiProblem(403, f"role {who.role} may not change host {host.name}")
        self.fenced(who, host.provider)

    def fenced(self, who: Identity, provider: str) -> None:
        """A provisioner's change to `provider`: refused unless it holds the provider's
        live lease and sends its current fencing token."""
        if who.role != "provisioner":
            return
        try:
            self.leases.check(provider, who.name, who.fence, self.clock())
        except LeaseRefused as err:
            self.refuse(who, err.status, err.message)

    def refuse(self, who: Identity, status: int, message: str,
               level: int = logging.WARNING) -> NoReturn:
        """Refuse a request, logged with who and why."""
        log.log(level, "refused %s %s: %s", who.role, who.name, message)
        raise ApiProblem(status, message)

    def providers(self) -> set[str]:
        """The providers the catalog names: of templates, and of countables."""
        catalog = self.state.config.catalog
        return ({t.provider for t in catalog.templates}
                | {c.provider for c in catalog.countables if c.provider})

    async def lease(self, who: Identity, provider: str, ttl: float) -> Lease:
        """Take or renew the lease on `provider` for the caller."""
        if provider not in self.providers():
            raise ApiProblem(404, f"provider {provider}: no template or countable of the "
                                  "catalog names it")
        try:
            fact = self.leases.grant(provider, who.name, ttl, self.clock())
        except LeaseRefused as err:  # a standby instance asks every round: not a warning
            self.refuse(who, err.status, err.message, logging.INFO)
        await self.commit(self.clock(), [fact])
        return self.leases.leases[provider]

    async def release_lease(self, who: Identity, provider: str, token: int) -> None:
        try:
            fact = self.leases.release(provider, who.name, token, self.clock())
        except LeaseRefused as err:
            self.refuse(who, err.status, err.message)
        await self.commit(self.clock(), [fact])

    def _transition(self, name: str, target: str, reason: str = "") -> HostStateChanged:
        host = self.view.hosts[name]
        try:
            why = reason_for(name, host.state, target, reason)
        except TransitionError as err:
            raise ApiProblem(409, str(err)) from err
        return HostStateChanged(name, target, self.clock(), why)

    def _host(self, who: Identity, name: str) -> HostView:
        host = self.view.hosts.get(name)
        if host is None:
            if name in self.view.expected:
                raise ApiProblem(409, f"host {name} is {self.view.expected[name].state}: "
                                      "it has not joined")
            raise ApiProblem(404, f"host {name}: no such host")
        self._may_manage(who, host)
        return host

    async def set_host_open(self, who: Identity, name: str, open_: bool,
                            reason: str = "") -> None:
        host = self._host(who, name)
        target = "ok" if open_ else "closed"
        if host.state not in ("ok", "closed"):
            raise ApiProblem(409, f"host {name} is {host.state}: only an ok or closed host "
                                  "can be opened or closed")
        if host.state != target:
            await self.commit(self.clock(), [self._transition(name, target, reason)])

    async def decommission(self, who: Identity, name: str) -> None:
        """A drained (closed) host is given back: refused while jobs run on it."""
        host = self._host(who, name)
        if host.static:
            raise ApiProblem(409, f"host {name} is in the cluster file: close it instead "
                                  "(only provisioned hosts are decommissioned)")
        if host.jobs:
            raise ApiProblem(409, f"host {name} still runs job(s) "
                                  f"{', '.join(map(str, sorted(host.jobs)))}: drain it first")
        await self.commit(self.clock(), [self._transition(name, "decommissioned")])

    async def reclaimed(self, who: Identity, name: str) -> None:
        """The provider took a provisioned host back: it is lost, its jobs are
        requeued or exited per queue."""
        host = self._host(who, name)
        if host.static:
            raise ApiProblem(409, f"host {name} is in the cluster file: no provider has it")
        now = self.clock()
        events: list[Event] = [self._transition(name, "lost", RECLAIMED)]
        for job_id in list(host.jobs):
            events.extend(self._lost(self.view.jobs[job_id], now, f"host {name} reclaimed"))
        await self.commit(now, events)

    async def remove(self, who: Identity, name: str) -> None:
        """A decommissioned host is gone (its provider released it); a failed expected
        host is cleared; an expected one is cancelled (it leaves the in-flight count)."""
        now = self.clock()
        expected = self.view.expected.get(name)
        if expected is not None:
            self._may_manage(who, expected)
            why = reason_for(name, expected.state, "removed")
            events: list[Event] = [ExpectedHostEnded(name, "removed", why, now)]
            if expected.state == "expected":  # a failed one already left the count
                events.append(self._in_flight(expected.template, {name}))
            await self.commit(now, events)
            return
        host = self._host(who, name)
        if host.static:
            raise ApiProblem(409, f"host {name} is in the cluster file: edit the file instead")
        self._transition(name, "removed")  # only a decommissioned host may go
        await self.commit(now, [HostRemoved(name, now)])

    def _in_flight(self, template: str, leaving: Collection[str] = (),
                   added: Sequence[float] = ()) -> SupplyChanged:
        """The scheduler's in-flight hosts of `template` once `leaving` (expected hosts
        that joined, failed or were cancelled) are gone and `added` (request times of
        new ones) are in: their count and when each was requested (its expected host's
        creation), so that the plan expects each at its own request time + lead time."""
        times = sorted([*self.view.requested(template, leaving), *added])
        return SupplyChanged(in_flight={template: len(times)}, requested={template: times},
                             time=self.clock())

    async def request_hosts(self, who: Identity, template: str, provider: str,
                            request: str, count: int, deadline_in: float,
                            jobs: Sequence[int] = ()) -> list[tuple[ExpectedHost, str]]:
        """A request of `count` hosts of `template` from its provider for `jobs` (the
        demand's, in scheduling order), recorded with one instance record and one
        expected host per host, all in one commit. Each host counts as in flight at
        once (requested now); an agent may join as it with its single-use token until
        the deadline. Refused whole if the template's max would be passed."""
        found = self.state.templates.get(template)
        if found is None:
            raise ApiProblem(404, f"template {template}: no such template in the catalog")
        if who.role not in ("admin", "provisioner"):
            raise ApiProblem(403, f"role {who.role} may not add expected hosts")
        if provider and provider != found.provider:
            self.refuse(who, 403, f"template {template} belongs to provider {found.provider}, "
                                  f"not {provider}")
        self.fenced(who, found.provider)
        now = self.clock()
        request = request or f"{who.name}-{secrets.token_hex(4)}"
        if request in self.records.requests:
            raise ApiProblem(409, f"request {request} exists already")
        alive = self.state.template_alive(template) + self.view.in_flight(template)
        if count > template_room(found.max, alive):
            raise ApiProblem(409, f"Template {template} allows no more hosts (max {found.max}, "
                                  f"{alive} alive or in flight, {count} asked)")
        events: list[Event] = [
            RequestRecorded(request, found.provider, template, count, who.name, now,
                            tuple(jobs))]
        tokens: list[tuple[str, str]] = []
        for number in range(self.view.last_host_number + 1,
                            self.view.last_host_number + 1 + count):
            name = f"{template}-{number}"
            token = "xcej_" + secrets.token_urlsafe(32)
            digest = hashlib.sha256(token.encode()).hexdigest()
            tokens.append((name, token))
            events += [
                HostExpected(name, template, found.provider, request, digest,
                             now + deadline_in, now),
                InstanceRecorded(name, request, found.provider, template, now),
            ]
        events.append(self._in_flight(template, added=[now] * count))
        await self.commit(now, events)
        return [(self.view.expected[name], token) for name, token in tokens]

    def _request(self, who: Identity, request: str) -> RequestRecord:
        record = self.records.requests.get(request)
        if record is None:
            raise ApiProblem(404, f"request {request}: no such request")
        if who.role not in ("admin", "provisioner"):
            raise ApiProblem(403, f"role {who.role} may not change provisioning requests")
        self.fenced(who, record.provider)
        return record

    async def accept_request(self, who: Identity, request: str,
                             instances: dict[str, str]) -> RequestRecord:
        """The provider started instances of a request: `instances` maps each expected
        host to the provider's instance id."""
        record = self._request(who, request)
        unknown = sorted(set(instances) - set(record.hosts))
        if unknown:
            raise ApiProblem(400, f"request {request} has no host {', '.join(unknown)}")
        now = self.clock()
        try:
            for host in instances:  # checked whole before any change
                self.records.check_instance(host, "running")
            events: list[Event] = []
            for host, instance_id in instances.items():
                if self.records.instances[host].state == "requested":
                    events += self.records.change_instance(host, "running", now,
                                                           instance_id=instance_id)
        except RecordError as err:
            raise ApiProblem(409, str(err)) from err
        await self.commit(now, events)
        return record

    async def refuse_request(self, who: Identity, request: str, reason: str) -> RequestRecord:
        """The provider refused a request: it failed; its expected hosts are cancelled
        (their instances released)."""
        record = self._request(who, request)
        now = self.clock()
        try:
            events: list[Event] = self.records.change_request(request, "failed", now, reason)
        except RecordError as err:
            raise ApiProblem(409, str(err)) from err
        cancelled = [self.view.expected[h] for h in record.hosts
                     if h in self.view.expected and self.view.expected[h].state == "expected"]
        for expected in cancelled:
            events.append(ExpectedHostEnded(expected.name, "removed", f"refused: {reason}", now))
        if cancelled:
            events.append(self._in_flight(record.template, {e.name for e in cancelled}))
        await self.commit(now, events)
        return record

    async def vanished(self, who: Identity, host: str, reason: str) -> InstanceRecord:
        """The provider no longer has an instance it made: the instance is lost; its
        expected host fails, or its joined host is lost as reclaimed (jobs requeued or
        exited per queue)."""
        instance = self.records.instances.get(host)
        if instance is None:
            raise ApiProblem(404, f"host {host}: no instance record")
        self._request(who, instance.request)
        now = self.clock()
        why = reason or "vanished from the provider"
        expected = self.view.expected.get(host)
        if host in self.view.hosts and instance.state in ("joined", "draining"):
            await self.reclaimed(who, host)
            return instance
        try:
            events: list[Event] = self.records.change_instance(host, "lost", now, why)
        except RecordError as err:
            raise ApiProblem(409, str(err)) from err
        if expected is not None and expected.state == "expected":
            events += [ExpectedHostEnded(host, "failed", why, now),
                       self._in_flight(expected.template, {host})]
        await self.commit(now, events)
        return instance

    def join_identity(self, token: str) -> Identity | None:
        """The agent a join token speaks for: an expected host before its deadline, or
        the provisioned host that joined with it."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        for expected in self.view.expected.values():
            if expected.token_sha256 == digest:
                if expected.state != "expected" or self.clock() > expected.deadline:
                    return None
                return Identity(expected.name, "agent")
        for host in self.view.hosts.values():
            if host.token_sha256 == digest:
                return Identity(host.name, "agent")
        return None

    async def register(self, name: str, request: RegisterRequest) -> Registered:
        now = self.clock()
        host = self.view.hosts.get(name)
        events: list[Event] = []
        expected = self.view.expected.get(name)
        if expected is not None:
            events.extend(self._join(expected, request, now))
        elif host is None:
            events.append(HostAdded(name, request.slots, request.type, request.model,
                                    dict(request.resources), None, "ok", now))
        elif host.state not in ("ok", "closed"):
            events.append(self._back(host))
        if events:
            await self.commit(now, events)
        host = self.view.hosts[name]
        host.last_heartbeat = now
        for job in request.running:
            if job in host.jobs:
                self.seen.add((job, name))
        kill = [j for j in request.running if j not in host.jobs]
        return Registered(self.settings.heartbeat_interval, kill)

    def _back(self, host: HostView) -> HostStateChanged:
        """The transition of a host whose agent is back (registered or heartbeating)."""
        if host.state == "unavail":
            return self._transition(host.name, "ok")
        if host.state == "lost" and host.reason == RECLAIMED:
            raise ApiProblem(409, f"host {host.name} was reclaimed by its provider: "
                                  "it cannot come back")
        state, reason = host.resume
        # Checked like any transition: a decommissioned host's agent is refused (409).
        return self._transition(host.name, state, reason if state == "closed" else "")

    def _join(self, expected: ExpectedHost, request: RegisterRequest, now: float) -> list[Event]:
        """An expected host's agent joins: the host takes the template's shape; the agent
        may add resources, never contradict the template's."""
        if expected.state != "expected" or now > expected.deadline:
            raise ApiProblem(409, f"host {expected.name} is {expected.state}: "
                                  "its join deadline passed")
        template = self.state.templates[expected.template]
        for res, value in request.resources.items():
            if res in template.resources and template.resources[res] != value:
                raise ApiProblem(409, f"host {expected.name}: {res}={value} contradicts "
                                      f"template {template.name} ({template.resources[res]})")
        resources = {**request.resources, **template.resources}
        return [
            HostAdded(expected.name, template.slots, template.type, template.model, resources,
                      template.name, "ok", now, provider=expected.provider),
            self._in_flight(expected.template, {expected.name}),
        ]

    async def heartbeat(self, name: str, beat: Heartbeat) -> HeartbeatReply:
        now = self.clock()
        host = self.view.hosts.get(name)
        if host is None or host.last_heartbeat is None or host.state not in (
            "ok", "closed", "unreach", "lost"
        ):
            raise ApiProblem(409, f"host {name} is not registered: register first")
        host.last_heartbeat = now
        pending: list[asyncio.Future[int]] = []
        if host.state in ("unreach", "lost"):
            pending.append(self.emit(now, [self._back(host)]))
        ended: list[Event] = []
        reported = set()
        for report in beat.finished:
            reported.add(report.job)
            job = self.view.jobs.get(report.job)
            if job is not None and job.state == RUN and next(iter(job.hosts)) == name:
                # Only a reason the agent may give (not free text into the log).
                why = report.reason if report.reason == RUN_LIMIT_REACHED else ""
                ended.append(JobFinished(report.job, now, report.exit_code, report.signal, why))
        running = set(beat.running)
        start: list[Launch] = []
        for job_id in list(host.jobs):
            if job_id in running:
                self.seen.add((job_id, name))
            elif job_id in reported:
                continue
            elif (job_id, name) in self.seen:
                ended.extend(self._lost(self.view.jobs[job_id], now, f"lost on host {name}"))
            elif job_id in self.launchable:
                start.append(self._launch(self.view.jobs[job_id], name))
        if ended:
            pending.append(self.emit(now, ended))
        for future in pending:
            await future
        kill = sorted(j for j in running if j not in host.jobs)
        return HeartbeatReply(start, kill, sorted(reported), self.settings.heartbeat_interval)

    def _launch(self, job: JobRecord, host: str) -> Launch:
        spec = job.spec
        return Launch(
            job=spec.id, user=spec.user, command=list(spec.command), hosts=dict(job.hosts),
            run=next(iter(job.hosts)) == host, cwd=spec.cwd, env=dict(spec.env),
            output=spec.output, error=spec.error, name=spec.name, queue=spec.queue,
            run_limit=self.run_limit(spec),
        )

    def _lost(self, job: JobRecord, now: float, why: str) -> list[Event]:
        """A running job whose host was lost: requeued, or exited per its queue."""
        for host in job.hosts:
            self.seen.discard((job.spec.id, host))
        self.launchable.discard(job.spec.id)
        ended = lost_job(self.state, job.spec, now, why)
        log.warning("job %d %s: %s", job.spec.id, why,
                    "requeued" if isinstance(ended, JobRequeued) else "exited")
        return [ended]

    async def watch_limits(self) -> None:
        """End the running jobs past their run limit by more than `limit_grace` that
        their agent has not reported ended (it ends them at the limit): EXIT with
        RUN_LIMIT_REACHED and no exit status; the agent is then told to kill them."""
        now = self.clock()
        ended: list[Event] = []
        for job in self._running():
            assert job.start_time is not None
            limit = self.run_limit(job.spec)
            if overdue(job.start_time, limit, self.settings.limit_grace, now, self._up_since):
                log.warning("job %d: past its run limit and not reported ended: ending it",
                            job.spec.id)
                ended.append(JobFinished(job.spec.id, now, LOST_EXIT_CODE, None,
                                         RUN_LIMIT_REACHED))
        if ended:
            await self.commit(now, ended)

    def _running(self) -> list[JobRecord]:
        """The running jobs, found through the hosts (never a scan of every job)."""
        found: dict[int, JobRecord] = {}
        for host in self.view.hosts.values():
            for job_id in host.jobs:
                job = self.view.jobs.get(job_id)
                if job is not None and job.state == RUN and job.start_time is not None:
                    found[job_id] = job
        return list(found.values())

    async def watch_hosts(self) -> None:
        """Hosts that stopped heartbeating become unreach; after `requeue_after` their
        jobs are requeued or exited (never left as phantom RUN)."""
        now = self.clock()
        events: list[Event] = []
        for host in self.view.hosts.values():
            if (
                host.state in ("ok", "closed")
                and host.last_heartbeat is not None
                and now - host.last_heartbeat > self.settings.unreach_after
            ):
                log.warning("host %s: no heartbeat for %.0f s: unreach",
                            host.name, now - host.last_heartbeat)
                events.append(HostStateChanged(host.name, "unreach", now,
                                               reason_for(host.name, host.state, "unreach")))
        if events:
            await self.commit(now, events)
        lost: list[Event] = []
        late = [e for e in self.view.expected.values()
                if e.state == "expected" and now > e.deadline]
        for expected in late:
            log.warning("expected host %s did not join by its deadline: failed", expected.name)
            why = reason_for(expected.name, "expected", "failed")
            lost.append(ExpectedHostEnded(expected.name, "failed", why, now))
        for template in sorted({e.template for e in late}):
            lost.append(self._in_flight(template, {e.name for e in late}))
        for host in self.view.hosts.values():
            if (
                host.state == "unreach"
                and host.unreach_since is not None
                and now - host.unreach_since > self.settings.requeue_after
            ):
                lost.append(HostStateChanged(host.name, "lost", now,
                                             reason_for(host.name, "unreach", "lost")))
                for job_id in list(host.jobs):
                    job = self.view.jobs[job_id]
                    if job.state == RUN and not any(
                        isinstance(e, JobRequeued | JobFinished) and e.job == job_id for e in lost
                    ):
                        lost.extend(self._lost(job, now, f"host {host.name} unreachable"))
        if lost:
            await self.commit(now, lost)


def in_flight_drift(state: SchedulerState, view: ClusterView, now: float) -> list[Event]:
    """The in-flight hosts the scheduler state counts or times otherwise than the
    expected-host records, which are the truth (a log written before request times
    were sent to the scheduler): one SupplyChanged per template that differs."""
    events: list[Event] = []
    for template in state.templates:
        times = view.requested(template)
        count = max(0, state.in_flight.get(template, 0))
        if count != len(times) or (times and state.requested.get(template) != times):
            events.append(SupplyChanged(in_flight={template: len(times)},
                                        requested={template: times}, time=now))
    return events


def _session(state: SchedulerState, now: float) -> tuple[SessionResult, dict[int, tuple[str, str]]]:
    """A session and its pend reasons by job (built here, off the event loop)."""
    result = run_session(state, now)
    reasons = {m.id: (g.reason, g.kind) for g in result.pending for m in g.members}
    return result, reasons


def _touched(event: SchedulerEvent, jobs: set[int], hosts: set[str]) -> None:
    """Record which job or host an event changed (decisions about them are stale)."""
    match event:
        case JobSubmitted():
            pass
        case JobKilled(job=job) | JobFinished(job=job) | JobRequeued(job=job) | JobHeld(job=job):
            jobs.add(job)
        case JobStarted(job=job, hosts=used):
            jobs.add(job)
            hosts.update(used)
        case HostStateChanged(name=name) | HostRemoved(name=name):
            hosts.add(name)
        case _:
            pass
