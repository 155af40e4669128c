"""Nothing is bought that would arrive too late (ARCHITECTURE.md section 2a,
"Elastic"): in the catalog pass, a job the plan starts on real capacity no later than
new hosts of a template it may use could join is booked there and asks for nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from xce.sched.buckets import Bucket, PendingJob
from xce.sched.earliest import earliest_start
from xce.sched.failure import Failure
from xce.sched.plan import Plan
from xce.sched.reasons import RESOURCE, clock, on_hosts, span
from xce.sched.state import SchedulerState
from xce.sched.virtual import TemplateSupply

# The check of a job the plan starts on real capacity before new hosts could join.
SERVED: Final = "plan"


class ServedOnReal:
    """The jobs one catalog pass books on real capacity, on the real pass's plan."""

    def __init__(self, state: SchedulerState, planner: Callable[[], Plan], now: float) -> None:
        """`planner`: the real pass's plan (made when first asked)."""
        self.state = state
        self.planner = planner
        self.now = now
        self._free_by: dict[float, int] = {}  # time -> free slots by then at most
        self._served_slots = 0  # slots of jobs booked on real capacity (served)

    def served(
        self, bucket: Bucket, job: PendingJob, usable: list[TemplateSupply]
    ) -> Failure | None:
        """Book the job on real capacity if the plan starts it there no later than new
        hosts of a template it may use (`usable`) could join: why it asks for
        nothing; None if it does not start so."""
        now = self.now
        joins = now + min([supply.lead for supply in usable])
        plan = self.planner()
        if self._slots_by(joins, plan) < bucket.n:  # (cheap: not that many slots by then)
            return None
        found = earliest_start(plan, bucket, job.id, joins)
        if found is None:
            return None
        start, hosts = found
        booked = plan.book(job.id, start, bucket.limit, hosts, bucket.use)
        self._served_slots += bucket.n
        return Failure(
            RESOURCE, SERVED,
            f"Expected to start at {clock(start)} (in {span(start - now)}) on "
            f"{on_hosts(booked.hosts)}, no later than new hosts could join: nothing "
            "requested",
        )

    def _slots_by(self, time: float, plan: Plan) -> int:
        """At most how many slots are free by `time`: free now plus those of running
        jobs planned to end by then, less those of jobs served so far."""
        found = self._free_by.get(time)
        if found is None:
            state = self.state
            found = plan.cap.free_at_start()
            now, planned = self.now, plan.planned
            for end, _job, run in state.ends:
                if planned(end) > time:
                    if end > now:
                        break  # (sorted by end: the rest end later still)
                    continue
                for slots in run.hosts.values():
                    found += slots
            self._free_by[time] = found
        return found - self._served_slots
