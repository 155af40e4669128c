"""Jobs that wait before the scheduler may consider them: for a dependency condition
(sched/dependencies.py) or for room under their array's `%N` limit (sched/arrays.py).

Such a job is pending but in no bucket (like a held job): it is not in the real pass,
not in the catalog pass, and never counts in demand. It enters its bucket when the
events that satisfy it arrive: a job it names starts or ends (only the conditions
that name that job are evaluated again), or an element of its array ends. `Waits` is
the state's part for them; the state calls it from its event arms (`settle` once an
event is applied).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Final

from xce.model.events import EndedJob, EndedJobsRestored, JobFinished, JobKilled
from xce.model.jobs import JobSpec
from xce.model.result import PendGroup, TraceEntry
from xce.resreq.depend import DependError, conditions_of, parse_depend
from xce.sched.arrays import ArrayRecord
from xce.sched.buckets import PendingJob
from xce.sched.dependencies import (
    DONE_STATE,
    EXIT_STATE,
    PEND,
    RUN,
    Dependency,
    Leaf,
    bind,
)
from xce.sched.ended import JobMemory
from xce.sched.errors import SubmitError
from xce.sched.reasons import DEPENDENCY, LIMIT
from xce.sched.waitlist import WaitList

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState

LOST_CODE: Final = -1  # no process exit status (xce.sched.loss.LOST_EXIT_CODE)
_KEY: Final = attrgetter("key")  # a job's place in scheduling order (a C-level key)


class Waits:
    """Dependency conditions, job arrays and ended jobs, and the jobs waiting on them."""

    __slots__ = (
        "_arrays", "_checked", "_dependencies", "_time", "active", "arrays", "blocking",
        "dependencies", "dirty", "memory", "restoring", "shared", "watch",
    )

    def __init__(self) -> None:
        self.memory = JobMemory()
        self.arrays: dict[int, ArrayRecord] = {}
        self.dependencies: dict[int, Dependency] = {}  # pending job -> its dependency
        # (array, expression) -> the dependency an array's elements share
        self.shared: dict[tuple[int, str], Dependency] = {}
        self.watch: dict[int, list[Leaf]] = {}  # job -> the leaves that name it
        self.blocking: dict[int, Dependency] = {}  # conditions with jobs waiting on them
        self.active = False  # some array or dependency exists
        self.restoring = False  # jobs come back (a new configuration): admit them all
        self.dirty = False  # `settle` has work
        self._dependencies: dict[int, Dependency] = {}  # to evaluate again
        self._arrays: dict[int, ArrayRecord] = {}  # that may have room
        self._time = 0.0  # of the last event that changed a dependency
        self._checked: tuple[int, str, str] | None = None  # last array checked

    # ------------------------------------------------------------------ submission
    def check(self, state: SchedulerState, spec: JobSpec) -> None:
        """Refuse (SubmitError) an array element or a dependency the state cannot take:
        an index beyond max_job_array_size, a syntax error, a job that is not found."""
        if spec.index > state.config.max_job_array_size:
            raise SubmitError(
                f"job array {spec.array}: index {spec.index} exceeds max_job_array_size "
                f"{state.config.max_job_array_size}"
            )
        if (spec.array and (spec.array in state._submitted or spec.array in self.memory.ended)
                ) or spec.id in self.arrays:
            raise SubmitError(f"job {spec.array or spec.id} already exists")
        if not spec.depend:
            return
        key = (spec.array, spec.user, spec.depend)
        if spec.array and (key == self._checked or (spec.array, spec.depend) in self.shared):
            return  # (the array's elements share one dependency: checked once)
        try:
            each = any(cond.ref.each for cond in conditions_of(parse_depend(spec.depend)))
        except DependError as err:
            raise SubmitError(str(err)) from err
        bind(state, self, spec, strict=True)
        self._checked = key if spec.array and not each else None

    def submitted(self, state: SchedulerState, spec: JobSpec) -> None:
        """Register a job that is an array element, named, or dependent, and bind its
        dependency (when not bound already)."""
        self.active = True
        self._register(spec)
        if spec.depend and spec.id not in self.dependencies and not self.restoring:
            self._bind(state, spec)

    def _bind(self, state: SchedulerState, spec: JobSpec) -> None:
        key = (spec.array, spec.depend)
        dependency = self.shared.get(key) if spec.array else None
        if dependency is None:
            dependency = bind(state, self, spec, strict=False)
            for leaf in dependency.leaves:
                for job in leaf.targets:
                    self.watch.setdefault(job, []).append(leaf)
            if spec.array and not any(leaf.cond.ref.each for leaf in dependency.leaves):
                dependency.key = key
                self.shared[key] = dependency
        dependency.members.add(spec.id)
        self.dependencies[spec.id] = dependency

    def admit(self, state: SchedulerState, job: PendingJob) -> bool:
        """Whether a pending job (an array element or a dependent) may enter its bucket
        now; if not, it waits here (`state.waiting`)."""
        if self.restoring:
            return True
        spec = job.spec
        if spec.depend:
            dependency = self.dependencies.get(job.id)
            if dependency is not None and not dependency.met:
                self._block(state, dependency, job)
                return False
        if spec.array_limit:  # (elements of an array without a limit are not counted)
            record = self.arrays[spec.array]
            if job.id in record.reserved:  # (its place under the limit was kept)
                record.reserved.discard(job.id)
                return True
            if record.limit:
                if record.full():
                    record.hold_back(job)
                    state.waiting[job.id] = job
                    return False
                record.queued += 1
        return True

    def _block(self, state: SchedulerState, dependency: Dependency, job: PendingJob) -> None:
        dependency.blocked.add(job)
        self.blocking[id(dependency)] = dependency
        state.waiting[job.id] = job

    def left_bucket(self, job: PendingJob) -> None:
        """An array element left its bucket (started, killed, held, blocked again)."""
        record = self.arrays.get(job.spec.array)  # (an element of an array with a limit)
        if record is not None and record.limit and not self.restoring:
            record.queued -= 1
            self._arrays[record.id] = record
            self.dirty = True

    def unblock(self, job: PendingJob, keep_place: bool = False) -> None:
        """A waiting job leaves `state.waiting` (started, killed, held, let in); an
        element that kept its place under its array's limit gives it up, but to start
        (`keep_place`)."""
        record = self.arrays.get(job.spec.array) if job.spec.array_limit else None
        if record is not None and job.id in record.reserved and not keep_place:
            record.reserved.discard(job.id)
            record.queued -= 1
            self._arrays[record.id] = record
            self.dirty = True
        dependency = self.dependencies.get(job.id)
        if dependency is not None and dependency.blocked.pop(job.id) is not None:
            if not dependency.blocked.jobs:
                del self.blocking[id(dependency)]
            return
        if record is not None:
            record.drop(job.id)

    def reload(self, running: list[JobSpec]) -> None:
        """A new configuration: the queued jobs come back through `admit`, after the
        `running` ones are counted against their arrays' limits."""
        self.blocking = {}
        for dependency in self.dependencies.values():
            dependency.blocked = WaitList()
        for record in self.arrays.values():
            record.queued = record.running = 0
            record.reserved.clear()
            record.limited = WaitList()
            record.drop(0)  # (its heap emptied with it)
        for spec in running:
            element_of = self.arrays.get(spec.array) if spec.array_limit else None
            if element_of is not None and element_of.limit:
                element_of.running += 1

    # ------------------------------------------------------------------ job events
    def dispatched(self, state: SchedulerState, job_id: int) -> None:
        """A session dispatched a job whose condition held then and holds no more: a
        job it names was dispatched by the same session (`!started(10)`, with job
        10). A session's dispatches are simultaneous, decided on the state it read:
        the job starts (back into its bucket for `start_job`)."""
        job = state.waiting.get(job_id)
        dependency = self.dependencies.get(job_id)
        if job is None or dependency is None or job_id not in dependency.blocked.jobs:
            return  # (not waiting on its condition: start_job refuses it)
        del state.waiting[job_id]
        self.unblock(job, keep_place=True)
        record = self.arrays.get(job.spec.array) if job.spec.array_limit else None
        if record is not None and job_id in record.reserved:
            record.reserved.discard(job_id)  # (the place it kept)
        elif record is not None and record.limit:
            record.queued += 1
        state._queue(_entry(job))

    def started(self, state: SchedulerState, job_id: int, time: float) -> None:
        spec = state.running[job_id].spec
        if spec.array_limit:
            record = self.arrays.get(spec.array)
            if record is not None and record.limit and not self.restoring:
                record.running += 1
        if spec.depend:
            self._leave(job_id)  # its dependency was met: it no longer waits on it
        self._notify(job_id, RUN, None, time)

    def requeued(self, state: SchedulerState, job_id: int) -> None:
        """Before a running job is requeued: its array counts it as running no more
        (it comes back through `admit`)."""
        run = state.running.get(job_id)
        if run is not None and run.spec.array_limit:
            record = self.arrays.get(run.spec.array)
            if record is not None and record.limit:
                record.running -= 1

    def back_to_pending(self, job_id: int, time: float) -> None:
        """After a job was requeued: conditions on its start read it pending again."""
        self._notify(job_id, PEND, None, time)

    def ended(self, event: JobFinished | JobKilled, spec: JobSpec, was_running: bool) -> None:
        """A job ended (finished, killed, or killed while pending): remembered, its
        array may have room, and the conditions that name it are evaluated again."""
        job_id = spec.id
        if spec.array_limit and was_running:
            record = self.arrays.get(spec.array)
            if record is not None and record.limit:
                record.running -= 1
                self._arrays[record.id] = record
                self.dirty = True
        if spec.depend and job_id in self.dependencies:
            self._leave(job_id)
        if isinstance(event, JobFinished):
            done, code = event.done, (None if event.exit_code == LOST_CODE else event.exit_code)
        else:
            done, code = False, None
        memory = self.memory
        memory.remember(EndedJob(job_id, event.time, done, code, spec.user, spec.name,
                                 spec.array, spec.submit))
        if self.watch:  # (a job no condition names changes none: hot in simulations)
            self._notify(job_id, DONE_STATE if done else EXIT_STATE, code, event.time)
        if memory.due(event.time):
            self._forget(memory.forget_old(event.time, self.watch))

    def _register(self, spec: JobSpec) -> None:
        """Remember a job's array (its element) and its name, for conditions naming
        them (the array's name stands for the array)."""
        if spec.array:
            record = self.arrays.get(spec.array)
            if record is None:
                record = self.arrays[spec.array] = ArrayRecord(spec)
                if spec.name:
                    self.memory.add_name(spec.user, spec.name, (spec.submit, spec.array))
            record.elements[spec.id] = None
        elif spec.name:
            self.memory.add_name(spec.user, spec.name, (spec.submit, spec.id))

    def restore(self, event: EndedJobsRestored) -> None:
        """Ended jobs of a state being rebuilt, with their names and arrays."""
        for ended in event.jobs:
            self.memory.remember(ended)
            self.active = True
            if ended.array or ended.name:
                self._register(JobSpec(id=ended.id, user=ended.user, name=ended.name,
                                       submit=ended.submit, array=ended.array))

    def _notify(self, job_id: int, status: int, code: int | None, time: float) -> None:
        leaves = self.watch.get(job_id)
        if not leaves:
            return
        for leaf in leaves:
            leaf.set(job_id, status, code)
            dependency = leaf.owner
            assert dependency is not None
            self._dependencies[id(dependency)] = dependency
        self._time = time
        self.dirty = True

    def _leave(self, job_id: int) -> None:
        """A job no longer waits on its dependency (started or ended); a dependency no
        job waits on any more is dropped with its index entries."""
        dependency = self.dependencies.pop(job_id, None)
        if dependency is None:
            return
        dependency.members.discard(job_id)
        if dependency.members:
            return
        if dependency.key is not None:
            del self.shared[dependency.key]
        self._dependencies.pop(id(dependency), None)
        named: list[int] = []
        for leaf in dependency.leaves:
            for job in leaf.targets:
                leaves = self.watch[job]
                leaves.remove(leaf)
                if not leaves:
                    del self.watch[job]
                    named.append(job)
        self._forget(self.memory.release(named, self.watch))

    def _forget(self, gone: list[EndedJob]) -> None:
        """Drop forgotten ended jobs from their names and arrays."""
        for ended in gone:
            if ended.array:
                record = self.arrays.get(ended.array)
                if record is not None:
                    record.elements.pop(ended.id, None)
                    if not record.elements:
                        del self.arrays[ended.array]
                        if record.name:
                            self.memory.drop_name(record.user, record.name,
                                                  (record.submit, record.id))
            elif ended.name:
                self.memory.drop_name(ended.user, ended.name, (ended.submit, ended.id))

    # ------------------------------------------------------------------ settling
    def settle(self, state: SchedulerState) -> None:
        """After an event: conditions whose jobs changed are evaluated again (jobs move
        in or out of their buckets), then arrays with room let elements in."""
        self.dirty = False
        dependencies, self._dependencies = self._dependencies, {}
        for dependency in dependencies.values():
            was_met, was_never = dependency.met, dependency.never
            dependency.evaluate()
            if dependency.never and not was_never:
                dependency.since = self._time
            if dependency.met != was_met:
                self._moved(state, dependency)
        arrays, self._arrays = self._arrays, {}
        for record in arrays.values():
            while not record.full():
                job = record.release()
                if job is None:
                    break
                del state.waiting[job.id]
                record.queued += 1
                state._queue(_entry(job))

    def _moved(self, state: SchedulerState, dependency: Dependency) -> None:
        if dependency.met:
            blocked = dependency.blocked.in_order()
            dependency.blocked = WaitList()
            self.blocking.pop(id(dependency), None)
            for job in blocked:
                del state.waiting[job.id]
                if self.admit(state, job):
                    state._queue(_entry(job))
            return
        for job_id in sorted(dependency.members):
            queued = job_id in state.pending
            if queued or (job_id in state.waiting and job_id not in dependency.blocked.jobs):
                job = state._dequeue(job_id)
                record = self.arrays.get(job.spec.array) if job.spec.array_limit else None
                if queued and record is not None and record.limit:
                    # It keeps its place under the limit: the session that saw it may
                    # have dispatched it (`dispatched`), and no element may take it.
                    record.queued += 1
                    record.reserved.add(job_id)
                self._block(state, dependency, job)

    # ------------------------------------------------------------------ sessions
    def groups(self, state: SchedulerState, trace: list[TraceEntry]) -> list[PendGroup]:
        """Pend groups of the waiting jobs: per dependency, per array at its limit."""
        groups: list[PendGroup] = []
        # One group per reason (the elements of [*] conditions have one each, alike)
        by_reason: dict[str, list[list[PendingJob]]] = {}
        for dependency in self.blocking.values():
            by_reason.setdefault(dependency.reason(), []).append(dependency.blocked.in_order())
        for reason, lists in by_reason.items():
            members = lists[0] if len(lists) == 1 else sorted(
                (job for jobs in lists for job in jobs), key=_KEY
            )
            groups.append(_group(reason, DEPENDENCY, "dependency", members, trace))
        for record in self.arrays.values():
            if record.limited.jobs:
                members = record.limited.in_order()
                groups.append(_group(record.reason(), LIMIT, "array", members, trace))
        return groups

    def orphans(self, state: SchedulerState, now: float) -> tuple[list[int], float]:
        """The waiting jobs to end now because their dependency can never be satisfied
        (LSF's -ti, or past orphan_job_term_timeout), in scheduling order; and when the
        next one is due (inf: none)."""
        timeout = state.config.orphan_job_term_timeout
        found: list[PendingJob] = []
        due = float("inf")
        for dependency in self.blocking.values():
            if not dependency.never:
                continue
            at = dependency.since if dependency.end_orphan else (
                dependency.since + timeout if timeout is not None else due
            )
            if at <= now:
                found.extend(dependency.blocked.jobs.values())
            elif at < due:
                due = at
        found.sort(key=_KEY)
        return [job.id for job in found], due


def _entry(job: PendingJob) -> PendingJob:
    """A new entry for a job that enters a bucket again (one it left may still hold
    its old entry, which then counts as gone: Bucket.ordered)."""
    return PendingJob(job.spec, job.key, None, job.limit_refs)


def _group(reason: str, kind: str, check: str, members: list[PendingJob],
           trace: list[TraceEntry]) -> PendGroup:
    trace.append(TraceEntry(members[0].id, "real", check, reason))
    return PendGroup(reason, kind, members, [len(trace) - 1])
