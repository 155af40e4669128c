"""Running jobs in the scheduler state: starting them, ending them (finished, killed
or requeued) and the capacity they hold meanwhile."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from typing import TYPE_CHECKING, Any

from xce.model.jobs import JobSpec
from xce.model.result import SortKey
from xce.sched.buckets import LimitRef
from xce.sched.errors import SchedulerInputError
from xce.sched.host_changes import dropped_free, went_idle
from xce.sched.hosts import OPEN_STATE, host_at
from xce.sched.labels import relabel
from xce.sched.pools import PoolRecord
from xce.sched.runlimit import run_limit
from xce.sched.usage import SLOTS_ONLY, Use, host_use

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState


# A session's dispatch: its hosts by name (the object in the session result), by
# index, and the state's label_changes then (a host in or out since: indices may name
# other hosts)
Placed = tuple[dict[str, int], dict[int, int], int]


class RunningJob:
    """A running job and what it holds."""

    __slots__ = (
        "end", "held", "hosts", "key", "limit_refs", "pools", "shared", "spec", "start", "use"
    )

    def __init__(
        self,
        spec: JobSpec,
        key: SortKey,
        hosts: dict[int, int],
        pools: dict[str, PoolRecord],
        start: float,
        end: float,
    ) -> None:
        self.spec = spec
        self.key = key
        self.hosts = hosts  # host index -> slots
        # host index -> slots it holds there: its slots, or (exclusive, -x) every slot
        # of the host (the same dict when not exclusive)
        self.held = hosts
        self.pools = pools  # shared resource -> pool its tokens come from
        self.start = start
        self.end = end  # start + run limit (inf: no limit); planned: plan.Plan.planned
        # What it takes of each of its hosts: per-slot consumables, GPUs per host
        self.use: Use = SLOTS_ONLY
        self.shared: dict[str, float] = {}
        self.limit_refs: tuple[LimitRef, ...] = ()


def start_job(
    state: SchedulerState, job_id: int, hosts: dict[str, int], pools: dict[str, str],
    time: float,
) -> None:
    job = state.pending.get(job_id)
    if job is None:
        raise SchedulerInputError(f"job {job_id} is not pending")
    bucket = job.bucket
    assert bucket is not None
    known = state.placed.get(job_id)
    if known is not None and known[0] is hosts and known[2] == state.label_changes:
        # The last session's own dispatch, no host in or out since: its hosts by
        # index as it found them (no name to look up, no sum to check: a lookup per
        # host of every start, bench_easy.py). A copy: the running job keeps it.
        placed = dict(known[1])
    else:
        placed = _placed_by_name(state, job_id, job.spec.n, hosts)
    chosen: dict[str, PoolRecord] = {}
    for res, _amount in bucket.shared:
        chosen[res] = (
            state._pool(res, pools[res]) if res in pools else _infer_pool(state, res, placed)
        )
    state._dequeue(job_id)
    limit = run_limit(job.spec, bucket.queue)
    run = RunningJob(
        job.spec, job.key, placed, chosen, time, math.inf if limit is None else time + limit
    )
    if run.end != math.inf:
        insort(state.ends, (run.end, job_id, run))
    run.use = bucket.use
    if bucket.exclusive:
        run.held = {i: host_at(state.hosts, i).slots for i in placed}
    if bucket.shared:
        run.shared = dict(bucket.shared)
    run.limit_refs = job.limit_refs
    state.running[job_id] = run
    if state.fairshare.trees:
        state.fairshare.started(job.spec.queue, job.spec.user, job_id, job.spec.n, time)
    hold_capacity(state, run, +1, time)
    if state.requested_for:
        _requests_served(state, job_id)


def _placed_by_name(
    state: SchedulerState, job_id: int, n: int, hosts: dict[str, int]
) -> dict[int, int]:
    """A job's hosts by index, from the hosts by name a start names; refused
    (SchedulerInputError) unless each is known and given slots, adding up to `n`."""
    # One walk over the hosts: their slots add up to the job's, each positive (else
    # that error first), and each host is known.
    by_name = state.host_by_name
    placed: dict[int, int] = {}
    total, low = 0, 1
    unknown: str | None = None
    for name, slots in hosts.items():
        total += slots
        if slots < low:
            low = slots
        host = by_name.get(name)
        if host is not None:
            placed[host.index] = slots
        elif unknown is None:
            unknown = name
    if total != n or low <= 0:
        raise SchedulerInputError(
            f"job {job_id}: hosts {hosts} do not add up to its {n} slots"
        )
    if unknown is not None:
        raise SchedulerInputError(f"unknown host '{unknown}'")
    return placed


def _requests_served(state: SchedulerState, job_id: int) -> None:
    """A job started or ended: the hosts requested for it are no longer preferred for
    it (they stay requested for their request's other jobs)."""
    indices = state.requested_for.pop(job_id, None)
    if indices is not None:
        # The hosts of one request share its tuple of jobs, and keep sharing the one
        # left (each host filtering its own was hosts x jobs per job, a request's
        # hosts x its jobs squared in all: 7 % of a cProfile of RICC-2010-2's
        # elastic run, where requests are of hundreds of hosts for hundreds of jobs;
        # bench/RESULTS.md). Keyed by id, the old tuple kept alive beside the new.
        left: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for index in indices:
            host = state.hosts[index]
            if host is not None:
                old = host.requested_for
                found = left.get(id(old))
                if found is None:
                    found = left[id(old)] = (old, tuple(j for j in old if j != job_id))
                host.requested_for = found[1]


def _infer_pool(state: SchedulerState, resource: str, placed: dict[int, int]) -> PoolRecord:
    """The first pool reachable from every host of the job (FORMATS.md)."""
    pools = state.pools[resource]
    for pool in pools:
        if all(pool.reaches(host_at(state.hosts, i)) for i in placed):
            return pool
    return pools[0]


def hold_capacity(state: SchedulerState, run: RunningJob, sign: int, time: float) -> None:
    hosts, free_slots, open_free = state.hosts, state.free_slots, state.open_free
    idle, use = state.idle_provisioned, run.use
    # The job id as the object the spec holds: compiled, an int key is made anew
    # for every dictionary operation (hosts x 2 per job), an Any one is not
    # (bench_easy.py, bench_sim.py).
    job_id: Any = run.spec.id
    placed, held = run.hosts, run.held
    slots_total = drops = 0
    per_slot, gpus = use
    if gpus:
        free_res = state.free_res
        for index, slots in placed.items():
            for res, amount in host_use(use, slots):
                free_res[res][index] -= sign * amount
    elif per_slot:  # (host_use without GPUs, inlined: hot in simulations)
        free_res = state.free_res
        for res, amount in per_slot:
            column = free_res[res]
            for index, slots in placed.items():
                column[index] -= sign * amount * slots
    taking = sign > 0
    for index, slots in held.items():
        slots_total += slots
        host = hosts[index]
        # (not `sign * slots`: compiled, a product with a negative int takes the slow
        # generic path, bench_easy.py)
        free = free_slots[index] - slots if taking else free_slots[index] + slots
        free_slots[index] = free
        if host is None:
            continue
        running = host.running
        if taking:
            running[job_id] = slots  # (what it holds: sched/plan.py reads it)
            if host.template is not None:
                if index in idle:
                    del idle[index]
                if index in state.fresh:  # (its first job: static hosts now come first)
                    relabel(state, host)
        else:
            del running[job_id]  # (set when it started: the host cannot have left)
            if not running:
                host.idle_since = time
                if host.template is not None:
                    idle[index] = host
                    went_idle(state, host)
                    if time == host.joined:  # (its jobs took no time: idle since it
                        relabel(state, host)  # joined, as a replay of its facts finds it)
        if free > 0 and host.state == OPEN_STATE:
            open_free.add(index)
        else:  # (drop_free, counted once for the job: hot in simulations)
            open_free.discard(index)
            drops += 1
    if drops:
        dropped_free(state, drops)
    if held is not placed:  # (exclusive: its limits count its own slots)
        slots_total = run.spec.n
    if not taking:
        slots_total = -slots_total
    state.busy_slots += slots_total
    for res, pool in run.pools.items():
        pool.used += sign * run.shared[res]  # (a float product: no slow path)
        pool.record(time)
    for limit_index, key in run.limit_refs:
        counter = state.limit_used[limit_index].setdefault(key, [0, 0])
        counter[0] += slots_total
        counter[1] += sign


def finish_job(state: SchedulerState, job_id: int, time: float) -> None:
    run = state.running.get(job_id)
    if run is None:
        state._dequeue(job_id)
    else:
        stop_running(state, run, time)
    if state.requested_for:
        _requests_served(state, job_id)
    del state._submitted[job_id]
    if state.preemptions.last:
        state.preemptions.last.pop(job_id, None)


def stop_running(state: SchedulerState, run: RunningJob, time: float) -> None:
    """A running job stops (finished, killed or requeued): what it held is free (a
    job suspended by a preemption released it already: sched/preempted.py)."""
    job_id = run.spec.id
    del state.running[job_id]
    book = state.preemptions
    suspended = False
    if book.stopping or book.suspended:  # (a preemption under way ends with the job)
        book.stopping.pop(job_id, None)
        suspended = book.suspended.pop(job_id, None) is not None
    if not suspended:  # (a suspended one gave up its slots and planned end already)
        hold_capacity(state, run, -1, time)
        drop_end(state, run)
    else:
        _vacated(state, run, time)
    if state.fairshare.trees:
        state.fairshare.ended(run.spec.queue, run.spec.user, run.spec.id, time)


def _vacated(state: SchedulerState, run: RunningJob, time: float) -> None:
    """A job suspended by a preemption stops (requeued, killed, lost with a host): the
    provisioned hosts it was alone on are idle from now, not from its suspension (it
    was still there: sched/suspended.py)."""
    idle = state.idle_provisioned
    for index in run.held:
        host = state.hosts[index]
        if host is not None and not host.running and index in idle:
            host.idle_since = time
            del idle[index]  # (to the end: idle_provisioned goes by idle_since)
            idle[index] = host
            went_idle(state, host)


def end_of(entry: tuple[float, int, RunningJob]) -> float:
    """The end an entry of `state.ends` is sorted by (a key to bisect them on)."""
    return entry[0]


def drop_end(state: SchedulerState, run: RunningJob) -> None:
    """A running job with a limit left: its planned end is no change point now."""
    if run.end != math.inf:
        ends = state.ends
        at = bisect_left(ends, (run.end, run.spec.id))
        del ends[at]


def requeue_job(state: SchedulerState, job_id: int, time: float) -> None:
    run = state.running.get(job_id)
    if run is None:
        raise SchedulerInputError(f"job {job_id} is not running")
    stop_running(state, run, time)
    state._enqueue(run.spec, run.key, False)
