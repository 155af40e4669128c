"""Job arrays in the scheduler state: may another element of this array run?

An array's elements are jobs alike (one bucket: a 100,000-element array costs what
100,000 alike jobs cost). Its `%N` limit is kept by letting only as many of its
pending elements into the buckets as the limit leaves room for (running plus queued
at most N): the others wait here, in scheduling order, never evaluated, so they
create no demand; one is let in when an element ends or leaves the queue.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Final

from xce.model.jobs import JobSpec
from xce.model.result import SortKey
from xce.sched.buckets import PendingJob
from xce.sched.waitlist import WaitList

LIMIT_REACHED: Final = "The job array has reached its limit of {limit} running elements"
LIMIT_HELD: Final = (
    "The job array's limit of {limit} running elements is taken by earlier elements"
)


class ArrayRecord:
    """One job array: its known elements, and with a limit, how many of them run and
    are queued, and those waiting for room."""

    __slots__ = (
        "_heap", "elements", "id", "limit", "limited", "name", "queued", "reserved",
        "running", "submit", "user",
    )

    def __init__(self, spec: JobSpec) -> None:
        self.id = spec.array
        self.user = spec.user
        self.name = spec.name
        self.submit = spec.submit
        self.limit = spec.array_limit  # elements running at once (0: no limit)
        self.running = 0  # elements running (counted only with a limit)
        self.queued = 0  # elements in the buckets (counted only with a limit)
        # elements out of the bucket that keep their place in `queued`: taken back by a
        # condition that stopped holding (sched/waiting.py, Waits._moved)
        self.reserved: set[int] = set()
        # elements pending for the limit, by id, and a heap of (key, id) over them
        # (ids that left stay in it until popped)
        self.limited = WaitList()
        self._heap: list[tuple[SortKey, int]] = []
        # ids of the elements the state knows (pending, running, or remembered ended)
        self.elements: dict[int, None] = {}

    def full(self) -> bool:
        """Whether no more elements may be queued (running + queued reach the limit)."""
        return self.limit > 0 and self.running + self.queued >= self.limit

    def hold_back(self, job: PendingJob) -> None:
        self.limited.add(job)
        heappush(self._heap, (job.key, job.id))

    def release(self) -> PendingJob | None:
        """The first element (in scheduling order) waiting for room, taken out."""
        heap = self._heap
        while heap:
            _key, job_id = heappop(heap)
            job = self.limited.pop(job_id)
            if job is not None:
                return job
        return None

    def drop(self, job_id: int) -> PendingJob | None:
        """An element that waited for room leaves (held, killed, blocked again)."""
        job = self.limited.pop(job_id)
        if not self.limited.jobs:
            self._heap = []
        return job

    def reason(self) -> str:
        """Why its elements beyond the limit pend."""
        template = LIMIT_REACHED if self.running >= self.limit else LIMIT_HELD
        return template.format(limit=self.limit)
