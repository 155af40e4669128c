"""Sessions after submissions alone, or after ends that leave the reservation where
it is: what the session before found still holds.

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

so every job that pended then pends again, taking no reservation. (Limits: a job
dispatched after the reserved one may have taken the last of its user's or queue's
slots; it would then pend at that limit, and a job behind it reserve instead: such a
session leaves no memo, `remember`.) The session looks again at the job that
reserved, which takes its reservation where it was (no search), and at the jobs
submitted since (and the twins after them in their buckets); at nothing else. Its
decisions are a full session's (tests/test_quiet.py).

Ends. With depth <= 1, the reservation's start T is the first change point at which
the eligible hosts' free slots add up to the job (`earliest_start`), and every change
before T is a rise: the free slots just before T (`Plan.before`) fall `need` slots
short. A job that ends now frees its slots at once instead of at its planned end e:
if e < T, that only adds slots before e, which were counted by T anyway; if e >= T,
the free slots just before T rise by its slots. While `need` stays above what ended
so (each end takes its slots off), no change point before T adds up, and T stays.
Its hosts stay too: on one-slot hosts they are the first hosts in label order free
by T, and only the hosts of jobs planned to end after T are newly free by then; if
each comes after the reservation's last host in label order, none comes first.
Without shared resources or limits no job before the reserved one can start now (it
pended on neither capacity nor a reservation: it never fits), so the reserved job
comes first again. The next session then looks at every job (capacity grew: `grown`),
and the reserved job takes its reservation from the memo. Jobs started since only
lower the free slots before T (the kept `need` can only understate the shortfall).
(Hot in EASY simulations: half the sessions after an end keep the reservation.)

Past limits. A job past its limit is planned to end one second from now, so a
reservation that waits for one starts one second after its session, and sooner than
one second after the next. Times are whole seconds (SWF), so no change point comes
between now and one second from now (`moves` checks it, and leaves to a full session
a start within that second, or within a second of the memo's session: of limits not
in whole seconds); there every job planned to
end by the old start still is, and the slots then added up to the job: the
reservation starts one second from now. Its hosts are the same unless a host newly
free by then, of a job planned to end between the old start and one second from now,
comes before its last host in label order (the check of an end above), or the memo
does not know them (the session before did not place the reservation, and jobs may
pend for the hosts a session before that placed it on). Every job that
pended then pends again: the start is as far ahead of the session as it was, or
nearer (a job ending before it could take reserved hosts then, only then), and
capacity only shrank. The kept `need` (the free slots just before the start: free
now) can only understate the shortfall again.
(Hot in EASY simulations of big machines: on RICC-2010-2, with limits not enforced,
over half the time of sessions went to reservations waiting for jobs past their
limit, bench/RESULTS.md.)

Shortfalls. A job counted `s` slots short (its candidates' free slots, less what the
reservation holds back of them within its window: `Evaluator.shorts`) fails again,
and so do its bucket's twins, until ends have freed `s` slots: while the memo
stands, what a bucket can use grows only by what ends free (one slot each of the
hosts they held), since the reservation keeps its start and hosts, each window
crosses the start once it has, and dispatches only take. The session skips such
buckets where their jobs come after the reserved job (with depth 1 none of those
can reserve), as long as it looks at no job before the reserved one (`stands`). Such
a job took no reservation, but once capacity grows (the end of a job without a
limit) it may take one, and shortfalls counted against the old reservation no
longer hold; a short bucket of such jobs is therefore never skipped. The memos that
follow carry the shortfalls.
They stand when the reservation moves to one second from now, on the same hosts: a
window that crossed the old start, at least a second after its session (`moves`), is
longer than a second, so it crosses the new one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING

from xce.model.events import JobFinished, JobStarted, SchedulerEvent
from xce.model.result import Dispatch, SortKey
from xce.sched.buckets import Bucket, PendingJob
from xce.sched.running import end_of

if TYPE_CHECKING:
    from xce.sched.plan import Plan
    from xce.sched.realpass import RealPass
    from xce.sched.state import SchedulerState


class QuietMemo:
    """What a lean session leaves for the next one (the module's docstring)."""

    __slots__ = (
        "free", "freed", "grown", "head", "hosts", "labelled", "last", "need", "new", "now",
        "past", "shorts", "start", "unstarted",
    )

    def __init__(
        self, now: float, dispatch: list[Dispatch], head: PendingJob | None, start: float,
        hosts: dict[int, int] | None, need: int,
    ) -> None:
        self.now = now
        self.unstarted = {d.job: d.hosts for d in dispatch}
        self.head = head  # the job that reserved (looked at again)
        self.start = start  # ... its reservation's start
        self.hosts = hosts  # ... and its hosts, if the session placed it
        # ... how many of those are free (-1: not counted), and where in label order
        # the free hosts it leaves begin (Plan.past), with the state's label_changes
        # then: both carried to the next session (`placed_again`)
        self.free = -1
        self.past: tuple[int, int] = (-1, 0)
        # At most how many slots short of the job the free slots are just before the
        # start (0: the memo ends with any job)
        self.need = need
        # the last of its hosts in label order (when first needed): its index where
        # hosts are numbered in label order (state.indexed_labels), else its label
        self.last: int | str | None = None
        self.labelled = 0  # ... made when the state's label_changes were so many
        self.grown = False  # whether a job ended since: capacity grew
        # ... the slots ends freed since the first of the memos that led to this one
        # (one each of one-slot hosts), and the buckets that failed short of free
        # slots: each fails again until `freed` reaches its figure ("Shortfalls" in
        # the module's docstring)
        self.freed = 0
        self.shorts: dict[Bucket, int] = {}
        self.new: dict[Bucket, SortKey] = {}  # the first job queued since, by bucket

    def after(self, event: SchedulerEvent, state: SchedulerState) -> QuietMemo | None:
        """The memo after an event that is no submission: kept for the start of a
        dispatch of its session, as dispatched, and for the end of a job that leaves
        the reservation where it is (`_ended`)."""
        if type(event) is JobStarted:
            if event.time == self.now:
                hosts = self.unstarted.pop(event.job, None)
                if hosts is event.hosts or hosts == event.hosts:  # (is: the session's own)
                    return self
            return None
        if type(event) is JobFinished and self.need > 0 and not self.unstarted:
            return self._ended(state, event.job)
        return None

    def _ended(self, state: SchedulerState, job: int) -> QuietMemo | None:
        """The memo after `job` ended (the "Ends" part of the module's docstring)."""
        run = state.running.get(job)
        if run is None:
            return None
        end = run.end if run.end > self.now else self.now + 1.0  # (as planned then)
        if end >= self.start:
            for slots in run.held.values():
                self.need -= slots
            if self.need <= 0:
                return None
            if end > self.start and not self._after_last(state, run.held):
                return None
        hosts = self.hosts
        if hosts is not None and self.free >= 0:  # (one slot each: those it held are free)
            self.free += len([index for index in run.held if index in hosts])
        self.grown = True
        self.freed += len(run.held)
        return self

    def _after_last(self, state: SchedulerState, held: dict[int, int]) -> bool:
        """Whether hosts newly free by the start all come after the reservation's
        last host in label order (or its hosts are not known: it was not placed)."""
        hosts = self.hosts
        if hosts is None:
            return True
        labels, last = state.labels, self.last
        if last is None or self.labelled != state.label_changes:  # (O(hosts): kept)
            last = self.last = (
                max(hosts) if state.indexed_labels else max([labels[index] for index in hosts])
            )
            self.labelled = state.label_changes
        if isinstance(last, int):  # (indices compared in C: hot on RICC-2010-2)
            return min(held) > last
        return all([labels[index] > last for index in held])

    def moves(self, state: SchedulerState, now: float) -> bool:
        """The reservation starts sooner than one second from now (it waits for a job
        now past its limit): whether it moves there on the same hosts ("Past limits"
        in the module's docstring; `start_at`)."""
        if now < self.start or self.start < self.now + 1.0:
            # (limits not in whole seconds: a start within the second stays there, and
            # one within a second of the memo's session was nearer it than one second)
            return False
        soon = now + 1.0
        ends = state.ends
        at = bisect_right(ends, self.start, key=end_of)
        while at < len(ends) and ends[at][0] <= soon:
            end, _job, run = ends[at]
            # (hosts not known: placed sessions ago, the jobs pending since may have
            # pended for them; only a full session knows whether they still do)
            if now < end < soon or self.hosts is None or not self._after_last(state, run.held):
                return False
            at += 1
        return True

    def start_at(self, now: float) -> float:
        """The reservation's start in a session at `now` that the memo holds for."""
        return max(self.start, now + 1.0)

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

    def buckets(self, state: SchedulerState) -> Iterable[Bucket]:
        """The buckets the session may look at (`first_to_look_at` says where): after
        an end every one, else the reserved job's and those with a job queued since
        (not a walk of every bucket: hot in EASY simulations, where about half the
        sessions follow submissions alone)."""
        if self.grown:
            return state.buckets.values()
        found = list(self.new)
        head = self.head
        if head is not None and head.bucket is not None and head.bucket not in self.new:
            found.append(head.bucket)
        return found

    def stands(self, keys: Iterable[SortKey]) -> bool:
        """Whether the reservation the shortfalls were counted against stands, as the
        session looks at jobs from `keys` (each bucket's first): it does while none
        comes before the reserved job, which then takes it again first. A job before
        it took no reservation, but an end (of a job without a limit) may let it take
        one now, in the reserved job's place."""
        head = self.head
        return head is not None and all(not key < head.key for key in keys)

    def first_to_look_at(self, bucket: Bucket, order: list[PendingJob], start: int) -> int:
        """Where the session takes up `order[start:]`: at the job that reserved or the
        first job queued since, whichever comes first (len(order): nowhere); after an
        end, at `start` (every job may fit now). In a bucket still short of free
        slots whose jobs there come after the reserved job, `~` that (< 0): it is
        skipped unless the session looks at a job before the reserved one (`stands`)."""
        at = start if self.grown else self._queued_at(bucket, order, start)
        head = self.head
        until = self.shorts.get(bucket)
        if (
            until is not None and until > self.freed and head is not None and at < len(order)
            and head.key < order[at].key
        ):
            return ~at
        return at

    def _queued_at(self, bucket: Bucket, order: list[PendingJob], start: int) -> int:
        """After submissions alone: the job that reserved or the first job queued
        since, whichever comes first (len(order): neither)."""
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
    reservation starts no sooner than the planned end of jobs past their limit (one
    second from now, sched/plan.py `planned`), or moves there on the same hosts
    (`QuietMemo.moves`)."""
    memo = state.quiet
    if memo is None or memo.unstarted or now <= memo.now:
        return None
    if memo.head is not None and memo.start < now + 1.0 and not memo.moves(state, now):
        return None
    return memo


def start_again(real: RealPass, job: PendingJob) -> tuple[float, dict[int, int]] | None:
    """The start of `job`'s reservation if the memo knows it (no search)."""
    memo = real.quiet
    if memo is None or memo.head is not job:
        return None
    real.need = memo.need
    return memo.start_at(real.now), {}


def placed_again(
    plan: Plan, real: RealPass, job: PendingJob
) -> tuple[float, dict[int, int]] | None:
    """The start and hosts of `job`'s reservation if the memo knows them, given to the
    plan as its search would. (The slots freed by then are read only of reserved
    hosts free now, `Plan.reserve`: on one-slot hosts, none.)"""
    memo = real.quiet
    if memo is None or memo.head is not job or memo.hosts is None:
        return None
    real.need = memo.need
    start = memo.start_at(real.now)
    # How many of its hosts are free: as the session before left them, plus those
    # freed since (`QuietMemo._ended`), unless a dispatch of this one took some. Where
    # the free hosts it leaves begin: before that position in label order every host
    # free then was reserved, and so is one freed since (it was free by the start).
    past, labelled = memo.past
    if labelled != real.state.label_changes:
        past = -1
    plan._found = (start, memo.hosts, {}, -1 if real.dispatch else memo.free, past)
    return start, memo.hosts


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
    if head is not None and head.bucket is not None:
        if head.bucket.req.order:
            return  # (another host order could rank the reservation's hosts anew)
        if real.evaluator.limit_failure(head, head.bucket.n) is not None:
            return  # (jobs dispatched after it took its limit: it pends at it next time)
    need = 0
    if head is not None and not state.pools and not state.limit_used:
        need = real.need  # (an end frees no token or limit a job before it waits for)
    memo = state.quiet = QuietMemo(now, real.dispatch, head, start, hosts, need)
    if plan is not None and hosts is not None:
        memo.free, memo.past = plan.free_claimed(), (plan.past, state.label_changes)
    used = real.quiet
    shorts = real.evaluator.shorts
    if used is not None:  # (shortfalls found before stand: the same dictionary, updated)
        freed = memo.freed = used.freed
        memo.shorts = used.shorts
        for bucket, short in shorts.items():
            memo.shorts[bucket] = freed + short
    else:
        memo.shorts = shorts
    if used is not None and hosts is not None and used.hosts is hosts:
        # (the same hosts, placed again: the last label stands while no host has
        # moved in label order; hot in EASY simulations of big machines, RICC-2010-2)
        memo.last, memo.labelled = used.last, used.labelled
