"""The real pass: pending jobs in scheduling order against real, open capacity.

Buckets are merged by the key of their next job (a heap), so the pass walks jobs in
exact scheduling order, but a bucket that fails is settled for all its remaining
jobs at once: capacity and limits only shrink within a session.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from heapq import heapify, heappop, heapreplace
from itertools import product
from typing import Final

from xce.model.result import Dispatch, Reservation, SortKey, TraceEntry
from xce.sched.buckets import Bucket, InKeyOrder, PendingJob
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.earliest import earliest_start
from xce.sched.eligibility import Eligible, eligible, reach
from xce.sched.ever import Universe, universe
from xce.sched.failure import Failure as Failure  # (re-exported)
from xce.sched.failure import Settled as Settled
from xce.sched.holds import ElasticHolds
from xce.sched.hosts import by_name
from xce.sched.limits import limit_reason
from xce.sched.placement import (
    HostOrder,
    RequestedFirst,
    Room,
    default_ranked,
    host_key,
    place,
    shortfall,
    spread,
    spread_everywhere,
)
from xce.sched.plan import Plan
from xce.sched.pools import PoolRecord
from xce.sched.quiet import QuietMemo, placed_again, quiet_since
from xce.sched.reasons import (
    LIMIT,
    RESOURCE,
    no_host,
    no_whole_host,
    none_open,
    short_shared,
    would_delay,
)
from xce.sched.requested import requested_hosts, requesting_buckets
from xce.sched.reserving import book, hold, reserve, window_words
from xce.sched.share_order import local_until, merge_key, rank_buckets
from xce.sched.state import SchedulerState
from xce.sched.usage import PerSlot, Use

Placement = tuple[dict[int, int], dict[PoolRecord, float]]

# The checks whose failure a reservation can end: capacity that frees over time.
RESERVABLE: Final = frozenset({"slots", "consumable", "gpus", "span", "reservation"})


class Evaluator:
    """Evaluates buckets against a session's capacity (the real pass and, with virtual
    hosts added to the capacity, the catalog pass share it)."""

    def __init__(self, state: SchedulerState, cap: Capacity) -> None:
        self.state = state
        self.cap = cap
        self._keys: dict[int, HostOrder] = {}
        self._rooms: dict[tuple[int, PerSlot, int], tuple[int, Room]] = {}
        # The last candidates found to be every open host with a free slot (every
        # host eligible, no virtual host): exactly cap.open_free at that version.
        self.everywhere: list[int] | None = None
        # The hosts requested for the job being placed, taken first among equals
        # (for_job; sched/requested.py); None: no such host
        self.requested: set[int] | None = None
        # Buckets whose next job was counted short of free slots (less what the
        # reservation holds back), by how many: sched/quiet.py, "Shortfalls"
        self.shorts: dict[Bucket, int] = {}

    def for_job(self, job_id: int) -> None:
        """The next placements are for `job_id`: the hosts requested for it first."""
        self.requested = requested_hosts(self.state, job_id) if self.state.requested_for else None

    def key_for(self, bucket: Bucket) -> HostOrder:
        found = self._keys.get(id(bucket))
        if found is None:
            found = self._keys[id(bucket)] = host_key(self.cap, bucket.req.order)
        return found

    def limit_failure(self, job: PendingJob, n: int) -> Failure | None:
        """The first limit that has no room for `job` (`n` slots and one job)."""
        if not job.limit_refs:
            return None
        limits = self.state.config.limits
        for ref in job.limit_refs:
            limit = limits[ref[0]]
            slots, jobs = self.cap.limit_counts(ref)
            if limit.slots is not None and slots + n > limit.slots:
                return Failure(LIMIT, "limit", limit_reason(limit, f"{limit.slots} slots"))
            if limit.jobs is not None and jobs + 1 > limit.jobs:
                return Failure(LIMIT, "limit", limit_reason(limit, f"{limit.jobs} jobs"))
        return None

    def split_limited(
        self, members: list[PendingJob], n: int
    ) -> tuple[list[tuple[PendingJob, Failure]], list[PendingJob]]:
        """Split jobs into those whose limit has no room (with it) and the others."""
        limited: list[tuple[PendingJob, Failure]] = []
        if not self.state.config.limits or not any(job.limit_refs for job in members):
            return limited, members
        verdicts: dict[int, Failure | None] = {}  # by limit-ref tuple identity
        rest: list[PendingJob] = []
        for job in members:
            refs = job.limit_refs
            if not refs:
                rest.append(job)
                continue
            if id(refs) not in verdicts:
                verdicts[id(refs)] = self.limit_failure(job, n)
            failure = verdicts[id(refs)]
            if failure is None:
                rest.append(job)
            else:
                limited.append((job, failure))
        return limited, rest

    def candidates(self, bucket: Bucket) -> Failure | list[int]:
        """Open eligible hosts with a free slot, or why there are no eligible open
        hosts at all (the view is kept on the Eligible: see free_on)."""
        elig = bucket.eligible
        if elig is None:
            elig = bucket.eligible = eligible(
                self.state, bucket.queue, bucket.req.select, bucket.hosts, bucket.exclusive
            )
        assert isinstance(elig, Eligible)
        opened = elig.open
        if not opened:
            if not elig.matching:
                return Failure(RESOURCE, "select", no_host(bucket.req.select, bucket.queue.name))
            return Failure(RESOURCE, "closed", none_open(len(elig.matching)))
        # Views derived from the capacity, valid until its next reservation.
        cap = self.cap
        cached = elig.cands
        if cached is not None and cached[0] is cap and cached[1] == cap.version:
            return cached[2]
        free = cap.open_free
        if not elig.others and len(cap.hosts) == len(self.state.hosts):
            cands = self.everywhere = list(free)  # every host eligible, none virtual
        elif len(free) < len(opened):
            cands = [i for i in free if i in opened]
        else:
            cands = [i for i in opened if i in free]
        if elig.exclusive:  # (-x) hosts running no job and holding nothing back
            cands = cap.whole_free(cands)
            if not cands:
                return Failure(RESOURCE, "exclusive", no_whole_host(len(elig.open)))
        elig.cands = (cap, cap.version, cands, -1)
        return cands

    def free_on(self, elig: Eligible, cands: list[int]) -> int:
        """The free slots of `cands`, the eligible hosts' view `candidates` just made
        (summed once per view)."""
        cached = elig.cands
        assert cached is not None and cached[2] is cands
        if cached[3] < 0:
            cap = self.cap
            if cap.widest <= 1 and len(cap.hosts) == len(self.state.hosts):
                free = len(cands)  # (one-slot hosts, none virtual: hot on RICC-2010-2)
            else:
                free_slots = cap.free_slots
                free = sum([free_slots[i] for i in cands])
            elig.cands = (*cached[:3], free)
            return free
        return cached[3]

    def slots_failure(self, n: int, free: int) -> Failure:
        """The failure of a job of `n` slots with only `free` free on its eligible
        hosts (shortfall's first check), shared by every job that meets it."""
        key = (n, free)
        known = self.state.slot_failures
        failure = known.get(key)
        if failure is None:
            failure = Failure(
                RESOURCE, "slots",
                f"Not enough job slots: {n} needed, {free} free on eligible hosts",
            )
            if len(known) >= 4096:
                known.clear()
            known[key] = failure
        assert isinstance(failure, Failure)
        return failure

    def room(self, bucket: Bucket, cands: list[int]) -> Room:
        """What each candidate host can take of this bucket's shape (cached)."""
        key = (id(cands), bucket.per_slot, bucket.gpus)
        cached = self._rooms.get(key)
        if cached is not None and cached[0] == self.cap.version and cached[1].cands is cands:
            return cached[1]
        room = Room(self.cap, cands, bucket.use)
        self._rooms[key] = (self.cap.version, room)
        return room

    def try_place(self, bucket: Bucket, cands: list[int]) -> Placement | Failure:
        """A placement for the bucket's next job on `cands`, with shared tokens."""
        cap = self.cap
        requested = self.requested
        if bucket.plain and requested is None:
            # What place() finds for it, without the views: every candidate's free
            # slots are usable, and they add up to enough (quick_failure).
            if cands is self.everywhere and len(cands) == len(cap.open_free):
                placed = spread_everywhere(
                    cands, cap.open_free, cap.free_slots, cap.labels, cap.label_order,
                    bucket.n, cap.widest,
                )
            else:
                ranked = default_ranked(cands, cap.free_slots, cap.labels, cap.label_order)
                placed = spread(ranked, cap.free_slots.__getitem__, bucket.n)
            if placed is not None:
                return placed, {}
        req = bucket.req
        key = (
            self.key_for(bucket) if requested is None
            else RequestedFirst(cap, req.order, requested)
        )
        room = self.room(bucket, cands)
        hosts = place(room, bucket.n, req.span_hosts, req.span_ptile, key)
        if hosts is None:
            return self.host_failure(bucket, room)
        if not bucket.shared:
            return hosts, {}
        choices: list[list[PoolRecord]] = []
        for res, amount in bucket.shared:
            choices.append(
                [p for p in self.state.pools[res] if cap.pool_free[p] + EPSILON >= amount]
            )
        for combo, found in self.by_pools(bucket, cands, hosts, key, product(*choices)):
            return found, {p: a for p, (_r, a) in zip(combo, bucket.shared, strict=True)}
        # Hosts are there; tokens are what is missing.
        return self.shared_failure(bucket, cands)

    def by_pools(
        self, bucket: Bucket, cands: list[int], hosts: dict[int, int], key: HostOrder,
        combos: Iterable[tuple[PoolRecord, ...]],
    ) -> Iterator[tuple[tuple[PoolRecord, ...], dict[int, int]]]:
        """For each choice of one pool per shared resource, in turn, the job's
        placement on the candidates those pools all reach, where it fits there
        (`hosts`: its placement on every candidate, kept where they reach them all)."""
        req = bucket.req
        for combo in combos:
            allowed = self.reachable(cands, combo)
            found = hosts if allowed is cands else place(
                Room(self.cap, allowed, bucket.use), bucket.n, req.span_hosts,
                req.span_ptile, key,
            )
            if found is not None:
                yield combo, found

    def reachable(self, cands: list[int], pools: tuple[PoolRecord, ...]) -> list[int]:
        """The candidates every one of the pools reaches (`cands` itself if all)."""
        allowed = cands
        for pool in pools:
            hosts = reach(self.state, pool)
            if hosts is not None:
                allowed = [i for i in allowed if i in hosts]
        return allowed

    def host_failure(self, bucket: Bucket, room: Room) -> Failure:
        if bucket.gpus:  # (the span and host preference are read only for GPUs)
            req = bucket.req
            check, reason = shortfall(
                self.cap, room, bucket.n, req.span_hosts, req.span_ptile, self.key_for(bucket)
            )
        else:
            check, reason = shortfall(self.cap, room, bucket.n)
        return Failure(RESOURCE, check, reason)

    def shared_failure(self, bucket: Bucket, cands: list[int]) -> Failure:
        for res, amount in bucket.shared:
            free = max(
                (
                    self.cap.pool_free[p]
                    for p in self.state.pools[res]
                    if self.reachable(cands, (p,))
                ),
                default=0.0,
            )
            if free + EPSILON < amount:
                return Failure(RESOURCE, "shared", short_shared(res, amount - free, free))
        res, amount = bucket.shared[0]
        return Failure(RESOURCE, "shared", short_shared(res, amount, 0.0))

    def evaluate(self, bucket: Bucket) -> Placement | Failure:
        """Where the bucket's next job's resources would go now."""
        found = self.quick_failure(bucket)
        if isinstance(found, Failure):
            return found
        return self.place_on(bucket, found)

    def place_on(self, bucket: Bucket, cands: list[int]) -> Placement | Failure:
        """evaluate's last step: the candidates are known and hold enough free slots."""
        outcome = self.try_place(bucket, cands)
        if isinstance(outcome, Failure):
            return self.remember(bucket, outcome)
        return outcome

    def quick_failure(self, bucket: Bucket) -> Failure | list[int]:
        """The bucket's next job's failure when it is known or cheap to find: found
        on the very same capacity before, no eligible open host, or fewer free slots
        than the job needs on its eligible hosts (then no placement exists: what
        `try_place` would find, sooner). Else the candidate hosts to try."""
        known = self.known_or_counted(bucket)
        if isinstance(known, Failure):
            return known
        n = bucket.n
        cands = self.candidates(bucket)
        if isinstance(cands, Failure):
            return self.remember(bucket, cands)
        if len(cands) >= n:
            return cands  # every candidate has a free slot: they hold the job's slots
        assert isinstance(bucket.eligible, Eligible)
        free = self.free_on(bucket.eligible, cands)
        if free < n:
            return self.remember(bucket, self.slots_failure(n, free))
        return cands

    def known_or_counted(self, bucket: Bucket) -> Failure | int:
        """quick_failure's first steps, without the candidates' list: the bucket's
        next job's failure if it is known, or if its candidates are every open host
        with a free slot, one slot each, and too few; else how many those are (what
        `free_on` finds), -1 where the candidates are not those."""
        # A failure found by an earlier session on the very same capacity: nothing that
        # decides fit has changed since, and nothing was reserved before it this session.
        known = bucket.failure
        if known is not None and self.cap.version == 0 and known[0] == self.state.capacity_version:
            assert isinstance(known[1], Failure)
            self.state.failure_cache_hits += 1
            return known[1]
        n = bucket.n
        counted = self._free_everywhere(bucket)
        if counted is None:
            return -1
        if counted < n:  # (without the view: hot)
            self.shorts[bucket] = n - counted
            return self.remember(bucket, self.slots_failure(n, counted))
        return counted

    def _free_everywhere(self, bucket: Bucket) -> int | None:
        """The free slots of the bucket's candidates when they are every open host
        with a free slot, one slot each, none virtual (their number: what `free_on`
        finds, without making `candidates`' list; hot in EASY simulations, where most
        jobs behind a reservation fail for it); else None (not known so)."""
        elig, cap = bucket.eligible, self.cap
        if (
            cap.widest <= 1 and isinstance(elig, Eligible) and elig.open
            and not elig.others and not elig.exclusive
            and len(cap.hosts) == len(self.state.hosts)
        ):
            return len(cap.open_free)
        return None

    def remember(self, bucket: Bucket, failure: Failure) -> Failure:
        if self.cap.version == 0:
            bucket.failure = (self.state.capacity_version, failure)
        return failure


def _key_at(bucket: Bucket, order: list[PendingJob], pos: int, fair: bool) -> SortKey:
    """The merge key of the bucket's job at `pos` (sched/share_order.py: fairshare)."""
    key = order[pos].key
    return merge_key(bucket, key) if fair else key


class RealPass:
    """Runs the real pass; collects dispatches, settled buckets, reservations and the
    trace. Blocked jobs are given their reservations and holds in sched/reserving.py."""

    def __init__(
        self,
        state: SchedulerState,
        cap: Capacity,
        trace: list[TraceEntry] | None,
        now: float = 0.0,
    ) -> None:
        """`trace`: where to record why buckets settled; None records nothing (a
        session without pend reasons)."""
        self.state = state
        self.cap = cap
        self.now = now
        self.evaluator = Evaluator(state, cap)
        self.trace = trace
        self.dispatch: list[Dispatch] = []
        self.settled: list[Settled] = []
        self._limited: dict[tuple[int, str], Settled] = {}
        self.evaluations = 0
        # The plan (ARCHITECTURE.md 2a), made when the first blocked job may reserve.
        self.depth = state.config.reserve_depth
        self.plan: Plan | None = None
        self.reservations: list[Reservation] = []
        self.backfilled: list[int] = []  # dispatched while an earlier job holds a reservation
        # Holds on hosts that joined for blocked jobs (sched/holds.py): with templates.
        self.holds = ElasticHolds(state, cap, now) if state.ranked else None
        self._planning = bool(self.depth) or self.holds is not None
        self.ends_planned = False  # a dispatch of this session has a planned end
        # Dispatches before the plan was made: (hosts, what they take of them, limit).
        self._released: list[tuple[dict[int, int], Use, float]] = []
        # Buckets whose next jobs fail now (a twin reserved), by id: each may still
        # reserve (see _run_planned).
        self._failing: dict[int, Failure] = {}
        # Without pend reasons reservations are not named (none is in the session
        # result: `unnamed` counts them, sched/reserving.py `book`). Without supply or
        # tokens either (a simulation that records nothing), the first is placed only
        # when a decision needs it: a later job could start now and would run past
        # its start, or another job reserves. Until then only its start is known; a
        # session in which no decision needs it never places it. Placed later, it is
        # the same: what started meanwhile ends by its start. (Hot in EASY
        # simulations: half of the sessions with a reservation.)
        self._lazy = self.trace is None and self.holds is None and not state.countable_pools
        self._unplaced: tuple[Bucket, PendingJob, float] | None = None  # (and its start)
        self.unnamed = 0
        self.quiet: QuietMemo | None = None  # what the session before found (sched/quiet.py)
        self.need = 0  # ... and what the first reservation's search found (QuietMemo.need)
        # Buckets with a job that hosts were requested for (sched/requested.py)
        self._requesting = requesting_buckets(state) if state.requested_for else set()

    def run(self) -> None:
        # Fairshare queues: buckets merged by merge keys (sched/share_order.py)
        fair = bool(self.state.fairshare.trees)
        if fair:
            rank_buckets(self.state, self.now, self.trace)
        self.quiet = quiet_since(self.state, self.now)  # (after submissions alone)
        fresh = _taken_up(self, fair)
        if len(fresh) == 1 and not self._planning:  # one bucket: nothing to merge
            _key, _seq, (bucket, order), pos = fresh[0]
            self._run(bucket, order, pos, None)
            return
        queue = InKeyOrder(fresh)
        evaluator = self.evaluator  # (a native object: its methods are called directly)
        limits = self.state.config.limits
        while queue.left():
            _key, seq, (bucket, order), pos = queue.pop()
            plan = self.plan
            if plan is not None and (plan.bookings or self._unplaced is not None):
                # (failing buckets too)
                until = local_until(bucket, order[pos].key, queue.next_key(), fair)
                pos = self._run_planned(bucket, order, pos, until)
            else:
                cands = None
                if not limits:
                    # The common case inline: the bucket fails at its next job (the
                    # first step of _run and _run_single_hosts, without the calls).
                    found = evaluator.quick_failure(bucket)
                    if isinstance(found, Failure):
                        self.evaluations += 1
                        pos = self._settle(bucket, order, pos, found)
                        if pos < len(order):
                            queue.push(_key_at(bucket, order, pos, fair), seq, (bucket, order), pos)
                        continue
                    cands = found
                until = local_until(bucket, order[pos].key, queue.next_key(), fair)
                pos = self._run(bucket, order, pos, until, cands)
            if pos < len(order):
                queue.push(_key_at(bucket, order, pos, fair), seq, (bucket, order), pos)

    # ------------------------------------------------------------------ the plan
    def _run_planned(
        self, bucket: Bucket, order: list[PendingJob], pos: int, until: SortKey | None
    ) -> int:
        """_run once a reservation is booked: each job starts now only on capacity
        that stays free over its window (what a reservation holds back depends on
        it). Twins of a job that failed now fail too, unevaluated (`_failing`)."""
        return self._place_each(bucket, order, pos, until, None, True)

    def _evaluate_planned(self, bucket: Bucket) -> Placement | Failure:
        """Where the bucket's next job goes now without delaying a reservation: first
        on the free capacity (a job that does not fit there fails as ever), then, if
        reservations hold some of it within the job's window, without that."""
        evaluator = self.evaluator
        unplaced = self._unplaced  # (it ends before the only reservation: placed as ever)
        before = unplaced is not None and self.now + bucket.window <= unplaced[2]
        lean_ok = bucket.slots_only and self.trace is None
        if lean_ok and not before and (found := _lean_uncounted(self, bucket)) is not None:
            return found
        cands = evaluator.quick_failure(bucket)
        if isinstance(cands, Failure):
            return cands
        if before:
            return evaluator.place_on(bucket, cands)
        if lean_ok:
            assert isinstance(bucket.eligible, Eligible)
            lean = _lean_placement(self, bucket, evaluator.free_on(bucket.eligible, cands), cands)
            if lean is not None:
                return lean
        outcome = evaluator.place_on(bucket, cands)
        if isinstance(outcome, Failure):
            return outcome
        plan = self.ensure_plan()  # (the unplaced reservation placed: a job may start)
        if plan.undisturbed(bucket, outcome[0]):
            return outcome
        held = plan.holdback(bucket)
        if not held:
            return outcome
        self.cap.hold_back(held, -1)
        lowered = evaluator.evaluate(bucket)
        self.cap.hold_back(held, +1)
        if isinstance(lowered, Failure):
            if self.trace is None:  # (no pend reasons: the words are not needed)
                return Failure(RESOURCE, "reservation", "Would delay a reservation")
            booking = plan.delaying(held, bucket)
            reason = would_delay(booking.job, booking.start, self.now)
            detail = (
                f"{reason}: it fits now, but not on capacity that stays free for "
                f"{window_words(bucket)} ({lowered.reason})"
            )
            return Failure(RESOURCE, "reservation", reason, detail)
        return lowered

    def ensure_plan(self) -> Plan:
        """The session's plan, made when first needed (with this session's dispatches
        so far), its unplaced reservation placed."""
        plan = self.plan
        if plan is None:
            plan = self.plan = Plan(self.state, self.cap, self.now)
            for hosts, use, limit in self._released:
                plan.dispatched(hosts, use, limit)
            self._released = []
        unplaced = self._unplaced
        if unplaced is not None:  # (nothing changed since it was found to fit)
            self._unplaced = None
            bucket, job, start = unplaced
            found = placed_again(plan, self, job) or earliest_start(plan, bucket, job.id)
            assert found is not None and found[0] == start
            book(self, plan, bucket, job, start, found[1])
        return plan

    def _run(
        self,
        bucket: Bucket,
        order: list[PendingJob],
        pos: int,
        until: SortKey | None,
        cands: list[int] | None = None,
    ) -> int:
        """Place the bucket's jobs from `pos` while they come before `until` in
        scheduling order; return where the bucket continues (len(order) once it is
        settled). `cands`: quick_failure's candidates for the job at `pos`, already
        found (it is not at a limit)."""
        if bucket.single and not bucket.shared and id(bucket) not in self._requesting:
            return self._run_single_hosts(bucket, order, pos, until, cands)
        if cands is None and not order[pos].limit_refs:  # the common case: fails at once
            found = self.evaluator.quick_failure(bucket)
            if isinstance(found, Failure):
                self.evaluations += 1
                return self._settle(bucket, order, pos, found)
            cands = found
        return self._place_each(bucket, order, pos, until, cands, False)

    def _place_each(
        self,
        bucket: Bucket,
        order: list[PendingJob],
        pos: int,
        until: SortKey | None,
        cands: list[int] | None,
        planned: bool,
    ) -> int:
        """Place the bucket's jobs one by one from `pos` (`_run`; `planned`: on the plan,
        `_run_planned`) until one fails or one comes after `until`; where it continues."""
        evaluator = self.evaluator
        failing = self._failing.get(id(bucket)) if planned else None
        while True:
            at = self._next_to_place(bucket, order, pos, until)
            if at < 0:
                pos = ~at
                break
            pos = at
            job = order[pos]
            if failing is not None:
                pos = self._settle(bucket, order, pos, failing)
                continue
            self.evaluations += 1
            evaluator.for_job(job.id)
            if planned:
                outcome = self._evaluate_planned(bucket)
            elif cands is not None:  # the first job, its candidates known
                outcome = evaluator.place_on(bucket, cands)
                cands = None
            else:
                outcome = evaluator.evaluate(bucket)
            if isinstance(outcome, Failure):
                return self._settle(bucket, order, pos, outcome)
            placed, pools = outcome
            self._dispatch(bucket, job, placed, pools)
            pos += 1
        return pos

    def _run_single_hosts(
        self,
        bucket: Bucket,
        order: list[PendingJob],
        pos: int,
        until: SortKey | None,
        known: list[int] | None = None,
    ) -> int:
        """Jobs that each go on one host, placed from a heap of host preference.
        `known`: quick_failure's candidates for the job at `pos`, already found."""
        evaluator, cap = self.evaluator, self.cap
        n, use = bucket.n, bucket.use
        # Limits come first (check 1): jobs at a limit pend for it whatever the hosts.
        at = self._next_to_place(bucket, order, pos, until)
        if at < 0:
            return ~at
        pos = at
        self.evaluations += 1
        cands = known if known is not None else evaluator.quick_failure(bucket)
        if isinstance(cands, Failure):
            return self._settle(bucket, order, pos, cands)
        if n == 1 and not bucket.per_slot and not bucket.gpus:  # every candidate fits (hot)
            fits = cands
        else:
            room = evaluator.room(bucket, cands)
            if room.most < n:
                failure = evaluator.remember(bucket, evaluator.host_failure(bucket, room))
                return self._settle(bucket, order, pos, failure)
            fits = [i for i, u in zip(room.cands, room.usable, strict=True) if u >= n]
        key = evaluator.key_for(bucket)
        # The first job goes on the most preferred host; a heap of preference is built
        # (from the capacity then left) only if another job follows.
        first = None
        if fits is evaluator.everywhere and len(fits) == len(cap.open_free):
            first = key.widest(cap.open_free)
        self._dispatch(bucket, order[pos], {key.best(fits) if first is None else first: n}, {})
        pos += 1
        heap: list[tuple[tuple[float | str, ...], int]] | None = None
        while True:
            at = self._next_to_place(bucket, order, pos, until)
            if at < 0:
                pos = ~at
                break
            job, pos = order[at], at
            if heap is None:
                usable = cap.usable
                heap = [(key(i), i) for i in fits if usable(i, use) >= n]
                heapify(heap)
            if not heap:
                room = evaluator.room(bucket, cands)
                return self._settle(bucket, order, pos, evaluator.host_failure(bucket, room))
            index = heap[0][1]
            self._dispatch(bucket, job, {index: n}, {})
            if cap.usable(index, use) >= n:
                heapreplace(heap, (key(index), index))
            else:
                heappop(heap)
            pos += 1
        return pos

    def _dispatch(
        self,
        bucket: Bucket,
        job: PendingJob,
        hosts: dict[int, int],
        pools: dict[PoolRecord, float],
    ) -> None:
        self.cap.take(hosts, bucket.use, pools, job.limit_refs, whole=bucket.exclusive)
        if self._planning:
            plan = self.plan
            held = self.cap.whole_hosts(hosts) if bucket.exclusive else hosts
            limit = bucket.limit
            if limit != math.inf:
                self.ends_planned = True
            if plan is None:
                self._released.append((held, bucket.use, limit))
            else:
                plan.dispatched(held, bucket.use, limit)
                if plan.bookings or self._unplaced is not None:
                    self.backfilled.append(job.id)
        on = by_name(hosts, self.cap.names)
        self.dispatch.append(
            Dispatch(job=job.id, hosts=on, pools={p.resource: p.name for p in pools})
        )
        self.state.placed[job.id] = (on, hosts, self.state.label_changes)

    def _next_to_place(
        self, bucket: Bucket, order: list[PendingJob], pos: int, until: SortKey | None
    ) -> int:
        """From `pos`, where the bucket's next job to place is, past the jobs that pend
        at a limit (they pend for it whatever the hosts); or, where the pass stops
        instead (the bucket's end, or a job after `until`) at `stop`, `~stop` (< 0).
        (Once per job placed: one call, hot in the real pass.)"""
        end = len(order)
        while pos < end:
            job = order[pos]
            if until is not None and job.key > until:
                return ~pos
            if not job.limit_refs or not self._pends_at_limit(bucket, job):
                return pos
            pos += 1
        return ~pos

    def _pends_at_limit(self, bucket: Bucket, job: PendingJob) -> bool:
        """Whether `job`'s user or queue is at a limit; if so it pends for it."""
        failure = self.evaluator.limit_failure(job, bucket.n)
        if failure is None:
            return False
        self._limit_pend(bucket, job, failure)
        return True

    def _limit_pend(self, bucket: Bucket, job: PendingJob, failure: Failure) -> None:
        """A job whose user or queue is at a limit: it pends, its bucket goes on."""
        group = self._limited.get((id(bucket), failure.reason))
        if group is None:
            group = Settled(bucket, [], failure, self._traced(job, failure))
            self._limited[(id(bucket), failure.reason)] = group
            self.settled.append(group)
        group.members.append(job)

    def _settle(
        self, bucket: Bucket, order: list[PendingJob], pos: int, failure: Failure
    ) -> int:
        """The job at `pos` failed on `failure`: if it failed on capacity and holds
        joined hosts (sched/holds.py), or reservations are left to give, it is given
        its hold or a reservation and the bucket goes on after it (its twins fail now
        too, see _run_planned); else the bucket's jobs from `pos`
        on pend: for a limit if theirs is reached (the first check), else for
        `failure`. Returns where the bucket goes on (len(order): settled)."""
        # A job that holds joined hosts plans on its supply (no reservation of the
        # depth: the next blocked job may have it).
        # (An exclusive job, -x, takes no reservation: the plan counts slots, not
        # whole hosts.)
        if failure.kind == RESOURCE and failure.check in RESERVABLE and not bucket.exclusive and (
            (self.holds is not None and hold(self, bucket, order[pos], failure))
            or (
                len(self.reservations) + self.unnamed + (self._unplaced is not None)
                < self.depth
                and reserve(self, bucket, order[pos], failure)
            )
        ):
            self._failing[id(bucket)] = failure
            return pos + 1
        if self._failing:
            self._failing.pop(id(bucket), None)
        self._pend(bucket, order, pos, failure)
        return len(order)

    def _pend(self, bucket: Bucket, order: list[PendingJob], pos: int, failure: Failure) -> None:
        """The bucket's jobs from `pos` in `order` pend: those at a limit for it (the
        first check), the others for `failure` (also a bucket nothing could ever run,
        sched/ever.py). (Not copied: Settled.)"""
        stop = len(order)
        if self.state.config.limits:
            limited, order = self.evaluator.split_limited(order[pos:], bucket.n)
            for job, limit in limited:
                self._limit_pend(bucket, job, limit)
            pos, stop = 0, -1
        if pos < len(order):
            trace = self._traced(order[pos], failure)
            self.settled.append(Settled(bucket, order, failure, trace, pos, stop))

    def _traced(self, job: PendingJob, failure: Failure, stage: str = "real") -> int:
        """Trace why `job` (and its bucket after it) pends; the entry's index, or -1
        when nothing is traced."""
        trace = self.trace
        if trace is None:
            return -1
        trace.append(TraceEntry(job.id, stage, failure.check, failure.detail))
        return len(trace) - 1


Entry = tuple[SortKey, int, tuple[Bucket, list[PendingJob]], int]  # (InKeyOrder's)


def _taken_up(real: RealPass, fair: bool) -> list[Entry]:
    """The buckets the pass looks at, each from its first job to look at (all of them
    from their first pending job, or as the quiet memo says: sched/quiet.py), as
    entries to merge in scheduling order; those nothing could ever run pend at once."""
    fresh: list[Entry] = []
    ever = universe(real.state)  # (verdicts made when what they read changed)
    quiet = real.quiet
    buckets = real.state.buckets.values() if quiet is None else quiet.buckets(real.state)
    short: list[tuple[int, Bucket, list[PendingJob], int]] = []
    for seq, bucket in enumerate(buckets):
        order, start = bucket.ordered()
        if quiet is not None:
            start = quiet.first_to_look_at(bucket, order, start)
            if start < 0:  # (short of free slots: skipped while the reservation stands)
                short.append((seq, bucket, order, ~start))
                continue
        _take_up(real, fresh, ever, seq, bucket, order, start, fair)
    if short and quiet is not None and not quiet.stands([entry[0] for entry in fresh]):
        for seq, bucket, order, start in short:
            _take_up(real, fresh, ever, seq, bucket, order, start, fair)
    return fresh


def _take_up(
    real: RealPass, fresh: list[Entry], ever: Universe, seq: int, bucket: Bucket,
    order: list[PendingJob], start: int, fair: bool,
) -> None:
    """Look at the bucket's jobs from `start` (none where it is len(order)): they pend
    at once if nothing could ever run them, else they join `fresh`."""
    if start < len(order):
        never = ever.never(real.state, bucket)
        if never is not None:  # nothing could ever run them: they pend for it
            real._pend(bucket, order, start, never)
            return
        fresh.append((_key_at(bucket, order, start, fair), seq, (bucket, order), start))


def _lean_uncounted(real: RealPass, bucket: Bucket) -> Placement | Failure | None:
    """_lean_placement where the candidates are every open host with a free slot, one
    slot each: decided on their number, without their list (hot in EASY simulations
    of big machines: RICC-2010-2, where most jobs behind the reservation fail). None:
    they are not so, or the usual evaluation decides (as for a job with hosts
    requested for it: asked once, there)."""
    if real.evaluator.requested:
        return None
    free = real.evaluator.known_or_counted(bucket)
    if isinstance(free, Failure):
        return free
    return None if free < 0 else _lean_placement(real, bucket, free, None)


def _lean_placement(
    real: RealPass, bucket: Bucket, free: int, cands: list[int] | None
) -> Placement | Failure | None:
    """Where a slots-only job goes now behind reservations, in a session without pend
    reasons (hot in EASY simulations): a failure when the `free` slots of its
    candidates, less what reservations hold back of them within its window, do not
    add up (known before placing it: most jobs behind a reservation fail so); else
    its placement on what the one booking leaves (sched/plan.py `unclaimed`;
    `cands`: None where they are every open host with a free slot, one slot each,
    not listed). None: the usual evaluation decides (no claims known,
    or hosts requested for the job, which it takes first among equals)."""
    plan = real.ensure_plan()
    short = bucket.n - (free - plan.held_slots(bucket))
    if short > 0:
        real.evaluator.shorts[bucket] = short
        return Failure(RESOURCE, "reservation", "Would delay a reservation")
    placed = None if real.evaluator.requested else plan.unclaimed(bucket, cands)
    return None if placed is None else (placed, {})
