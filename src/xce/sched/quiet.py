"""Sessions after submissions alone: what the session before found still holds.

(Hot in EASY simulations of machines of many one-slot hosts: placing the first
reservation again is most of a session there, and about half the sessions follow
only submissions: CTC-SP2, bench/RESULTS.md.)

A lean session (sched/realpass.py `_lazy`: no pend reasons, supply or tokens) on
one-slot hosts, with at most one reservation and none of fairshare, preemption,
hosts requested for jobs or jobs waiting for a condition, leaves a memo in the
state. The state drops it on any event but the submission of a job that comes after
the job that reserved (in scheduling order; any job when none did) and the start of
one of that session's own dispatches, at its time and on its hosts (sched/state.py).
While it stands, and the reservation starts after the planned end of every job past
its limit (one second from now), the next session knows that:

* capacity only shrank: every job that pended then sees at most what it saw then,
  on every host at every time, over any window (nothing ended, the dispatches then
  are the jobs now running, and a job past its limit only frees its hosts later than
  planned then); the jobs submitted since come after the reservation, so it is made
  first again, and what they take or reserve only leaves less;
* the reservation is the same: its start (the earliest fit cannot come sooner on less
  capacity, and the one found then still holds, since what started after it was
  checked not to delay it) and its hosts (one-slot hosts: the placement takes the
  first hosts in the default order with room then; those still have it, and those
  before them had none and have none);

so every job that pended then pends again, taking no reservation. The session looks
again at the job that reserved, which takes its reservation where it was (no
search), and at the jobs submitted since (and the twins after them in their
buckets); at nothing else. Its decisions are a full session's (tests/test_quiet.py).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from xce.model.events import JobStarted, SchedulerEvent
from xce.model.result import Dispatch, SortKey
from xce.sched.buckets import Bucket, PendingJob

if TYPE_CHECKING:
    from xce.sched.plan import Plan
    from xce.sched.realpass import RealPass
    from xce.sched.state import SchedulerState


class QuietMemo:
    """What a lean session leaves for the next one (the module's docstring)."""

    __slots__ = ("head", "hosts", "new", "now", "start", "unstarted")

    def __init__(
        self, now: float, dispatch: list[Dispatch], head: PendingJob | None, start: float,
        hosts: dict[int, int] | None,
    ) -> None:
        self.now = now
        self.unstarted = {d.job: d.hosts for d in dispatch}
        self.head = head  # the job that reserved (looked at again)
        self.start = start  # ... its reservation's start
        self.hosts = hosts  # ... and its hosts, if the session placed it
        self.new: dict[Bucket, SortKey] = {}  # the first job queued since, by bucket

    def after(self, event: SchedulerEvent) -> QuietMemo | None:
        """The memo after an event that is no submission: kept only for the start of a
        dispatch of its session, as dispatched."""
        if (
            type(event) is JobStarted
            and event.time == self.now
            and self.unstarted.pop(event.job, None) == event.hosts
        ):
            return self
        return None

    def queued(self, job: PendingJob, bucket: Bucket) -> QuietMemo | None:
        """The memo after `job` pended (in `bucket`): kept if it comes after the job
        that reserved."""
        head = self.head
        if head is not None and not head.key < job.key:
            return None
        first = self.new.get(bucket)
        if first is None or job.key < first:
            self.new[bucket] = job.key
        return self

    def first_to_look_at(self, bucket: Bucket, order: list[PendingJob], start: int) -> int:
        """Where the session takes up `order[start:]`: at the job that reserved or the
        first job queued since, whichever comes first (len(order): nowhere)."""
        at = len(order)
        head = self.head
        if head is not None and head.bucket is bucket:
            at = order.index(head, start)
        first = self.new.get(bucket)
        if first is not None:
            at = min(at, bisect_left(order, first, start, key=_key))
        return at


def _key(job: PendingJob) -> SortKey:
    return job.key


def quiet_since(state: SchedulerState, now: float) -> QuietMemo | None:
    """The last session's memo if it holds now: every dispatch started, and the
    reservation starts after the planned end of jobs past their limit (one second from
    now, sched/plan.py `planned`: sooner, it would move)."""
    memo = state.quiet
    if memo is None or memo.unstarted or now <= memo.now:
        return None
    if memo.head is not None and memo.start < now + 1.0:
        return None
    return memo


def start_again(real: RealPass, job: PendingJob) -> tuple[float, dict[int, int]] | None:
    """The start of `job`'s reservation if the memo knows it (no search)."""
    memo = real.quiet
    if memo is None or memo.head is not job:
        return None
    return memo.start, {}


def placed_again(
    plan: Plan, real: RealPass, job: PendingJob
) -> tuple[float, dict[int, int]] | None:
    """The start and hosts of `job`'s reservation if the memo knows them, given to the
    plan as its search would (on one-slot hosts, a reserved host frees by the start
    all it does not have free now)."""
    memo = real.quiet
    if memo is None or memo.head is not job or memo.hosts is None:
        return None
    hosts, free = memo.hosts, plan.cap.free_slots
    plan._found = (memo.start, hosts, {i: slots - free[i] for i, slots in hosts.items()})
    return memo.start, hosts


def remember(state: SchedulerState, real: RealPass, now: float) -> None:
    """Leave the session's memo in the state, where the module's conditions hold."""
    state.quiet = None
    if not (
        real._lazy and state.pending and state.config.reserve_depth <= 1
        and state.widest <= 1 and not state.fairshare.trees and not state.requested_for
        and not state.waiting and not state.preemptions.suspended
        and not any(queue.preempt for queue in state.queues.values())
    ):
        return
    head: PendingJob | None = None
    start, hosts = 0.0, None
    plan = real.plan
    if real._unplaced is not None:
        _bucket, head, start = real._unplaced
    elif plan is not None and plan.bookings:
        booking = plan.bookings[0]
        head, start, hosts = state.pending.get(booking.job), booking.start, booking.hosts
        if head is None:
            return
    if head is not None and head.bucket is not None and head.bucket.req.order:
        return  # (another host order could rank the reservation's hosts anew)
    state.quiet = QuietMemo(now, real.dispatch, head, start, hosts)
