"""A queue's `demand_after` (LSF's `RC_DEMAND_POLICY = THRESHOLD[[1, minutes]]`): a
job of the queue asks for no supply (new hosts, hosts in flight, borrowed tokens)
until it has pended that long; until then it waits for the capacity there is
(docs/policy.md, "demand_after"). Supply already requested for the job (a hold) stays
its own (and a job holds no free provisioned hosts for supply it does not ask for).
The session falls due again when the first such job comes of age
(`SessionResult.next_due`), so no driver keeps a timer of its own."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from xce.sched.buckets import Bucket, PendingJob
from xce.sched.failure import Failure
from xce.sched.reasons import RESOURCE, span
from xce.sched.state import SchedulerState

# The catalog check of a job that has not pended its queue's `demand_after` yet.
YOUNG: Final = "demand_after"


def is_young(state: SchedulerState, bucket: Bucket, job: PendingJob, now: float) -> bool:
    """Whether `job` (of `bucket`) has pended less than its queue's `demand_after`,
    and no host joined for it: it asks for no supply, nor holds free provisioned hosts
    for supply to come (sched/holds.py)."""
    after = bucket.queue.demand_after
    return bool(after) and job.spec.submit + after > now and job.id not in state.requested_for


class DemandAfter:
    """The `demand_after` check of one catalog pass, and when it next changes."""

    def __init__(self, state: SchedulerState, now: float) -> None:
        self.state = state
        self.now = now
        self.due = math.inf  # when the first job held back here comes of age
        self._failures: dict[str, Failure] = {}  # queue -> its jobs' reason

    def young(self, bucket: Bucket, job: PendingJob) -> Failure | None:
        """Why `job` asks for no supply yet; None once it may (`is_young`)."""
        if not is_young(self.state, bucket, job, self.now):
            return None
        after = bucket.queue.demand_after
        self.due = min(self.due, job.spec.submit + after)
        queue = bucket.queue.name
        failure = self._failures.get(queue)
        if failure is None:
            failure = self._failures[queue] = Failure(
                RESOURCE, YOUNG,
                f"Pending less than queue {queue}'s demand_after ({span(after)}): "
                "no supply requested yet",
            )
        return failure

    def alone(self, outcome: Failure, bucket: Bucket, jobs: Sequence[PendingJob], start: int,
              stop: int) -> bool:
        """Whether the catalog pass's `outcome` for a job is this check's, for that job
        alone: the jobs after it in its bucket (`jobs[start:stop]`) are not all young.
        In submit order they are, and pend with it; but a job moved up (`btop`) or of
        a higher user priority may come before older ones. Their ages count toward
        `due`."""
        if outcome.check != YOUNG:
            return False
        rest = jobs[start:stop]
        if not all(is_young(self.state, bucket, job, self.now) for job in rest):
            return True
        after = bucket.queue.demand_after
        self.due = min([self.due, *(job.spec.submit + after for job in rest)])
        return False
