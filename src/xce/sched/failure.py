"""Why jobs could not start: a bucket's failure, and the jobs settled on one (shared
by the real pass, the catalog pass and the demand)."""

from __future__ import annotations

from collections.abc import Sequence

from xce.sched.buckets import Bucket, PendingJob
from xce.sched.tail import Tail


class Failure:
    """Why a bucket's next job could not start."""

    __slots__ = ("check", "detail", "kind", "reason")

    def __init__(self, kind: str, check: str, reason: str, detail: str = "") -> None:
        self.kind = kind
        self.check = check
        self.reason = reason
        self.detail = detail or reason


class Settled:
    """A bucket whose remaining jobs pend for one reason this session: `jobs`, or
    `jobs[start:stop]` when those are the rest of the bucket's scheduling order
    (the list is not changed before `stop`), copied only when `members` is read."""

    __slots__ = ("_jobs", "_start", "_stop", "bucket", "failure", "trace")

    def __init__(
        self, bucket: Bucket, jobs: list[PendingJob], failure: Failure, trace: int,
        start: int = 0, stop: int = -1,
    ) -> None:
        self.bucket = bucket
        self._jobs, self._start, self._stop = jobs, start, stop
        self.failure = failure
        self.trace = trace

    @property
    def members(self) -> list[PendingJob]:
        """The jobs, as a list of their own (jobs may be added to it)."""
        if self._stop >= 0:
            self._jobs, self._start, self._stop = self._jobs[self._start : self._stop], 0, -1
        return self._jobs

    def span(self) -> tuple[list[PendingJob], int, int]:
        """The list the jobs are in, and where they begin and end in it."""
        return self._jobs, self._start, self._stop if self._stop >= 0 else len(self._jobs)

    def pending(self) -> Sequence[PendingJob]:
        """The jobs, not copied: for pend groups, which only read them."""
        if self._stop >= 0:
            return Tail(self._jobs, self._start, self._stop)
        return self._jobs
