"""Scheduler state, fed by events and kept incrementally.

Every input arrives as an event (`apply`); a session only reads this state (and may
refresh its caches). Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

import msgspec

from xce.model.api import QueueShares
from xce.model.cluster import ClusterConfig, HostTemplate, Queue
from xce.model.events import (
    ConfigLoaded,
    EndedJobsRestored,
    FairshareRestored,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobHeld,
    JobKilled,
    JobModified,
    JobPreempted,
    JobRequeued,
    JobResumed,
    JobStarted,
    JobSubmitted,
    PoolHistoryRestored,
    SchedulerEvent,
    SharedTotalChanged,
    SupplyChanged,
)
from xce.model.jobs import JobSpec
from xce.model.result import SortKey
from xce.resreq import ResReqError, parse, validate
from xce.sched.access import check_queue_user, resolve_hosts
from xce.sched.buckets import Bucket, BucketKey, LimitRef, PendingJob, split_rusage
from xce.sched.errors import SchedulerInputError as SchedulerInputError  # (re-exported)
from xce.sched.errors import SubmitError as SubmitError
from xce.sched.fairshare import Fairshare, share_user
from xce.sched.host_changes import add_host, gpu_column, remove_host, set_host_state
from xce.sched.hosts import HostRecord
from xce.sched.limits import limit_key
from xce.sched.loading import load_config
from xce.sched.modify import check_modified, modify_job, moved_order
from xce.sched.pools import PoolRecord
from xce.sched.preempted import PreemptBook, preempt, resume
from xce.sched.quiet import QuietMemo
from xce.sched.room import template_room
from xce.sched.runlimit import run_limit
from xce.sched.running import Placed, RunningJob, finish_job, requeue_job, start_job
from xce.sched.share_order import fairshare_table
from xce.sched.spec_checks import check_gpus, check_run_limit
from xce.sched.supply_state import apply_supply, arrivals
from xce.sched.usage import NGPUS
from xce.sched.waiting import Waits

# s a new host is expected to take to join when nothing else says (FORMATS.md)
DEFAULT_LEAD_TIME: Final = 300.0


class HostIndex:
    """A derived index over hosts that follows host changes incrementally (a base
    class, not a protocol: compiled, its method is called directly)."""

    __slots__ = ()

    def host_changed(self, host: HostRecord, present: bool) -> None:
        raise NotImplementedError


class SchedulerState:
    """The cluster as the scheduler sees it. Events take effect here and in the
    modules of their concern: sched/loading.py (a configuration), host_changes.py,
    running.py (jobs starting and ending) and supply_state.py."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = ClusterConfig()
        self.capacity_version = 0  # bumped by every event that may change what fits
        self.hosts: list[HostRecord | None] = []
        self.names: list[str] = []  # host names by index ("" where none)
        self.labels: list[str] = []  # sort labels by index (sched/labels.py)
        self.label_order: list[int] = []  # indices of the hosts present, by label
        self.indexed_labels = True  # ... which ascend there (sched/labels.py)
        self._label_hint = 0  # where the last host went in or left label_order
        self.label_changes = 0  # hosts put in or taken out of label_order so far
        self.fresh: set[int] = set()  # provisioned hosts labelled fresh
        self.host_by_name: dict[str, HostRecord] = {}
        self.free_slots: list[int] = []
        self.widest = 0  # the most slots any host has had (placement.HostOrder.widest)
        self.free_res: dict[str, list[float]] = {}
        self.open_free: set[int] = set()  # open hosts with a free slot
        self._free_drops = 0  # removals from open_free since it was last rebuilt
        self.provisioned: dict[int, HostRecord] = {}  # hosts that came from a template
        self.idle_provisioned: dict[int, HostRecord] = {}  # ... running nothing
        # Whether idle_provisioned is in order of idle_since (events in time order, as
        # the simulator feeds them): the host idle longest of a template comes first.
        self.idle_in_order = True
        self._idle_latest = -math.inf  # the latest idle_since of a host that went idle
        self.busy_slots = 0  # slots held by running jobs
        self.pools: dict[str, list[PoolRecord]] = {}
        self.queues: dict[str, Queue] = {}
        self.templates: dict[str, HostTemplate] = {}
        self.ranked: tuple[HostTemplate, ...] = ()  # templates by (rank, name)
        # template -> how long its hosts stay idle before they are reclaimable
        self.idle_times: dict[str, float] = {}
        self.one_idle_time = True  # every template's idle time is the catalog's
        self.countable_pools: tuple[PoolRecord, ...] = ()  # pools tokens can be borrowed for
        self.limit_used: list[dict[tuple[str, str], list[int]]] = []  # [slots, jobs]
        self._limit_refs_cache: dict[tuple[str, str], tuple[LimitRef, ...]] = {}
        self.pending: dict[int, PendingJob] = {}
        self.held: dict[int, PendingJob] = {}
        # Pending jobs in no bucket but not held: waiting for a dependency condition or
        # for room under their array's limit (sched/waiting.py, `waits`).
        self.waiting: dict[int, PendingJob] = {}
        self.waits = Waits()
        self.buckets: dict[BucketKey, Bucket] = {}  # buckets with pending jobs
        self._bucket_cache: dict[BucketKey, Bucket] = {}  # every bucket made, for reuse
        self.running: dict[int, RunningJob] = {}
        # (start + run limit, job, its record) of running jobs with a limit, sorted (ids
        # are unique): the plan's change points (sched/plan.py), the record for its sweep
        self.ends: list[tuple[float, int, RunningJob]] = []
        self.indexes: dict[object, HostIndex] = {}  # derived views kept up to date
        self.alive: dict[str, int] = {}  # template -> hosts of it present
        # template -> the host record its virtual hosts share, and its consumables
        self.virtual: dict[str, tuple[HostRecord, dict[str, float]]] = {}
        self._free_indices: list[int] = []  # indices of removed hosts, to reuse
        self.in_flight: dict[str, int] = {}  # template -> expected hosts not yet joined
        # template -> when its in-flight hosts were requested, sorted (see arrivals)
        self.requested: dict[str, list[float]] = {}
        self.lead_times: dict[str, float] = {}  # template -> runtime lead-time estimate
        self.requested_for: dict[int, list[int]] = {}  # job -> its hosts (sched/requested.py)
        self.allowance: dict[str, int] = {}  # template -> runtime cap on new hosts
        self._submitted: dict[int, JobSpec] = {}  # pending, held and running specs
        self._valid_res: set[str] = set()  # requirement strings checked against config
        # (slots, free) -> the shared "not enough job slots" failure (failure.Failure)
        self.slot_failures: dict[tuple[int, int], object] = {}
        self.failure_cache_hits = 0  # Bucket.failure reused by the real pass (tests, GET /demand)
        self.quiet: QuietMemo | None = None  # the last lean session's (sched/quiet.py)
        self.placed: dict[int, Placed] = {}  # the last session's dispatches (running.py)
        self.fairshare = Fairshare()  # fairshare queues' shares and usage (fairshare.py)
        self.preemptions = PreemptBook()  # preemptions under way (sched/preempted.py)
        if config is not None:
            self.apply(ConfigLoaded(config=config))

    # ------------------------------------------------------------------ events
    def apply(self, event: SchedulerEvent) -> None:
        """Apply one event. Raises SubmitError / SchedulerInputError, changing nothing:
        also for an event that is not a SchedulerEvent (the drivers pass on only these,
        xce.model.events.is_scheduler_event)."""
        # The most frequent events by exact type, before the match (compiled, a class
        # pattern is a generic isinstance per arm; bench_controller.py recovery,
        # bench_sim.py; host events: 2 % of an elastic simulation, callgrind)
        if type(event) is JobSubmitted:
            self._submit(event.job)  # (a new job changes who is queued, not what fits)
            return
        if self.quiet is not None:
            self.quiet = self.quiet.after(event, self)
        if type(event) is JobStarted:
            if self.waiting and event.job in self.waiting:
                self.waits.dispatched(self, event.job)
            start_job(self, event.job, event.hosts, event.pools, event.time)
            if self.waits.active:
                self.waits.started(self, event.job, event.time)
        elif type(event) is JobFinished:
            self._end_job(event)
        elif type(event) is HostAdded:  # (hosts joining, closing, leaving: elastic runs)
            add_host(self, event)
        elif type(event) is HostStateChanged:
            set_host_state(self, self._host(event.name), event.state)
        elif type(event) is HostRemoved:
            remove_host(self, self._host(event.name))
        else:
            self._apply_other(event)
            return
        self.capacity_version += 1
        if self.waits.dirty:  # jobs that waited may enter their buckets, or leave them
            self.waits.settle(self)

    def _end_job(self, event: JobFinished | JobKilled) -> None:
        """A job finished or was killed; how it ended is remembered (dependency
        conditions read it: sched/waiting.py)."""
        job_id = event.job
        spec, running = self._submitted.get(job_id), job_id in self.running
        finish_job(self, job_id, event.time)
        if spec is not None:
            self.waits.ended(event, spec, running)

    def _apply_other(self, event: SchedulerEvent) -> None:
        """The events apply() has no fast path for."""
        match event:
            case JobKilled():
                self._end_job(event)
            case SupplyChanged():
                apply_supply(self, event)
            case JobRequeued(job=job_id, time=time):
                self.waits.requeued(self, job_id)
                requeue_job(self, job_id, time)
                self.waits.back_to_pending(job_id, time)
            case JobPreempted():
                preempt(self, event)
            case JobResumed():
                resume(self, event)
            case JobModified():
                modify_job(self, event)  # (a running job's new limit moves the plan)
            case JobHeld(job=job_id, held=held):
                self._hold(job_id, held)
                if self.waits.dirty:
                    self.waits.settle(self)
                return  # what fits is the same: only who is queued changed
            case SharedTotalChanged(resource=resource, total=total, pool=pool):
                self._pool(resource, pool).base = total
            case PoolHistoryRestored(pool=key, history=history):
                if history:
                    self.pool_by_key(key).history = [(t, u, b) for t, u, b in history]
            case ConfigLoaded(config=config):
                load_config(self, config)
            case EndedJobsRestored():
                self.waits.restore(event)
                return  # what is known of ended jobs, not what fits
            case FairshareRestored(usage=usage):
                self.fairshare.restore(usage)
                return  # who goes first, not what fits
            case _:
                # Not a scheduler event (a lease, a provisioning request or instance, an
                # expected host, a token step: the controller's records). Refused rather
                # than taken as a change of what fits, which would void the
                # cross-session failure cache.
                raise SchedulerInputError(
                    f"{type(event).__name__} is not a scheduler event: the scheduler "
                    "state takes only xce.model.events.SchedulerEvent"
                )
        self.capacity_version += 1  # anything else may change what fits
        if self.waits.dirty:
            self.waits.settle(self)

    def apply_all(self, events: Iterable[SchedulerEvent]) -> None:
        for event in events:
            self.apply(event)

    # ------------------------------------------------------------------ hosts
    def _host(self, name: str) -> HostRecord:
        host = self.host_by_name.get(name)
        if host is None:
            raise SchedulerInputError(f"unknown host '{name}'")
        return host

    # ------------------------------------------------------------------ pools, supply
    def _pool(self, resource: str, pool: str) -> PoolRecord:
        pools = self.pools.get(resource)
        if not pools:
            raise SchedulerInputError(f"unknown shared resource '{resource}'")
        if not pool:
            if len(pools) > 1:
                raise SchedulerInputError(f"shared resource '{resource}' has several pools")
            return pools[0]
        for record in pools:
            if record.name == pool:
                return record
        raise SchedulerInputError(f"unknown pool '{pool}' of '{resource}'")

    def pool_by_key(self, key: str) -> PoolRecord:
        """A pool named as in scenarios and demand: `vcs` (the only pool, or the pool
        of the resource's countable) or `hspice/cloud`."""
        resource, _, pool = key.partition("/")
        if not pool:
            pools = self.pools.get(resource, [])
            for record in pools:
                if record.countable is not None and len(pools) > 1:
                    return record
        return self._pool(resource, pool)

    def lead_time(self, template: str) -> float:
        """How long a new host of `template` is expected to take to join: the runtime
        estimate, else the template's expected_lead_time, else 300 s."""
        found = self.lead_times.get(template)
        if found is not None:
            return found
        configured = self.templates[template].expected_lead_time
        return DEFAULT_LEAD_TIME if configured is None else configured

    def arrivals(self, template: str, now: float) -> list[float]:
        """When `template`'s in-flight hosts are expected to join (supply_state.py)."""
        return arrivals(self, template, now)

    def new_hosts_allowed(self, template: HostTemplate) -> int:
        """How many new hosts of `template` may be requested now: its `max` less the
        hosts of it present and in flight, lowered by a runtime allowance (>= 0)
        (`xce.sched.room`)."""
        name = template.name
        return template_room(
            template.max, self.alive.get(name, 0), max(0, self.in_flight.get(name, 0)),
            allowance=self.allowance.get(name),
        )

    def template_alive(self, template: str) -> int:
        """Hosts of `template` present now (joined, whatever their state)."""
        return self.alive.get(template, 0)

    # ------------------------------------------------------------------ jobs
    def sort_key(self, spec: JobSpec) -> SortKey:
        queue = self.queues[spec.queue]
        order = spec.submit if spec.order is None else spec.order  # (xce top / bottom)
        return (-queue.priority, -spec.priority, order, spec.id)

    def modified(self, spec: JobSpec) -> JobSpec:
        return check_modified(self, spec)

    def moved_order(self, job_id: int, top: bool, user: str | None) -> float:
        return moved_order(self, job_id, top, user)

    def refusal(self, spec: JobSpec) -> str | None:
        from xce.sched.admission import refusal  # (admission's rule reads this state)

        return refusal(self, spec)

    def resolve(self, spec: JobSpec) -> JobSpec:
        """Check a submission and fill defaults (the first queue). Raises SubmitError.
        Beyond what taking the event checks (`_resolve`): an array element's index
        against max_job_array_size, and the jobs a dependency condition names."""
        if spec.hosts:  # (-m: an unknown host or group is refused here, not replayed)
            resolve_hosts(spec.hosts, self.config, self.host_by_name)
        spec = self._resolve(spec)
        # (queue users: checked at submission, not when a job is taken again from a
        # log or a new configuration: its pending jobs stay)
        check_queue_user(spec, self.queues[spec.queue])
        if spec.array or spec.depend or self.waits.arrays:
            self.waits.check(self, spec)
        return spec

    def _resolve(self, spec: JobSpec, new: bool = True) -> JobSpec:
        """`resolve` without the checks of `Waits.check`: what a JobSubmitted event
        must pass (a condition naming jobs the state does not know takes them as
        gone: a recording or a rebuilt state was checked when it was submitted)."""
        if new and spec.id in self._submitted:  # (not new: a modification, sched/modify.py)
            raise SubmitError(f"job {spec.id} already exists")
        queue = spec.queue or self.config.queues[0].name
        if queue not in self.queues:
            raise SubmitError(f"unknown queue '{queue}'")
        if spec.n < 1:
            raise SubmitError(f"job {spec.id}: -n must be at least 1")
        check_run_limit(spec, self.queues[queue])
        if spec.hosts:
            hosts = resolve_hosts(spec.hosts, self.config, self.host_by_name, False)
            if hosts != spec.hosts:
                spec = msgspec.structs.replace(spec, hosts=hosts)
        if spec.gpus or spec.gpu_mode != "shared":
            check_gpus(spec)
        if (spec.array or spec.index) and (spec.index < 1 or spec.id != spec.array + spec.index):
            raise SubmitError(f"job {spec.id}: an array element's id is its array's id "
                              f"({spec.array}) plus its index ({spec.index} >= 1)")
        if spec.res not in self._valid_res:
            try:
                req = parse(spec.res)
                validate(req, self.config.resources)
            except ResReqError as err:
                raise SubmitError(str(err)) from err
            # (A span[ptile=N] larger than -n is accepted, as LSF does: all on one host.)
            self._valid_res.add(spec.res)
        if queue != spec.queue:
            spec = msgspec.structs.replace(spec, queue=queue)
        return spec

    def bucket_key(self, spec: JobSpec) -> BucketKey:
        """The key of the bucket a (resolved) job goes in."""
        # The run limit makes twins only where a plan reads it: with reservations, or
        # with templates (holds on supply being obtained, and jobs booked on real
        # capacity instead, end at their limits; in a queue that backfills it is
        # also their window). Else jobs alike but for their limits stay one bucket
        # (today's decisions exactly).
        queue = self.queues[spec.queue]
        planned = self.config.reserve_depth or self.config.catalog.templates
        limit = run_limit(spec, queue) if planned else None
        return (
            spec.queue, spec.n, spec.res, math.inf if limit is None else limit, spec.gpus,
            spec.hosts, spec.exclusive, share_user(queue, spec.user),
        )

    def new_bucket(self, key: BucketKey) -> Bucket:
        """A bucket for `key`, in no index (`bucket_of` keeps it; admission reads it)."""
        req = parse(key[2])
        per_slot, shared = split_rusage(req, self.config.resources)
        return Bucket(key, self.queues[key[0]], req, per_slot, shared, key[4])

    def bucket_of(self, spec: JobSpec) -> Bucket:
        """The bucket of a (resolved) job: its pending twins', or one kept aside (a
        job that is not pending: in no index until a job of it pends)."""
        key = self.bucket_key(spec)
        bucket = self.buckets.get(key) or self._bucket_cache.get(key)
        if bucket is None:  # (else: pending twins, or emptied before)
            if spec.gpus and NGPUS not in self.free_res:
                gpu_column(self)  # (a cluster without GPUs: the job pends for them)
            bucket = self._bucket_cache[key] = self.new_bucket(key)
        return bucket

    def limit_refs(self, user: str, queue: str) -> tuple[LimitRef, ...]:
        """The limit counters a job of `user` in `queue` counts against."""
        found = self._limit_refs_cache.get((user, queue))
        if found is None:
            refs = []
            for index, limit in enumerate(self.config.limits):
                key = limit_key(limit, user, queue)
                if key is not None:
                    refs.append((index, key))
            found = self._limit_refs_cache[(user, queue)] = tuple(refs)
        return found

    def _submit(self, spec: JobSpec, hold: bool | None = None) -> None:
        spec = self._resolve(spec)
        self._submitted[spec.id] = spec
        if spec.array or spec.name or spec.depend:
            self.waits.submitted(self, spec)
        self._enqueue(spec, self.sort_key(spec), spec.hold if hold is None else hold)

    def _enqueue(self, spec: JobSpec, key: SortKey, hold: bool) -> None:
        job = PendingJob(spec, key, None, self.limit_refs(spec.user, spec.queue))
        if hold:
            self.held[spec.id] = job
            return
        if (spec.array_limit or spec.depend) and not self.waits.admit(self, job):
            return  # it waits (self.waiting)
        self._queue(job)

    def _queue(self, job: PendingJob) -> None:
        """A pending job into its bucket: the scheduler considers it from now on."""
        bucket = self.bucket_of(job.spec)
        self.buckets[bucket.key] = bucket
        job.bucket = bucket
        bucket.add(job)
        self.pending[job.id] = job
        if self.quiet is not None:
            self.quiet = self.quiet.queued(job, bucket)

    def _dequeue(self, job_id: int) -> PendingJob:
        job = self.pending.pop(job_id, None)
        if job is None:
            held = self.held.pop(job_id, None)
            if held is not None:
                return held
            waiting = self.waiting.pop(job_id, None)
            if waiting is None:
                raise SchedulerInputError(f"job {job_id} is not pending")
            self.waits.unblock(waiting)
            return waiting
        assert job.bucket is not None
        job.bucket.remove(job_id)
        if not job.bucket.members:
            del self.buckets[job.bucket.key]
            job.bucket.clear()
        if job.spec.array_limit:
            self.waits.left_bucket(job)
        return job

    def _hold(self, job_id: int, held: bool) -> None:
        if (job_id in self.held) == held:
            return
        job = self._dequeue(job_id)
        self._enqueue(job.spec, job.key, held)

    # ------------------------------------------------------------------ queries
    def preemption_of(self, job: int) -> int | None:
        """The job `job` is suspended for by a preemption, if it is."""
        found = self.preemptions.suspended.get(job)
        return None if found is None else found[0]

    def fairshare_table(self, queue: str | None, now: float) -> list[QueueShares]:
        """`xce fairshare` (sched/share_order.py)."""
        return fairshare_table(self, queue, now)

    def live_hosts(self) -> list[HostRecord]:
        return [h for h in self.hosts if h is not None]
