"""Pending jobs grouped in buckets of identical requirements, kept in scheduling order.

A requirement that fails for one member of a bucket at a given state fails for every
later member in the same session (capacity and limits only shrink within a session),
so a session evaluates a bucket, not each of its jobs.
"""

from __future__ import annotations

from xce.model.cluster import Queue
from xce.model.jobs import JobSpec
from xce.model.result import SortKey
from xce.resreq import ResReq

BucketKey = tuple[str, int, str]  # queue, slots, requirement string
LimitRef = tuple[int, tuple[str, str]]  # limit index, counter key (user, queue)


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
    """Pending jobs with identical requirements (queue, slots, requirement string).

    Limits are per job (they depend on the user), resources per bucket."""

    __slots__ = (
        "_dirty",
        "_order",
        "_sorted",
        "_start",
        "failure",
        "key",
        "members",
        "n",
        "per_slot",
        "queue",
        "req",
        "shared",
    )

    def __init__(
        self,
        key: BucketKey,
        queue: Queue,
        req: ResReq,
        per_slot: tuple[tuple[str, float], ...],
        shared: tuple[tuple[str, float], ...],
    ) -> None:
        self.key = key
        self.queue = queue
        self.req = req
        self.n = key[1]
        self.per_slot = per_slot  # host consumables, per slot (amount > 0)
        self.shared = shared  # shared resources, once per job
        self.members: dict[int, PendingJob] = {}
        self._order: list[PendingJob] = []
        self._start = 0  # entries before it have left the bucket
        self._sorted = True
        self._dirty = False  # some entry after _start has left the bucket
        # The resource failure of the last evaluation made before any reservation of
        # its session, with the state's capacity version it holds for.
        self.failure: tuple[int, object] | None = None

    def add(self, job: PendingJob) -> None:
        self.members[job.id] = job
        if self._order and job.key < self._order[-1].key:
            self._sorted = False
        self._order.append(job)

    def remove(self, job_id: int) -> None:
        job = self.members.pop(job_id)
        order = self._order
        if self._start < len(order) and order[self._start] is job:
            self._start += 1
            while self._start < len(order) and order[self._start].id not in self.members:
                self._start += 1
        else:
            self._dirty = True

    def ordered(self) -> tuple[list[PendingJob], int]:
        """The members in scheduling order: `order[start:]` (compacted and sorted on
        demand; no copy otherwise)."""
        if self._dirty or not self._sorted or self._start > len(self._order) // 2:
            members = self.members
            order = [j for j in self._order[self._start :] if j.id in members]
            if not self._sorted:
                order.sort(key=lambda j: j.key)
            self._order, self._start, self._sorted, self._dirty = order, 0, True, False
        return self._order, self._start
