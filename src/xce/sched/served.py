"""Nothing is bought that would arrive too late (ARCHITECTURE.md section 2a,
"Elastic"): in the catalog pass, a job the plan starts on real capacity no later than
supply of a template it may use could join (new hosts, or hosts in flight) is booked
there and asks for nothing; so is a job whose reservation (`reserve_depth`) starts by
then."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from xce.sched.buckets import Bucket, PendingJob
from xce.sched.earliest import earliest_start
from xce.sched.failure import Failure
from xce.sched.hosts import by_name
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

    def served(
        self, bucket: Bucket, job: PendingJob, usable: list[TemplateSupply]
    ) -> Failure | None:
        """Book the job on real capacity if the plan starts it there no later than
        supply of a template it may use (`usable`) could join, new hosts or the first
        in-flight host left: why it asks for nothing; None if it does not start so.
        A job with a reservation (`reserve_depth`) is served by it when it starts by
        then."""
        now = self.now
        # (new hosts, or a host in flight that comes sooner)
        joins = min([min(now + supply.lead, supply.next_arrival) for supply in usable])
        plan = self.planner()
        reserved = plan.of_job.get(job.id)
        if reserved is not None:  # (the real pass's reservation: the plan holds it)
            if reserved.start > joins:
                return None
            return self._served(reserved.start, by_name(reserved.hosts, plan.cap.names))
        if self._slots_by(joins, plan) < bucket.n:  # (cheap: not that many slots by then)
            return None
        found = earliest_start(plan, bucket, job.id, joins)
        if found is None:
            return None
        start, hosts = found
        return self._served(start, plan.book(job.id, start, bucket.limit, hosts, bucket.use).hosts)

    def _served(self, start: float, hosts: dict[str, int]) -> Failure:
        return Failure(
            RESOURCE, SERVED,
            f"Expected to start at {clock(start)} (in {span(start - self.now)}) on "
            f"{on_hosts(hosts)}, no later than new hosts could join: nothing requested",
        )

    def _slots_by(self, time: float, plan: Plan) -> int:
        """At most how many slots are free at any moment by `time`: free now plus those
        of running jobs planned to end by then, and those the plan gives back by then
        (jobs dispatched this session, reservations)."""
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
        for when, _seq, sign, hosts, _use in plan.changes:  # (in time order)
            if when > time:
                break
            if sign > 0:
                found += sum(hosts.values())
        return found
