"""The plan (ARCHITECTURE.md section 2a): when and where blocked jobs will start.

A session's profile of free capacity over time, per host: free now (the session's
capacity, this session's dispatches taken), rising when a running job reaches its
planned end (start + run limit, one second from now when past it) or a job dispatched
this session reaches its limit, falling while a reservation holds it. Only hosts with
a reservation get a profile of their own (`HostProfile`); elsewhere capacity only
rises over time, so what is free now stays free over any window.

Two questions are asked of it:
* `holdback`: how much of each reserved host's free capacity a job must leave alone
  to start now without delaying a reservation (what dips below the free capacity
  within the job's window);
* `earliest_start` (sched/earliest.py): the earliest start, now or a later change
  point, at which a blocked job fits over its whole window, and the hosts the usual
  placement picks there.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable
from typing import Any, cast

from xce.model.result import Reservation
from xce.sched.buckets import Bucket
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.eligibility import Eligible
from xce.sched.hosts import by_label, by_name
from xce.sched.placement import default_ranked, spread
from xce.sched.state import SchedulerState
from xce.sched.usage import Use, host_use

# (time, change in free slots, change in each consumable in Plan.res order)
Step = tuple[float, int, tuple[float, ...]]
# (host, slots held back, each consumable held back)
Held = tuple[int, int, tuple[float, ...]]


class Booking:
    """A reservation booked in the profile, as a held-back job names it (its hosts and
    times are in the profile's steps)."""

    __slots__ = ("hosts", "job", "seq", "start")

    def __init__(self, seq: int, job: int, start: float, hosts: dict[int, int]) -> None:
        self.seq = seq  # bookings are made in scheduling order
        self.job = job
        self.start = start
        self.hosts = hosts


class HostProfile:
    """One reserved host's changes of free capacity after now, in time order."""

    __slots__ = ("_dips", "_times", "steps")

    def __init__(self, steps: list[Step]) -> None:
        steps.sort()
        self.steps = steps
        # Made when first asked (see dip): the distinct step times, and after each
        # the least change from now so far (slots, then each consumable), <= 0.
        self._times: list[float] | None = None
        self._dips: list[tuple[int, tuple[float, ...]]] = []

    def add(self, step: Step) -> None:
        insort(self.steps, step)
        self._times = None

    def dip(self, stop: float) -> tuple[int, tuple[float, ...]]:
        """How far free capacity falls below what is free now within [now, stop) (the
        least cumulative change, never above 0): a bisection into the dips, made
        once (hot: every job behind a reservation asks it of each reserved host)."""
        times = self._times
        if times is None:
            times = self._times = []
            dips = self._dips = []
            width = len(self.steps[0][2]) if self.steps else 0
            slots, res = 0, [0.0] * width
            low, low_res = 0, (0.0,) * width  # the dip so far
            before = (low, low_res)
            for time, delta, deltas in self.steps:
                if not times or times[-1] != time:  # a new time: its changes go together
                    before = (low, low_res)
                    times.append(time)
                    dips.append(before)
                slots += delta
                for k in range(width):
                    res[k] += deltas[k]
                low = min(before[0], slots)
                if width:
                    low_res = tuple([min(before[1][k], res[k]) for k in range(width)])
                dips[-1] = (low, low_res)
        at = bisect_left(times, stop)
        if at == 0:
            return 0, ()
        return self._dips[at - 1]

    def lowest(
        self, free: int, free_res: tuple[float, ...], start: float, stop: float
    ) -> tuple[int, list[float]]:
        """The least free capacity over [start, stop), from `free` now (the changes of
        one time are applied together before it is measured)."""
        steps = self.steps
        slots, res = free, list(free_res)
        at, count = 0, len(steps)
        while at < count and steps[at][0] <= start:
            slots += steps[at][1]
            for k, amount in enumerate(steps[at][2]):
                res[k] += amount
            at += 1
        low_slots, low_res = slots, list(res)
        while at < count and steps[at][0] < stop:
            time = steps[at][0]
            while at < count and steps[at][0] == time:
                slots += steps[at][1]
                for k, amount in enumerate(steps[at][2]):
                    res[k] += amount
                at += 1
            if slots < low_slots:
                low_slots = slots
            for k, amount in enumerate(res):
                if amount < low_res[k]:
                    low_res[k] = amount
        return low_slots, low_res

    def lowest_slots(self, free: int, start: float, stop: float) -> int:
        """`lowest`'s free slots alone (hot in sched/holds_wide.py, which asks it of
        every host a wide job may use: no consumables carried)."""
        steps = self.steps
        slots = free
        at, count = 0, len(steps)
        while at < count and steps[at][0] <= start:
            slots += steps[at][1]
            at += 1
        low = slots
        while at < count and steps[at][0] < stop:
            time = steps[at][0]
            while at < count and steps[at][0] == time:
                slots += steps[at][1]
                at += 1
            if slots < low:
                low = slots
        return low


class Plan:
    """The profile of one session and the reservations booked in it."""

    def __init__(self, state: SchedulerState, cap: Capacity, now: float) -> None:
        self.state = state
        self.cap = cap
        self.now = now
        self.res = tuple(cap.free_res)  # the consumables, in a fixed order
        self._booked: dict[int, list[Booking]] = {}  # reserved hosts and their bookings
        self._unbooked: Booking | None = None  # ... but this one's hosts (`booked`)
        self.profiles: dict[int, HostProfile] = {}  # of reserved hosts, made when asked
        # This session's changes besides running jobs' ends: dispatched jobs reaching
        # their limit (+), reservations starting (-) and ending (+):
        # (time, seq, sign, hosts, what the job takes of them: sched/usage.py)
        self.changes: list[tuple[float, int, int, dict[int, int], Use]]
        self.changes = []
        self.bookings: list[Booking] = []
        self.of_job: dict[int, Booking] = {}  # the bookings by job
        self._seq = 0
        self._scratch: Capacity | None = None  # the capacity searches place on
        # The last search's start, hosts, slots freed by then, and where known (-1:
        # not; one-slot hosts) how many of its hosts are free now and where in label
        # order the free hosts it leaves begin (earliest._first_hosts), for `book`.
        self._found: tuple[float, dict[int, int], dict[int, int], int, int] | None = None
        # The last search without placing (`earliest_start(place=False)`): its bucket,
        # start, slots and consumables freed by then, and the capacity's version and
        # number of changes then. Placing the same job on the same plan starts from it.
        self._fit: tuple[Bucket, float, dict[int, int], dict[int, list[float]], int, int] | None
        self._fit = None
        # With one booking, on slots alone, made from its search: on each of its
        # hosts, the slots it needs beyond what frees there by its start, which is
        # what it holds back of the free slots (a profile of such a host dips by
        # that at the start, nowhere else). Read instead of profiles by holdback and
        # undisturbed (hot in EASY simulations). Only hosts with a slot free now
        # can have a claim above 0 (it fits by then: what it needs of a full host
        # frees by then): the others are left out, as claiming nothing.
        self._claims: dict[int, int] | None = None
        self._shared_claims = False  # (they are the booking's hosts: `_claim`)
        # With those claims, on one-slot hosts: where in label order the free hosts
        # that the booking leaves begin (before it, every free host is claimed: it
        # took the first by name), -1 if not known. The capacity only falls, so it
        # holds all session (sched/quiet.py carries it to the next one).
        self.past = -1
        self.before = 0  # free eligible slots before the last search's start (quiet.py)
        # held_slots' last count: for whose hosts, at which capacity version and
        # number of changes, and the count; and, counted as the claims are made, for
        # jobs that may use every open host (the count -1: not made yet).
        self._held: tuple[object, int, int, int] | None = None
        self._held_all: tuple[int, int, int] | None = None

    # ------------------------------------------------------------------ updates
    def _deltas(self, use: Use, slots: int) -> tuple[float, ...]:
        """The change of each consumable (Plan.res order) when a job of `use` takes
        `slots` slots of a host (negative: gives them back)."""
        if not self.res:
            return ()
        per_slot, gpus = use
        if not gpus:  # (host_use without GPUs, inlined)
            per = dict(per_slot)
            return tuple(per.get(res, 0.0) * slots for res in self.res)
        amounts = dict(host_use(use, slots))
        return tuple(amounts.get(res, 0.0) for res in self.res)

    def _change(self, time: float, sign: int, hosts: dict[int, int], use: Use) -> None:
        self._seq += 1
        insort(self.changes, (time, self._seq, sign, hosts, use))
        claims = self._claims
        if claims is not None and time <= self.bookings[0].start:  # (a dispatch's end)
            for index, freed in hosts.items():
                if index in claims:
                    if self._shared_claims:  # (the booking's hosts: copied first)
                        claims = self._claims = dict(claims)
                        self._shared_claims = False
                    claims[index] -= freed
        profiles = self.profiles
        # (the smaller side: a wide reservation, or many profiles)
        for index in hosts if len(hosts) < len(profiles) else list(profiles):
            slots = hosts.get(index)
            profile = profiles.get(index)
            if slots is not None and profile is not None:
                if sign < 0:  # (not `sign * slots`: slow compiled, sched/running.py)
                    slots = -slots
                profile.add((time, slots, self._deltas(use, slots)))

    def dispatched(self, hosts: dict[int, int], use: Use, limit: float) -> None:
        """A job dispatched this session holds `hosts` from now for its limit (the
        capacity has just been taken for it)."""
        memo, claims, made = self._held, self._claims, self._held_all
        version, changes = self.cap.version - 1, len(self.changes)  # (before the take)
        # held_slots' count stays right when this take was the only change since and
        # it touched no host with a claim: those count nothing, before and after
        # (claims only fall). Hot in EASY simulations of big machines (RICC-2010-2).
        # On one-slot hosts the count of every open host's claimed free hosts falls
        # by the claimed hosts it took (sched/quiet.py carries it to the next session).
        taken, kept = -1, False
        if claims is not None:
            if (
                made is not None and made[0] == version and made[1] == changes
                and made[2] >= 0 and self.cap.widest <= 1
            ):
                taken = len([index for index in hosts if claims.get(index, 0) > 0])
                untouched = not taken
            else:
                untouched = all([claims.get(index, 0) <= 0 for index in hosts])
            kept = memo is not None and memo[1] == version and memo[2] == changes and untouched
        if limit != math.inf:
            self._change(self.now + limit, +1, hosts, use)
        if taken >= 0:
            assert made is not None
            self._held_all = (self.cap.version, len(self.changes), made[2] - taken)
        if kept:
            assert memo is not None
            self._held = (memo[0], self.cap.version, len(self.changes), memo[3])

    def book(
        self, job: int, start: float, limit: float, hosts: dict[int, int], use: Use
    ) -> Reservation:
        """Book a reservation from `start` for `limit` seconds on `hosts`; the
        reservation, its hosts by name."""
        self.reserve(job, start, limit, hosts, use)
        on = by_name(hosts, self.cap.names)
        return Reservation(job=job, start=start, hosts=on, end=start + limit)

    def reserve(
        self, job: int, start: float, limit: float, hosts: dict[int, int], use: Use
    ) -> None:
        """Book a reservation from `start` for `limit` seconds on `hosts`, for a
        caller that names no hosts (`book` does)."""
        end = start + limit
        searched, self._found = self._found, None
        first = not self.bookings
        self._claims = None
        self.past = -1
        booking = Booking(len(self.bookings), job, start, hosts)
        self.bookings.append(booking)
        self.of_job[job] = booking
        self._change(start, -1, hosts, use)
        if end != math.inf:
            self._change(end, +1, hosts, use)
        if first and searched is not None and searched[1] is hosts and not self.res:
            held = self._claim(hosts, searched[2], searched[3], searched[4])
            self._held_all = (self.cap.version, len(self.changes), held)
            self._unbooked = booking  # (its claims answer for it until a second one)
            return
        booked = self.booked
        for index in hosts:
            found = booked.get(index)
            if found is None:
                booked[index] = [booking]
            else:
                found.append(booking)

    def _claim(
        self, hosts: dict[int, int], gain: dict[int, int], free_now: int, past: int
    ) -> int:
        """Make the one booking's claims: on each of its `hosts`, the slots it takes
        beyond those freed by its start (`gain`); only those of hosts free now ever
        count (the capacity only falls within a session). Returns the free slots they
        hold back where every open host is usable (what holdback finds).

        `free_now`: how many of its hosts are free now, where known (-1: not), on
        one-slot hosts where none of those gains a slot; `past`: where in label order
        the free hosts it leaves begin, where known (`Plan.past`; both found by
        `earliest._first_hosts` or kept by sched/quiet.py)."""
        free = self.cap.open_free
        if self.cap.widest <= 1 and (free_now >= 0 or gain.keys().isdisjoint(free)):
            # One-slot hosts: each free reserved host is claimed whole. Only hosts
            # free now are ever asked about (the capacity only falls), so the
            # claims can be its hosts, shared until a dispatch's end changes them
            # (`_change`); where not known, the count is made when asked (held_slots).
            # Hot in EASY simulations of big machines (RICC-2010-2: thousands of hosts).
            self._claims = hosts
            self._shared_claims = True
            self.past = past
            return free_now
        free_slots = self.cap.free_slots
        claims = self._claims = {}
        self._shared_claims = False
        held = 0
        for index in free if len(free) < len(hosts) else hosts:
            if index in free and index in hosts:
                claim = hosts[index] - gain.get(index, 0)
                if claim > 0:
                    claims[index] = claim
                    held += min(free_slots[index], claim)
        return held

    @property
    def booked(self) -> dict[int, list[Booking]]:
        """The reserved hosts and their bookings, in scheduling order. (The first
        booking's hosts are entered only when asked: with claims, a session in an
        EASY simulation never asks, and the hosts may be thousands.)"""
        booking = self._unbooked
        if booking is not None:
            self._unbooked = None
            for index in booking.hosts:
                self._booked[index] = [booking]
        return self._booked

    def waits_for(self, hosts: dict[int, int], start: float) -> list[tuple[int, float, str]]:
        """The running jobs on `hosts` planned to end by `start`: (job, planned end,
        host), by end (what a reservation waits for, for the decision trace)."""
        found: list[tuple[int, float, str]] = []
        running, names = self.state.running, self.cap.names
        for index in hosts:
            host = self.state.hosts[index]
            if host is None:
                continue
            for job in host.running:
                end = self.planned(running[job].end)
                if end <= start:
                    found.append((job, end, names[index]))
        found.sort(key=lambda item: (item[1], item[0]))
        return found

    def _profile(self, index: int) -> HostProfile:
        """A reserved host's profile (made on first use, then kept up to date)."""
        profile = self.profiles.get(index)
        if profile is None:
            profile = self.profiles[index] = HostProfile(self._steps_of(index))
        return profile

    def _steps_of(self, index: int) -> list[Step]:
        """A host's changes after now: its running jobs' planned ends and this
        session's changes on it so far."""
        steps = _ends_on(self, index)
        for time, _seq, sign, hosts, use in self.changes:
            placed = hosts.get(index)
            if placed is not None:
                if sign < 0:  # (not `sign * placed`: slow compiled, sched/running.py)
                    placed = -placed
                steps.append((time, placed, self._deltas(use, placed)))
        return steps

    def planned(self, end: float) -> float:
        """A running job's planned end: one second from now when past it."""
        return end if end > self.now else self.now + 1.0

    # ------------------------------------------------------------------ questions
    def holdback(self, bucket: Bucket) -> list[Held]:
        """What a job of `bucket` must leave free on reserved hosts to start now: on
        each reserved host with free capacity, how far its profile dips below the free
        capacity within [now, now + the bucket's window)."""
        cap, now = self.cap, self.now
        stop = now + bucket.window
        free_slots, columns = cap.free_slots, [cap.free_res[r] for r in self.res]
        elig = bucket.eligible
        assert isinstance(elig, Eligible)
        usable, open_free = elig.open, cap.open_free
        held: list[Held] = []
        claims = self._claims
        if claims is not None:
            if stop <= self.bookings[0].start:
                return held
            for index in open_free if len(open_free) < len(claims) else list(claims):
                free = free_slots[index]
                if free <= 0 or index not in usable or index not in claims:
                    continue
                slots = min(free, claims[index])
                if slots > 0:
                    held.append((index, slots, ()))
            return held
        booked = self.booked
        # (the smaller of the reserved hosts and the open hosts with a free slot)
        for index in open_free if len(open_free) < len(booked) else list(booked):
            free = free_slots[index]
            if free <= 0 or index not in usable or index not in booked:
                continue
            dip, dip_res = self._profile(index).dip(stop)
            slots = min(free, -dip)
            if not dip_res:
                if slots > 0:
                    held.append((index, slots, (0.0,) * len(columns)))
                continue
            res = tuple([min(columns[k][index], -dip_res[k]) for k in range(len(columns))])
            if slots > 0 or any(amount > EPSILON for amount in res):
                held.append((index, max(0, slots), res))
        return held

    def held_slots(self, bucket: Bucket) -> int:
        """The free slots that a job of `bucket` must leave alone to start now (what
        holdback finds, summed). With one booking on slots alone, counted once per
        eligible hosts and change of the capacity or the plan (hot in EASY
        simulations: every job behind the reservation asks, and few start)."""
        if self._claims is None:
            return sum([slots for _index, slots, _res in self.holdback(bucket)])
        if self.now + bucket.window <= self.bookings[0].start:
            return 0  # (it ends before the reservation starts: nothing held back)
        elig = bucket.eligible
        version, changes = self.cap.version, len(self.changes)
        memo = self._held
        if memo is not None and memo[0] is elig and memo[1] == version and memo[2] == changes:
            return memo[3]
        made = self._held_all
        assert isinstance(elig, Eligible)
        if made is not None and made[0] == version and made[1] == changes and not elig.others:
            total = made[2]  # (hot in EASY simulations of big machines: RICC-2010-2)
            if total < 0:  # (claims copied from the hosts: the free ones counted now)
                total = len(self.bookings[0].hosts.keys() & self.cap.open_free)
                self._held_all = (version, changes, total)
        else:
            total = sum([slots for _index, slots, _res in self.holdback(bucket)])
        self._held = (elig, version, changes, total)
        return total

    def free_claimed(self) -> int:
        """How many of the one booking's hosts are free now, where counted on
        one-slot hosts (-1: not counted; sched/quiet.py)."""
        made = self._held_all
        if (
            made is None or self._claims is None or self.cap.widest > 1
            or made[0] != self.cap.version or made[1] != len(self.changes)
        ):
            return -1
        return made[2]

    def unclaimed(self, bucket: Bucket, cands: list[int] | None) -> dict[int, int] | None:
        """Where a job of a slots-only bucket (Bucket.slots_only) goes now on its
        candidates, less what the one booking claims of them within its window: the
        default placement on that capacity (what placing it with `holdback` held back
        finds, in one pass). None: no claims are known (the caller holds back), or
        the slots do not add up. `cands` may be None where they are every open host
        with a free slot, one slot each (not listed). (Hot in EASY simulations of
        big machines.)"""
        claims = self._claims
        if claims is None:
            return None
        if self.now + bucket.window <= self.bookings[0].start:
            claims = {}  # (it ends before the reservation starts: nothing held back)
        cap, elig = self.cap, bucket.eligible
        assert isinstance(elig, Eligible)
        if (
            cap.widest <= 1 and not elig.others and not elig.exclusive
            and len(cap.hosts) == len(self.state.hosts)  # (no virtual host: all labelled)
        ):
            past = self.past if claims else 0
            return _first_unclaimed(cap, claims, bucket.n, past, self.state.indexed_labels)
        assert cands is not None
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = Capacity(self.state)
        free, target = self.cap.free_slots, scratch.free_slots
        kept: list[int] = []
        for index in cands:
            left = free[index] - max(0, claims.get(index, 0))
            if left > 0:
                target[index] = left
                kept.append(index)
        ranked = default_ranked(kept, target, self.cap.labels, self.cap.label_order)
        return spread(ranked, target.__getitem__, bucket.n)

    def undisturbed(self, bucket: Bucket, placed: dict[int, int]) -> bool:
        """Whether a placement found on the free capacity is the one found without
        what reservations hold: none of its hosts is held back within the job's
        window, and the job's host preference ranks a host with less free capacity
        no earlier (no `order[-r]` on slots or a consumable), so holding back other
        hosts cannot change which hosts come first."""
        if not self._demotes_only(bucket):
            return False
        stop = self.now + bucket.window
        claims = self._claims
        if claims is not None:
            if stop <= self.bookings[0].start:
                return True
            return all(claims.get(index, 0) <= 0 for index in placed)
        booked = self.booked
        for index in placed:
            if index in booked:
                dip, dip_res = self._profile(index).dip(stop)
                if dip < 0 or any(least < -EPSILON for least in dip_res):
                    return False
        return True

    def _demotes_only(self, bucket: Bucket) -> bool:
        dynamic = self.cap.free_res
        return all(
            key.descending or (key.name != "slots" and key.name not in dynamic)
            for key in bucket.req.order
        )

    def delaying(self, held: list[Held], bucket: Bucket) -> Booking:
        """The first reservation (in scheduling order) that holds capacity a job of
        `bucket` would need now."""
        stop = self.now + bucket.window
        found: Booking | None = None
        for index, _slots, _res in held:
            for booking in self.booked[index]:
                if booking.start < stop and (found is None or booking.seq < found.seq):
                    found = booking
        assert found is not None
        return found


def profiles_of(plan: Plan, indices: Iterable[int]) -> list[tuple[int, HostProfile]]:
    """The profiles of hosts `indices`: a reserved host's own, else made for the asking
    (not kept: kept profiles are kept up to date at every change), with the steps
    `Plan._steps_of` finds, gathered in one walk of this session's changes rather
    than one per host (hot in elastic simulations whose template's max is less than
    a wide job's hosts: sched/holds_wide.py asks for every host it may use, in each
    session, for each such job; SDSC-SP2 at `--elastic 0.5`, bench/RESULTS.md)."""
    kept = plan.profiles
    made = {index: _ends_on(plan, index) for index in indices if index not in kept}
    if made:
        for time, _seq, sign, placed, use in plan.changes:
            for index, slots in placed.items():
                to = made.get(index)
                if to is not None:
                    if sign < 0:  # (not `sign * slots`: slow compiled, sched/running.py)
                        slots = -slots
                    to.append((time, slots, plan._deltas(use, slots)))
    return [
        (index, kept[index] if index in kept else HostProfile(made[index]))
        for index in indices
    ]


def _ends_on(plan: Plan, index: int) -> list[Step]:
    """Host `index`'s changes from its running jobs' planned ends (`Plan._steps_of`
    adds this session's changes)."""
    host = plan.state.hosts[index]
    steps: list[Step] = []
    if host is not None:
        running = plan.state.running
        for job, slots in host.running.items():  # (slots held: -x holds all)
            run = running[job]
            if run.end != math.inf:
                deltas = plan._deltas(run.use, run.hosts[index])
                steps.append((plan.planned(run.end), slots, deltas))
    return steps


def _first_unclaimed(
    cap: Capacity, claims: dict[int, int], n: int, past: int, indexed: bool
) -> dict[int, int] | None:
    """What `Plan.unclaimed` finds on one-slot hosts where every host is eligible: the
    first `n` hosts by name free now that `claims` leave free (each has one slot, so
    the default order is the label order), found by walking the label order rather
    than by ranking every candidate; from `past` where known (`Plan.past`: the
    claimed hosts come first), from its start otherwise. Where few hosts are free,
    those sorted by name, from `past` too; where hosts are numbered in label order
    (`indexed`: state.indexed_labels), the smallest indices past it, which no claim
    comes after. (Hot in EASY simulations of big machines: RICC-2010-2,
    bench/RESULTS.md.)"""
    open_free, order = cap.open_free, cap.label_order
    start = max(past, 0)
    if len(open_free) * 8 < len(order) - start:  # (few: those sorted by name)
        free: Iterable[int] = open_free
        if past > 0:  # (those past it: by index where hosts are numbered in label order)
            last = order[past - 1]
            if indexed:  # (past every claim: the smallest indices)
                return _smallest([index for index in open_free if index > last], n)
            labels = cap.labels
            bound = labels[last]
            free = [index for index in open_free if labels[index] > bound]
        order, start = by_label(free, cap.labels, indexed), 0
    chosen: list[Any] = []
    # (Taken as objects: see earliest._first_hosts; from `start`, not a copy.)
    walk = cast("list[Any]", order)
    for at in range(start, len(walk)):
        index = walk[at]
        if index in open_free and claims.get(index, 0) <= 0:
            chosen.append(index)
            if len(chosen) == n:
                return dict.fromkeys(chosen, 1)
    return None


def _smallest(indices: list[int], n: int) -> dict[int, int] | None:
    """The `n` smallest `indices`, one slot each; None if there are fewer (a job of
    one host, the most common behind a reservation, takes the least: no sort)."""
    if len(indices) < n:
        return None
    if n == 1:
        return {min(indices): 1}
    indices.sort()
    return dict.fromkeys(indices[:n], 1)
