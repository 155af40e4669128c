"""Why jobs could not start: a bucket's failure, and the jobs settled on one (shared
by the real pass, the catalog pass and the demand)."""

from __future__ import annotations

from xce.sched.buckets import Bucket, PendingJob


class Failure:
    """Why a bucket's next job could not start."""

    __slots__ = ("check", "detail", "kind", "reason")

    def __init__(self, kind: str, check: str, reason: str, detail: str = "") -> None:
        self.kind = kind
        self.check = check
        self.reason = reason
        self.detail = detail or reason


class Settled:
    """A bucket whose remaining jobs pend for one reason this session."""

    __slots__ = ("bucket", "failure", "members", "trace")

    def __init__(
        self, bucket: Bucket, members: list[PendingJob], failure: Failure, trace: int
    ) -> None:
        self.bucket = bucket
        self.members = members
        self.failure = failure
        self.trace = trace
