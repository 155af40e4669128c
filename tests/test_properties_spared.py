"""Property: a reservation later than now takes a provisioned host idle now only when
it could not start as early without such hosts (docs/scheduling.md section 6,
"Reservations spare supply"; sched/earliest.py `_place_at`).

On random plan worlds (tests/test_properties_plan.py: static and provisioned hosts,
queues with and without backfill, run limits, depths 1 to 3), for each reservation on
real hosts that starts later than now and holds a provisioned host that had no job
when the session began, of a job that spreads slot by slot (no span, no shared
resource, no host list): the capacity its plan left free over its window from its
start (its limit in a queue that backfills, else for ever) on the other hosts it may
use (slots and per-slot consumables, under running jobs to their
planned end, the dispatches and bookings made before it in scheduling order) must not
add up to its slots. Bookings of jobs before
it that the catalog pass made are counted too: that can only hide a violation, never
invent one.
"""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from strategies import Shape, patterns_match
from test_properties_plan import (
    PLAN_WORLDS,
    PROPS,
    Hold,
    PlanWorld,
    booked,
    describe,
    holds_of,
    session,
)


def _room_over(
    holds: list[Hold], shape: Shape, per_slot: list[tuple[str, float]], start: float,
    end: float,
) -> int:
    """How many slots of a job using `per_slot` consumables a host has free over all
    of [start, end) under `holds` (on that host)."""
    room = shape.slots
    for t in {start} | {h.start for h in holds if start < h.start < end}:
        active = [h for h in holds if h.start <= t < h.end]
        free = shape.slots - sum(h.slots for h in active)
        for res, amount in per_slot:
            used = sum(a for h in active for r, a in h.res if r == res)
            free = min(free, math.floor((shape.amount(res) - used) / amount + 1e-9))
        room = min(room, free)
    return max(0, room)


@settings(PROPS, max_examples=1000)
@given(PLAN_WORLDS)
def test_a_later_reservation_takes_an_idle_provisioned_host_only_when_it_must(
    pw: PlanWorld,
) -> None:
    world, now = pw.world, pw.world.now
    busy = {name for placed, _pools in world.running.values() for name in placed}
    idle = {n for n, h in world.hosts.items() if h.template is not None and n not in busy}
    assume(idle)
    result = session(world)
    running: list[Hold] = []
    for job, (placed, _pools) in world.running.items():
        running += holds_of(pw, job, placed, "running", now, pw.planned_end(job))
    bookings = booked(result)
    for r in bookings:
        spec, req = world.jobs[r.job], world.reqs[r.job]
        plain = not (req.shared() or req.span_hosts1 or req.ptile is not None or spec.hosts
                     or spec.exclusive)
        if r.virtual or r.start <= now or not plain or not idle & r.hosts.keys():
            continue
        # The window it was placed over: its limit in a queue that backfills, else
        # for ever from its start (docs/scheduling.md section 6), though it is booked
        # for its limit.
        end = r.start + pw.window(r.job)
        key = world.sort_key(r.job)
        holds = list(running)
        for d in result.dispatch:
            if world.sort_key(d.job) < key:
                holds += holds_of(pw, d.job, d.hosts, "dispatch", now, now + pw.limit(d.job))
        for other in bookings:
            if world.sort_key(other.job) < key:
                holds += holds_of(pw, other.job, other.hosts, "booking", other.start, other.end)
        free = 0
        for name, host in world.hosts.items():
            if (
                name in idle or not host.open or not req.selects(host.shape)
                or not patterns_match(world.queue(spec.queue).hosts, host)
            ):
                continue
            on = [h for h in holds if h.host == name]
            free += _room_over(on, host.shape, req.per_slot(), r.start, end)
        assert free < spec.n, (
            f"reservation of job {r.job} at {r.start:g} holds idle provisioned hosts "
            f"{sorted(idle & r.hosts.keys())} although {free} slots of other hosts stay "
            f"free over [{r.start:g}, {end:g}) for its {spec.n}\n" + describe(pw, result)
        )
