"""The fact kernel: the controller's facts, applied in memory and made durable.

Every change is a fact (an `xce.model.events.Event`): it is applied in memory (the
controller's view and records, and, for a scheduler event, the scheduler state unless
a session or snapshot reads it, in which case it waits in the backlog), queued to the
durable log, and acknowledged only once durable. Facts that are only the controller's
records (leases, provisioning requests and instances, expected hosts, token steps)
never reach the scheduler state: a provisioner renewing its lease every round changes
nothing the scheduler decides on, so its cross-session caches hold (docs/cluster.md).
The kernel also recovers all of it from the log, and snapshots it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

import msgspec

from xce.controller.accounting import Usage, accounted, ended_job
from xce.controller.journal import Journal
from xce.controller.leases import Lease, LeaseTable
from xce.controller.records import InstanceRecord, RecordBook, RequestRecord
from xce.controller.store import Fact, Store
from xce.controller.suspend import SuspendBook
from xce.controller.tokens import PoolTokens, TokenLedger
from xce.controller.view import ClusterView, ExpectedHost, JobRecord
from xce.model.causes import Cause
from xce.model.cluster import ClusterConfig
from xce.model.events import (
    Event,
    JobStarted,
    JobSuspended,
    SchedulerEvent,
    is_scheduler_event,
)
from xce.model.lifecycle import HOST_LIFE
from xce.model.recording import Recorder
from xce.model.result import SessionResult
from xce.sched import SchedulerState
from xce.sched.queries import SchedulerQueries
from xce.sched.rebuild import state_events
from xce.tuning import collector_paused, settle_heap

log = logging.getLogger("xce.controller")

Clock = Callable[[], float]
T = TypeVar("T")


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


class Watch(Protocol):
    """What follows the controller as it runs, not from the log (the metrics,
    controller/metrics.py): the end of recovery, each live fact just before it applies
    (never a recovered one), each session's result, each commit's time in the store."""

    def recovered(self) -> None: ...

    def fact(self, time: float, event: Event) -> None: ...

    def session(self, result: SessionResult) -> None: ...

    def appended(self, seconds: float) -> None: ...


class _HostExtra(msgspec.Struct):
    """What the scheduler state does not keep of a host."""

    reason: str
    provider: str
    token_sha256: str
    joined: float
    request: str = ""
    # its last transition's cause (snapshots of release 0.1 have none: recovery derives
    # it from the state and reason, HOST_LIFE.cause_of)
    cause: Cause | None = None


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
    suspended: list[JobSuspended] = []  # the running jobs stopped (suspend.py)


class FactKernel:
    """The facts and what they build: the scheduler state, the view, the token ledger,
    the leases and the provisioning records; the journal that makes facts durable; the
    session thread that reads the scheduler state off the event loop."""

    def __init__(self, config: ClusterConfig, store: Store, settings: Settings,
                 clock: Clock, recorder: Recorder | None) -> None:
        self.config = config
        self.store = store
        self.settings = settings
        self.clock = clock
        self.recorder = recorder
        self._core = SchedulerState()  # changed only by facts (`_apply`)
        self.view = ClusterView()
        self.tokens = TokenLedger()  # borrowed tokens per countable pool (supply.py)
        self.leases = LeaseTable()  # which provisioner owns which provider
        self.records = RecordBook()  # provisioning requests and their instances
        self.suspends = SuspendBook()  # running jobs stopped (xce stop)
        # fact type -> the books that follow it (`_apply`: most facts are job facts
        # that only the state, the view and the suspend book read; bench_controller.py
        # recovery)
        self._followers: dict[type[Event], list[Callable[[Event], None]]] = {}
        for book in (self.tokens, self.leases, self.records, self.suspends):
            for kind in book.FOLLOWS:
                self._followers.setdefault(kind, []).append(book.apply)
        self.journal: Journal | None = None
        self.busy = False  # a session (or snapshot) reads the scheduler state
        self._quiet = asyncio.Event()  # set while none does and every fact is applied
        self._quiet.set()
        # scheduler events that arrived while a session (or snapshot) read the state
        self.backlog: list[tuple[float, SchedulerEvent]] = []
        self.applied = 0  # the seq of the last fact recovered or followed
        self.up_since = 0.0  # when the log was opened: agents get a fresh limit_grace then
        self._facts_since_snapshot = 0
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="xce-session")
        self.watch: Watch | None = None  # set before `open`

    @property
    def state(self) -> SchedulerQueries:
        """The scheduler state as the desks and the API read it (xce.sched.queries):
        it changes only by facts, and a session reads it whole through `off_loop`."""
        return self._core

    # ------------------------------------------------------------------ the log
    def open(self) -> int:
        """Recover from the log and open the journal after its last fact (returned; 0:
        a new log). The controller is up since now."""
        last = self.recover_all()
        self.open_journal(last)
        return last

    def recover_all(self) -> int:
        """Recover from the log (`recover`), the collector paused; the last fact's seq."""
        with collector_paused():  # (bench_controller.py recovery: about 15 %)
            last = self.recover()
            # What was recovered stays: frozen out of the collector's way before it
            # runs again (enabled first, its next allocation would rescan it all).
            settle_heap(collect=False)
        if self.watch is not None:
            self.watch.recovered()
        return last

    def open_journal(self, last: int) -> None:
        """Write facts after `last` from now on (the controller is up since now)."""
        self.journal = Journal(self.store, last, asyncio.get_running_loop(),
                               self.watch.appended if self.watch is not None else None)
        self.up_since = self.clock()

    def follow(self, facts: Sequence[Fact]) -> None:
        """Apply facts another controller wrote (a standby follows the leader's log),
        as recovery applies them; those already applied are passed over."""
        for fact in facts:
            if fact.seq > self.applied:
                self._apply(fact.time, fact.event, record=False)
                self._facts_since_snapshot += 1
                self.applied = fact.seq

    def recover(self) -> int:
        """Apply the latest snapshot and the facts after it; the last fact's number."""
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
                self.suspends.restore(kept.suspended)
                self.view.expected = {e.name: e for e in kept.expected}
                for name, more in kept.hosts.items():
                    host = self.view.hosts[name]
                    host.reason, host.provider = more.reason, more.provider
                    host.cause = HOST_LIFE.cause_of(host.state, more.reason, more.cause)
                    host.token_sha256, host.joined = more.token_sha256, more.joined
                    host.request = more.request
        for fact in self.store.read(after=last):
            self._apply(fact.time, fact.event, record=False)
            self._facts_since_snapshot += 1
            last = fact.seq
        self.applied = last
        if self.recorder is not None and last > 0:  # the recording starts mid-run
            for event in state_events(self._core):
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
        if record and self.watch is not None:
            self.watch.fact(time, event)
        if is_scheduler_event(event):
            if self.busy:
                self.backlog.append((time, event))
            else:
                self._core.apply(event)
                if record and self.recorder is not None:
                    self.recorder.event(time, event)
        self.view.apply(event, time)
        for follow in self._followers.get(type(event), ()):
            follow(event)

    def emit(self, time: float, events: Sequence[Event],
             usage: Mapping[int, Usage] | None = None) -> asyncio.Future[int]:
        """Apply `events` in memory and queue them to the log; the future resolves when
        they are durable. A host fact brings the record facts that follow from it
        (records.py) into the same commit, and a fact that ends a job its accounting
        record (accounting.py; `usage`: what agents reported of the jobs' ends)."""
        assert self.journal is not None
        facts: list[Event] = []
        for event in events:
            self._apply(time, event)
            facts.append(event)
            derived = list(self.records.follow(event, time))
            if (job := ended_job(event)) is not None and job in self.view.jobs:
                derived.append(accounted(self.view.jobs[job], time, (usage or {}).get(job)))
            for fact in derived:
                self._apply(time, fact)
                facts.append(fact)
        return self.append(time, facts)

    async def commit(self, time: float, events: Sequence[Event]) -> int:
        return await self.emit(time, events)

    def apply_dispatch(self, time: float, event: JobStarted) -> None:
        """A session's dispatch, once no session reads the state: to the scheduler
        state (which may refuse it, SchedulerInputError: nothing changed), the recording
        and the view. Queued to the log with `append`."""
        self._core.apply(event)
        if self.recorder is not None:
            self.recorder.event(time, event)
        self.view.apply(event, time)

    def append(self, time: float, facts: Sequence[Event]) -> asyncio.Future[int]:
        """Queue facts already applied in memory to the log; the future resolves when
        they are durable."""
        assert self.journal is not None
        self._facts_since_snapshot += len(facts)
        return self.journal.append(time, facts)

    def record_session(self, time: float, result: SessionResult) -> None:
        """The recording (a replay's input) takes a session: call it before
        `done_reading`, since the session did not see the facts that waited."""
        if self.recorder is not None:
            self.recorder.session(time, result)
        if self.watch is not None:
            self.watch.session(result)

    # ------------------------------------------------------------------ reading the state
    def reading(self) -> None:
        """A session or snapshot starts reading the scheduler state off the loop: facts
        wait in the backlog until it is done."""
        self.busy = True
        self._quiet.clear()

    def off_loop(self, read: Callable[[SchedulerState], T]) -> asyncio.Future[T]:
        """`read(state)` on the session thread (between `reading` and `done_reading`)."""
        return asyncio.get_running_loop().run_in_executor(self._executor, read, self._core)

    def done_reading(self) -> list[tuple[float, SchedulerEvent]]:
        """The state is no longer read: the facts that waited are applied (and
        returned), and whoever waits for a quiet state is woken."""
        self.busy = False
        backlog, self.backlog = self.backlog, []
        for time, event in backlog:
            self._core.apply(event)
            if self.recorder is not None:
                self.recorder.event(time, event)
        self._quiet.set()
        return backlog

    async def quiet(self) -> None:
        """Wait until no session or snapshot reads the scheduler state and every fact
        is applied to it (woken by done_reading, no polling)."""
        while self.busy:
            await self._quiet.wait()

    # ------------------------------------------------------------------ snapshots
    async def snapshot_when_due(self) -> None:
        """A snapshot once `snapshot_every` facts were queued since the last one."""
        if self._facts_since_snapshot >= self.settings.snapshot_every:
            await self.snapshot()

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
            {h.name: _HostExtra(h.reason, h.provider, h.token_sha256, h.joined, h.request,
                                h.cause)
             for h in view.hosts.values()},
            view.last_host_number, tokens=self.tokens.snapshot(),
            leases=self.leases.snapshot(), requests=requests, instances=instances,
            suspended=self.suspends.snapshot(),
        ))
        # The state and the view reflect exactly the facts queued so far; facts that
        # arrive while the state is read wait in the backlog and follow the snapshot.
        seq = self.journal.queued_seq
        self.reading()
        try:
            events = await self.off_loop(state_events)
            durable = self.journal.snapshot(seq, events, extra)
        finally:
            self.done_reading()
        self._facts_since_snapshot = 0
        await durable
