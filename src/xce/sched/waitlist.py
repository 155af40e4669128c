"""Pending jobs waiting for one thing, listed in scheduling order without a sort.

A dependency condition's waiting jobs and an array's elements waiting for room under
its limit come in scheduling order as a rule (an array's elements in index order), so
a session lists them as they are; only a list that got a job out of order is sorted,
once. (Sorting 100,000 keys every session cost 25 ms: bench/bench_arrays.py.)
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final

from xce.model.result import SortKey
from xce.sched.buckets import PendingJob

_KEY: Final = attrgetter("key")


class WaitList:
    """Jobs by id, and whether they came in scheduling order."""

    __slots__ = ("_last", "_ordered", "jobs")

    def __init__(self) -> None:
        self.jobs: dict[int, PendingJob] = {}
        self._ordered = True
        self._last: SortKey = (0, 0, 0.0, 0)  # the key of the last job, while ordered

    def add(self, job: PendingJob) -> None:
        if not self.jobs:
            self._ordered, self._last = True, job.key
        elif self._ordered:
            if self._last < job.key:
                self._last = job.key
            else:
                self._ordered = False
        self.jobs[job.id] = job

    def pop(self, job_id: int) -> PendingJob | None:
        return self.jobs.pop(job_id, None)

    def in_order(self) -> list[PendingJob]:
        """The jobs in scheduling order."""
        jobs = list(self.jobs.values())
        if not self._ordered:
            jobs.sort(key=_KEY)
            self.jobs = {job.id: job for job in jobs}
            self._ordered = True
            if jobs:
                self._last = jobs[-1].key
        return jobs
