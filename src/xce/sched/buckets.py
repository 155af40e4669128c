"""Pending jobs grouped in buckets of identical requirements, kept in scheduling order.

A requirement that fails for one member of a bucket at a given state fails for every
later member in the same session (capacity and limits only shrink within a session),
so a session evaluates a bucket, not each of its jobs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from heapq import heappop, heappush
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from xce.model.cluster import HostTemplate, Queue, ResourceDef
from xce.model.jobs import JobSpec
from xce.model.result import SortKey
from xce.resreq import ResReq
from xce.sched.fairshare import NO_RANK
from xce.sched.usage import Use, job_use

if TYPE_CHECKING:
    from xce.sched.failure import Failure

# queue, slots, requirement string, run limit (inf: none), GPUs per host, its host
# list (`-m` patterns, () for none), exclusive (`-x`), its user in a fairshare queue
# ("" in any other: sched/fairshare.py). A tuple of any length for the compiler, kept
# as one object: a dictionary key several times per job (xce.model.result.SortKey).
BucketKey = tuple[Any, ...]
LimitRef = tuple[int, tuple[str, str]]  # limit index, counter key (user, queue)

T = TypeVar("T")
# An entry's key (keys are unique): sorting on it compares two keys once, where
# sorting entries compares them for equality first (once a session, bench_easy.py)
_ENTRY_KEY: Final = itemgetter(0)


class InKeyOrder(Generic[T]):
    """Buckets (or what a pass keeps of one) taken in scheduling order of their next
    job: entries `(key of that job, sequence, item, position of that job)`, keys
    unique. Most buckets are taken once, in order of their first job; one put back
    (it stopped before its last job because another bucket's next job comes first)
    waits in a heap."""

    __slots__ = ("_at", "_fresh", "_heap")

    def __init__(self, entries: list[tuple[SortKey, int, T, int]]) -> None:
        if len(entries) > 1:
            entries.sort(key=_ENTRY_KEY)  # (usually in order already: linear then)
        self._fresh = entries
        self._at = 0
        self._heap: list[tuple[SortKey, int, T, int]] = []

    def left(self) -> bool:
        return self._at < len(self._fresh) or bool(self._heap)

    def pop(self) -> tuple[SortKey, int, T, int]:
        """The entry whose next job comes first (there must be one)."""
        heap, at = self._heap, self._at
        if heap and (at == len(self._fresh) or heap[0][0] < self._fresh[at][0]):
            return heappop(heap)
        self._at = at + 1
        return self._fresh[at]

    def next_key(self) -> SortKey | None:
        """The key of the next job of the entries left (None: none left)."""
        heap, at = self._heap, self._at
        key = self._fresh[at][0] if at < len(self._fresh) else None
        if heap and (key is None or heap[0][0] < key):
            key = heap[0][0]
        return key

    def push(self, key: SortKey, seq: int, item: T, pos: int) -> None:
        """Put an entry back, at its next job."""
        heappush(self._heap, (key, seq, item, pos))


def split_rusage(
    req: ResReq, resources: Mapping[str, ResourceDef]
) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
    """A requirement's rusage as a bucket keeps it: host consumables per slot, then
    shared resources once per job (amounts > 0)."""
    per_slot = tuple((r, a) for r, a in req.rusage if a > 0 and not resources[r].shared)
    shared = tuple((r, a) for r, a in req.rusage if a > 0 and resources[r].shared)
    return per_slot, shared


class PendingJob:
    """A job waiting to run; `key` is its place in scheduling order."""

    __slots__ = ("bucket", "id", "key", "limit_refs", "spec")

    def __init__(
        self,
        spec: JobSpec,
        key: SortKey,
        bucket: Bucket | None,
        limit_refs: tuple[LimitRef, ...],
    ) -> None:
        self.id = spec.id
        self.spec = spec
        self.key = key
        self.bucket = bucket
        self.limit_refs = limit_refs  # the limit counters this job's user and queue use


class Bucket:
    """Pending jobs with identical requirements (queue, slots, requirement string, run
    limit: a job's window in the plan depends on its limit; GPUs per host).

    Limits are per job (they depend on the user), resources per bucket."""

    __slots__ = (
        "_dirty",
        "_order",
        "_sorted",
        "_start",
        "eligible",
        "ever",
        "exclusive",
        "failure",
        "fits",
        "gpus",
        "holdable",
        "hosts",
        "key",
        "limit",
        "members",
        "n",
        "per_slot",
        "pieces",
        "plain",
        "queue",
        "rank",
        "req",
        "shape",
        "share_trace",
        "shared",
        "single",
        "slots_only",
        "smallest",
        "unit",
        "use",
        "window",
    )

    def __init__(
        self,
        key: BucketKey,
        queue: Queue,
        req: ResReq,
        per_slot: tuple[tuple[str, float], ...],
        shared: tuple[tuple[str, float], ...],
        gpus: int = 0,
    ) -> None:
        self.key = key
        self.queue = queue
        self.req = req
        self.n: int = key[1]
        # Its jobs' run limit (inf: none, or no plan: see SchedulerState.bucket_key),
        # and how long a job of it must find capacity free to start now: its limit in
        # a queue that backfills, forever otherwise (ARCHITECTURE.md section 2a).
        self.limit: float = key[3]
        self.window: float = key[3] if queue.backfill else math.inf
        self.per_slot = per_slot  # host consumables, per slot (amount > 0)
        self.shared = shared  # shared resources, once per job
        self.gpus = gpus  # GPUs on each host a job uses (-gpu num=N)
        self.use: Use = job_use(per_slot, gpus)  # what a job takes of a host (usage.py)
        self.hosts: tuple[str, ...] = key[5]  # the jobs' own host list (-m): () for none
        self.exclusive: bool = key[6]  # -x: only hosts running nothing, taken whole
        # Its user's rank in a fairshare queue, this session (sched/fairshare.py; a
        # queue without fairshare: NO_RANK, always)
        self.rank = NO_RANK
        # ... and the trace entry saying whose jobs come before its user's (-1: none)
        self.share_trace = -1
        n, span_hosts, ptile = self.n, req.span_hosts, req.span_ptile
        # What decides whether a host can take a job of the bucket: slots, per-slot
        # consumables, GPUs and span (not the queue, user or select).
        self.shape: tuple[object, ...] = (n, per_slot, gpus, span_hosts, ptile, key[6])
        self.single = n == 1 or span_hosts == 1 or (ptile is not None and ptile >= n)
        # Slots the job needs on at least one host.
        self.unit = n if span_hosts == 1 else (min(ptile, n) if ptile is not None else 1)
        # The pieces its span makes, each on its own host: the whole job for a
        # single-host job; for span[ptile=N], N-slot pieces and the remainder. A job
        # without span spreads slot by slot (no pieces).
        if self.unit == n:
            self.pieces: tuple[int, ...] = (n,)
        elif ptile is not None:
            full, rest = divmod(n, ptile)
            self.pieces = (ptile,) * full + ((rest,) if rest else ())
        else:
            self.pieces = ()
        self.smallest = min(self.pieces) if self.pieces else 1
        # Slots alone, spread over any hosts in the default order: no per-slot
        # consumable, no GPU, no shared resource, no span, no order[] (most batch jobs).
        self.plain = not (
            self.single or per_slot or gpus or shared or req.order or ptile is not None
            or self.exclusive
        )
        # Slots alone in the default order, on one host or spread: plain, or one slot.
        self.slots_only = self.plain or (n == 1 and not (
            per_slot or gpus or shared or req.order or self.exclusive
        ))
        # The catalog pass's static verdicts per template (catalog.StaticFit), filled
        # on first use (the configuration is fixed for the bucket's life: a new
        # configuration makes new buckets).
        self.fits: object | None = None
        # The templates (by rank) whose hosts could take its jobs, with the slots of
        # one an empty host holds and whether a job needs more hosts than the
        # template's max (sched/holds_real.py, holds_wide.py), found on first use.
        self.holdable: list[tuple[HostTemplate, int, bool]] | None = None
        # Its eligible hosts (eligibility.Eligible, kept up to date by the state), once
        # looked up: also fixed for the bucket's life.
        self.eligible: object | None = None
        # Its verdict of sched/ever.py with the verdicts it was read from (None: none)
        self.ever: tuple[object, Failure | None] | None = None
        self.members: dict[int, PendingJob] = {}
        self._order: list[PendingJob] = []
        self._start = 0  # entries before it have left the bucket
        self._sorted = True
        self._dirty = False  # some entry after _start has left the bucket
        # The resource failure of the last evaluation made before any reservation of
        # its session, with the state's capacity version it holds for.
        self.failure: tuple[int, object] | None = None

    def clear(self) -> None:
        """Forget the order of members that have all left (the bucket is empty)."""
        self._order, self._start, self._sorted, self._dirty = [], 0, True, False

    def add(self, job: PendingJob) -> None:
        self.members[job.id] = job
        if self._order and job.key < self._order[-1].key:
            self._sorted = False
        self._order.append(job)

    def remove(self, job_id: int) -> None:
        job = self.members[job_id]
        del self.members[job_id]
        order = self._order
        if self._start < len(order) and order[self._start] is job:
            self._start += 1
            members = self.members
            while self._start < len(order) and (
                members.get(order[self._start].id) is not order[self._start]
            ):
                self._start += 1
        else:
            self._dirty = True

    def ordered(self) -> tuple[list[PendingJob], int]:
        """The members in scheduling order: `order[start:]` (compacted and sorted on
        demand; no copy otherwise)."""
        if self._dirty or not self._sorted or self._start > len(self._order) // 2:
            members = self.members
            # (an entry of a job that left is stale: one that came back is a new entry)
            order = [j for j in self._order[self._start :] if members.get(j.id) is j]
            if not self._sorted:
                order.sort(key=lambda j: j.key)
            self._order, self._start, self._sorted, self._dirty = order, 0, True, False
        return self._order, self._start
