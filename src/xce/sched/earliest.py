"""The plan's second question (sched/plan.py): the earliest start at which a blocked
job fits over its whole window on the profile, and the hosts the usual placement picks
there."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any, cast

from xce.sched.buckets import Bucket
from xce.sched.capacity import Capacity
from xce.sched.eligibility import Eligible
from xce.sched.hosts import by_label
from xce.sched.placement import HostOrder, Room, default_ranked, place, spread
from xce.sched.requested import spared_by_later_starts, takes_spared
from xce.sched.running import RunningJob, end_of
from xce.sched.usage import Use

if TYPE_CHECKING:
    from xce.sched.plan import Plan


def earliest_start(
    plan: Plan, bucket: Bucket, job_id: int, until: float = math.inf, place: bool = True
) -> tuple[float, dict[int, int]] | None:
    """The earliest start after now, and no later than `until`, at which job `job_id`
    of `bucket` fits over its window on the profile, and its hosts; None if there is
    none. `place=False`, for a plain bucket (slots alone) on a plan without
    bookings, where free slots that add up always place: the start, no hosts.

    Change points are swept in time order, summing the eligible hosts' free slots:
    a point is tried (a placement on what stays free over the window) only where
    that sum, and for a job on one host a host whose capacity just rose, leave room
    for it. (Hot in EASY simulations: one sweep a session, written out.)"""
    elig = bucket.eligible
    assert isinstance(elig, Eligible)
    if not (hosts := elig.open):
        return None
    if place and until == math.inf:
        fit = _fit_again(plan, bucket, hosts, job_id)
        if fit is not None:  # (found to fit, nothing changed since: placed there)
            return fit
    free_slots = plan.cap.free_slots
    width = len(plan.res)
    gain: dict[int, int] = {}  # host -> slots freed by the time swept to
    gain_res: dict[int, list[float]] = {}  # ... and consumables (when there are any)
    total = _free_slots_now(plan, hosts)  # free slots of the eligible hosts by then
    single, n = bucket.single, bucket.n
    now, soon = plan.now, plan.now + 1.0
    ends, changes = _by_planned_end(plan.state.ends, now, soon), plan.changes
    at_end, at_change = 0, 0
    count_ends, count_changes = len(ends), len(changes)
    # (see _end_gain: 2 where every host is eligible and open)
    one_slot = 0 if plan.cap.widest > 1 or width else 1 + (len(hosts) == len(plan.state.hosts))
    while at_end < count_ends or at_change < count_changes:
        # (running jobs' ends come sorted by planned end)
        time = math.inf
        if at_end < count_ends:
            end = ends[at_end][0]
            time = end if end > now else soon
        if at_change < count_changes and changes[at_change][0] < time:
            time = changes[at_change][0]
        if time > until:
            return None
        before, rose = total, False  # (free slots just before `time`: sched/quiet.py)
        while at_end < count_ends:
            end = ends[at_end][0]
            if (end if end > now else soon) != time:
                break
            added, room = _end_gain(plan, ends[at_end][2], hosts, gain, gain_res, one_slot, n)
            at_end += 1
            total += added
            rose = rose or room
        while at_change < count_changes and changes[at_change][0] == time:
            _t, _seq, sign, placed, use = changes[at_change]
            at_change += 1
            for index, slots in placed.items():
                if index in hosts:
                    if sign < 0:  # (not `sign * slots`: slow compiled, see running.py)
                        slots = -slots
                    total += slots
                    have = gain.get(index, 0) + slots
                    gain[index] = have
                    if sign > 0 and free_slots[index] + have >= n:
                        rose = True
                    if width:
                        _gain_res(plan, gain_res, index, use, slots)
        if total < n or (single and not rose):
            continue
        plan.before = before
        if not place:
            assert bucket.plain and not plan.bookings
            plan._fit = (bucket, time, gain, gain_res, plan.cap.version, len(plan.changes))
            return time, {}
        found = _place_at(plan, bucket, hosts, gain, gain_res, time, job_id)
        if found is not None:
            plan._found = (time, found[0], gain, found[1], found[2])
            return time, found[0]
    return None


def _by_planned_end(
    ends: list[tuple[float, int, RunningJob]], now: float, soon: float
) -> list[tuple[float, int, RunningJob]]:
    """Running jobs' ends (sorted by end) in order of planned end: as they come,
    unless a job past its limit (planned to end one second from now, `soon`) comes
    before one planned to end sooner than that (limits not in whole seconds): those
    first."""
    if not ends or ends[0][0] > now:
        return ends
    past = bisect_right(ends, now, key=end_of)  # (past their limit: planned at `soon`)
    if past == len(ends) or ends[past][0] >= soon:
        return ends
    early = bisect_left(ends, soon, lo=past, key=end_of)
    return ends[past:early] + ends[:past] + ends[early:]


def _end_gain(
    plan: Plan, run: RunningJob, hosts: set[int], gain: dict[int, int],
    gain_res: dict[int, list[float]], one_slot: int, n: int,
) -> tuple[int, bool]:
    """The free slots a running job's end adds to the eligible `hosts`, noted per
    host in `gain` (and `gain_res`), and whether one of them then has room for `n`.

    `one_slot` (1, or 2 where `hosts` are all the hosts): every host has one slot
    and no consumable counts. A job's end then frees one slot on each host it holds,
    and none of those is in the gain yet (no other job holds it, and nothing is
    placed on it before that end: the plan's changes are this session's dispatches,
    on hosts free now, and reservations, from the end on). So where it holds only
    eligible hosts, they join the gain at once, in C. (Hot in EASY simulations of
    many one-slot hosts: RICC-2010-2, bench/RESULTS.md; so is the check that it
    holds only eligible hosts, not made where all are.)"""
    held = run.held
    if one_slot == 2 or (one_slot and hosts.issuperset(held)):
        gain.update(held)
        return len(held), n <= 1 and bool(held)
    free_slots, width = plan.cap.free_slots, len(plan.res)
    added, room = 0, False
    for index, slots in held.items():
        if index in hosts:
            added += slots
            have = gain.get(index, 0) + slots
            gain[index] = have
            if free_slots[index] + have >= n:
                room = True
            if width:
                _gain_res(plan, gain_res, index, run.use, run.hosts[index])
    return added, room


def _fit_again(
    plan: Plan, bucket: Bucket, hosts: set[int], job_id: int
) -> tuple[float, dict[int, int]] | None:
    """Where `earliest_start` puts a job of `bucket` that it found to fit (without placing)
    when nothing has changed since: the start found then, and the hosts placed
    there; None if there is no such fit."""
    fit = plan._fit
    if (
        fit is None or fit[0] is not bucket
        or fit[4] != plan.cap.version or fit[5] != len(plan.changes)
    ):
        return None
    placed = _place_at(plan, bucket, hosts, fit[2], fit[3], fit[1], job_id)
    assert placed is not None
    plan._found = (fit[1], placed[0], fit[2], placed[1], placed[2])
    return fit[1], placed[0]


def _free_slots_now(plan: Plan, hosts: set[int]) -> int:
    """The free slots of `hosts` now (of those open with a free slot)."""
    cap = plan.cap
    free_slots, open_free = cap.free_slots, cap.open_free
    if cap.widest <= 1 and len(cap.hosts) == len(plan.state.hosts):
        return len(open_free & hosts)  # (one slot each, none virtual; RICC-2010-2)
    total = 0
    for index in open_free if len(open_free) < len(hosts) else hosts:
        if index in hosts:
            total += free_slots[index]
    return total


def _gain_res(
    plan: Plan, gain_res: dict[int, list[float]], index: int, use: Use, slots: int
) -> None:
    have = gain_res.get(index)
    if have is None:
        have = gain_res[index] = [0.0] * len(plan.res)
    for k, amount in enumerate(plan._deltas(use, slots)):
        have[k] += amount


def _place_at(
    plan: Plan, bucket: Bucket, hosts: set[int], gain: dict[int, int],
    gain_res: dict[int, list[float]], time: float, job_id: int,
) -> tuple[dict[int, int], int, int] | None:
    """Where job `job_id` of `bucket` goes if it starts at `time` (`_placement_at`).
    A start later than now leaves alone the hosts requested for other jobs and the
    provisioned hosts idle now where it fits without them (`spared_by_later_starts`;
    docs/scheduling.md section 6, "Reservations spare supply"). The usual placement
    comes first: where it takes none of them, it is the one found without them (the
    placements take the best-ranked hosts, so leaving out hosts they do not take
    changes nothing), and the spared hosts are not gathered at all (elastic runs)."""
    found = _placement_at(plan, bucket, hosts, gain, gain_res, time)
    state = plan.state
    if (
        found is None or time <= plan.now
        or not (state.requested_for or state.idle_provisioned)
        or not takes_spared(state, job_id, found[0])
    ):
        return found
    spared = spared_by_later_starts(state, job_id)
    return _placement_at(plan, bucket, hosts - spared, gain, gain_res, time) or found


def _placement_at(
    plan: Plan, bucket: Bucket, hosts: set[int], gain: dict[int, int],
    gain_res: dict[int, list[float]], time: float,
) -> tuple[dict[int, int], int, int] | None:
    """The usual placement of a job of `bucket` on the capacity of `hosts` that stays
    free over [time, time + its window), and where `_first_hosts` found it, how many
    of its hosts are free now and where in label order the free hosts it leaves begin
    (-1: not known)."""
    cap = plan.cap
    booked = plan.booked
    if (
        bucket.plain and not booked and plan.state.widest <= 1
        and len(cap.hosts) == len(plan.state.hosts)  # (no virtual host: all labelled)
    ):
        return _first_hosts(plan, hosts, gain, bucket.n)
    scratch = plan._scratch
    if scratch is None:
        scratch = plan._scratch = Capacity(plan.state)
    stop = time + bucket.window
    columns = [(cap.free_res[res], scratch.free_res[res]) for res in plan.res]
    cands: list[int] = []
    # Only hosts free now or changed by then can have room then (the others stay
    # full; a reserved host's bookings only take room, and those before then are in
    # the gain): hot in simulations, where most hosts are busy, and in elastic ones
    # where wide jobs' holds book many (sched/holds_wide.py).
    maybe = cap.open_free | gain.keys()
    if len(maybe) > len(hosts):
        maybe = hosts
    free_slots, target_slots = cap.free_slots, scratch.free_slots
    for index in maybe:
        if index not in hosts:
            continue
        slots = free_slots[index]
        low_res: list[float] = []
        if index in booked:
            if columns:
                free_res = tuple(column[index] for column, _s in columns)
                low, low_res = plan._profile(index).lowest(slots, free_res, time, stop)
            else:  # (slots alone: hot where wide jobs' holds book many hosts, sched/holds_wide.py)
                low = plan._profile(index).lowest_slots(slots, time, stop)
        else:
            low = slots + gain.get(index, 0)
            if columns:
                more = gain_res.get(index)
                low_res = [
                    column[index] + (more[k] if more is not None else 0.0)
                    for k, (column, _s) in enumerate(columns)
                ]
        if low <= 0:
            continue
        target_slots[index] = low
        if columns:
            for k, (_column, target) in enumerate(columns):
                target[index] = low_res[k]
        cands.append(index)
    if not cands:
        return None
    if bucket.plain:  # what place() finds for slots alone, without its views
        ranked = default_ranked(cands, target_slots, cap.labels, cap.label_order)
        found = spread(ranked, target_slots.__getitem__, bucket.n)
    else:
        room = Room(scratch, cands, bucket.use)
        req = bucket.req
        found = place(room, bucket.n, req.span_hosts, req.span_ptile, HostOrder(scratch, req.order))
    return None if found is None else (found, -1, -1)


def _first_hosts(
    plan: Plan, hosts: set[int], gain: dict[int, int], n: int
) -> tuple[dict[int, int], int, int] | None:
    """What `_place_at` finds for slots alone on one-slot hosts with nothing booked:
    the first `n` eligible hosts by name that are free by then (each has one slot
    free, so the default order is the label order), instead of the candidates, their
    ranking and the spread. Where many hosts are free by then, a walk of the label
    order that stops there; where few are, those sorted by name; where every host
    is eligible and the hosts are numbered in label order (state.indexed_labels),
    the smallest indices of those free by then. (Hot in EASY simulations: CTC-SP2,
    RICC-2010-2, bench/RESULTS.md.)

    A host is free by then when it is free now (open with a free slot) or gains one
    by then: with nothing booked, the plan's changes only add (this session's
    dispatches' ends), so a gain is a free slot. Also returns how many of the hosts
    chosen are free now: the slots a reservation there holds back (`Plan.reserve`:
    counted here rather than by intersecting sets, hot in RICC-2010-2); and, where
    every host is eligible and the label order was followed, its position there
    after the last host chosen: every host free now before it is chosen (else -1;
    `Plan.unclaimed` walks on from it)."""
    cap = plan.cap
    open_free, order = cap.open_free, cap.label_order
    walked = len(hosts) == len(plan.state.hosts)  # (every host eligible, the label order)
    if walked and plan.state.indexed_labels:
        # Numbered in label order: the first by name are the smallest indices, sorted
        # in C (RICC-2010-2: walks of thousands of hosts, or sorts by label, before).
        # A host free now gains nothing (one slot, free): the two never meet.
        ranked = [*open_free, *gain]
        ranked.sort()
        if len(ranked) < n:
            return None
        first = ranked[:n]  # (the hosts free now are those of the few left out)
        free_now = len(open_free) - len(open_free.intersection(ranked[n:]))
        return dict.fromkeys(first, 1), free_now, bisect_left(order, first[-1]) + 1
    if (len(open_free) + len(gain)) * 8 < len(order):  # (few)
        order = by_label(open_free | gain.keys(), cap.labels, plan.state.indexed_labels)
        walked = False
    chosen: list[Any] = []
    free_now = 0
    # (Taken as objects: compiled, an index read from a list is boxed anew for each
    # lookup, an allocation past 256; RICC-2010-2.)
    for at, index in enumerate(cast("list[Any]", order)):
        if index in open_free:
            if index not in hosts:
                continue
            free_now += 1
        elif index not in gain or index not in hosts:
            continue
        chosen.append(index)
        if len(chosen) == n:
            return dict.fromkeys(chosen, 1), free_now, at + 1 if walked else -1
    return None
