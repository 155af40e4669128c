"""The real pass's reservations and holds (ARCHITECTURE.md section 2a): a job that
failed on capacity is given its reservation on the plan, or its hold on hosts that
joined for blocked jobs (sched/holds.py), with the words the trace gives them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xce.model.result import Reservation
from xce.sched.buckets import Bucket, PendingJob
from xce.sched.demand_after import is_young
from xce.sched.earliest import earliest_start
from xce.sched.failure import Failure, Settled
from xce.sched.holds import JoinedHold
from xce.sched.holds_real import hold_on_real
from xce.sched.holds_wide import asked_later
from xce.sched.plan import Plan
from xce.sched.quiet import placed_again, start_again
from xce.sched.reasons import RESOURCE, clock, on_hosts, reserved, span

if TYPE_CHECKING:
    from xce.sched.realpass import RealPass


def reserve(real: RealPass, bucket: Bucket, job: PendingJob, failure: Failure) -> bool:
    """Give a job that failed on capacity its reservation: the earliest start at
    which it fits over its window on the profile. False: it never fits."""
    plan = real.ensure_plan()
    if real._lazy and bucket.plain and not plan.bookings:
        fits = start_again(real, job)
        if fits is None:
            fits = earliest_start(plan, bucket, job.id, place=False)
            if fits is None:
                return False
            real.need = bucket.n - plan.before
        real._unplaced = (bucket, job, fits[0])
        real.settled.append(Settled(bucket, [job], failure, -1))
        return True
    found = placed_again(plan, real, job)
    if found is None:
        found = earliest_start(plan, bucket, job.id)
        if found is None:
            return False
        if not plan.bookings:
            real.need = bucket.n - plan.before
    start, hosts = found
    booked = book(real, plan, bucket, job, start, hosts)
    if booked is None or real.trace is None:  # (no pend reasons: no words needed)
        real.settled.append(Settled(bucket, [job], failure, -1))
        return True
    reason = reserved(start, real.now, booked.hosts)
    waits = plan.waits_for(hosts, start)
    shown = ", ".join(f"job {j} at {clock(t)} on {h}" for j, t, h in waits[:8])
    more = f" and {len(waits) - 8} more" if len(waits) > 8 else ""
    detail = (
        f"{failure.detail}. Reserved: the earliest time at which it fits on capacity "
        f"that stays free for {window_words(bucket)} is {clock(start)} "
        f"(in {span(start - real.now)}), on {on_hosts(booked.hosts)}"
        + (f"; it waits for the planned ends of {shown}{more}" if waits else "")
    )
    held = Failure(RESOURCE, failure.check, reason, detail)
    real.settled.append(Settled(bucket, [job], held, real._traced(job, held, "plan")))
    return True


def book(
    real: RealPass, plan: Plan, bucket: Bucket, job: PendingJob, start: float,
    hosts: dict[int, int],
) -> Reservation | None:
    """Book a job's reservation; the reservation for the session result, or None
    in a session without pend reasons, which names no hosts (nothing reads them:
    `run_session`'s `reasons`; elastic simulations, bench_traces.py)."""
    if real.trace is None:
        plan.reserve(job.id, start, bucket.limit, hosts, bucket.use)
        real.unnamed += 1
        return None
    booked = plan.book(job.id, start, bucket.limit, hosts, bucket.use)
    real.reservations.append(booked)
    return booked


def hold(real: RealPass, bucket: Bucket, job: PendingJob, failure: Failure) -> bool:
    """Let a job that failed on capacity hold the free hosts that joined for
    blocked jobs (sched/holds.py); False: it holds none. Its bucket goes on (the
    catalog pass places the rest of it)."""
    assert real.holds is not None
    if is_young(real.state, bucket, job, real.now):
        return False  # (it asks for no supply yet: nothing to hold hosts for)
    plan = real.ensure_plan()
    hold = real.holds.hold(bucket, job.id, plan) or hold_on_real(real.holds, bucket, job.id, plan)
    if hold is None:
        return False
    if real.trace is None:  # (no pend reasons: the words are not needed)
        real.settled.append(Settled(bucket, [job], failure, -1))
        return True
    held = Failure(RESOURCE, failure.check, failure.reason, _held_detail(hold, failure, real.now))
    real.settled.append(Settled(bucket, [job], held, real._traced(job, held, "plan")))
    return True


def _held_detail(hold: JoinedHold, failure: Failure, now: float) -> str:
    slots = sum(hold.hosts.values())
    if hold.asks_at > now:  # (its pend reason's words: sched/holds_wide.py)
        return f"{failure.detail}. {asked_later(hold, now).reason}"
    return (
        f"{failure.detail}. Held: {slots} slots on {on_hosts(hold.booked.hosts)} "
        f"({_held_from(hold)}) from {clock(hold.start)} "
        f"(in {span(hold.start - now)}), when the other {hold.rest} slots are "
        "expected on its hosts; later jobs may use them only as backfill that ends "
        "by then"
    )


def _held_from(hold: JoinedHold) -> str:
    if hold.static:  # (free static hosts too: sched/holds_real.py)
        return f"{hold.static} static, the rest from template {hold.template.name}"
    return f"joined from template {hold.template.name}"


def window_words(bucket: Bucket) -> str:
    """The bucket's window, in words for the trace."""
    if bucket.window == math.inf:
        return "ever after (no run limit, or its queue does not backfill)"
    return f"its run limit ({span(bucket.window)})"
