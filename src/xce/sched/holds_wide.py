"""Holds for a job wider than every host its template may have (sched/holds_real.py).

A job of slots alone (`Bucket.plain`) that needs more hosts than a template's `max`
could still run on all the hosts of the template that can come together with real
hosts (static, or joined) for the rest: admission lets it in where the static hosts
and the template's max together hold it (sched/ever.py). Placing it wholly on the
template, as the catalog pass does, never can, so without this it would pend until
enough real hosts happened to be free at once while smaller jobs kept taking them.

Such a job is planned as a reservation in two parts: the hosts of the template that
can come (in-flight ones first, then new ones within its allowance), from when they
would be there, and the rest on real hosts, at the earliest time from then on at
which that many slots of the hosts it may use stay free over its window on the
profile (their running jobs' planned ends, this session's dispatches, earlier
reservations and holds). From then on later jobs may use those real hosts only as
backfill that ends before the start.

* The real part frees no later than the template's hosts would come: the job holds
  both from then (a hold, as for joined hosts: the catalog pass places the rest on
  the template, which is demand now).
* The real part frees later: asking now would leave the hosts idle until then, so
  only the real part is booked, and nothing is asked for yet; the hold's `due` is when
  asking makes the hosts come just in time (the start less the time to get them),
  and the session's next_due names it, so a session runs then with no other event.
"""

from __future__ import annotations

import math

from xce.model.cluster import HostTemplate
from xce.sched.buckets import Bucket
from xce.sched.eligibility import Eligible
from xce.sched.failure import Failure
from xce.sched.holds import ElasticHolds, JoinedHold, take_share
from xce.sched.placement import most_room_first
from xce.sched.plan import HostProfile, Plan, profile_of
from xce.sched.reasons import RESOURCE, clock, reserved, span
from xce.sched.virtual import BEYOND_MAX


def hold_wide(
    holds: ElasticHolds, bucket: Bucket, job: int, plan: Plan, template: HostTemplate,
    per_host: int,
) -> JoinedHold | None:
    """Book `job` on the hosts of `template` that can come and on real hosts for the
    rest (see the module); None when the template can send none or real hosts never
    free up enough."""
    count = min(holds.to_come(template), -(-bucket.n // per_host))
    if count <= 0:
        return None
    need = bucket.n - count * per_host  # (> 0: more hosts than its max)
    arrival = holds.arrival(template, count)
    # (reserve_depth 0: no reservation on real hosts ahead of their time, as for any
    # job; it holds those free by the time the template's hosts would come)
    latest = arrival if not holds.state.config.reserve_depth else math.inf
    found = _real_part(plan, bucket, need, arrival, latest)
    if found is None:
        return None
    start, share = found
    rest = bucket.n - sum(share.values())
    given = holds.start_of(template, bucket, rest, 0)  # (its hosts: no later job's)
    assert given == arrival
    booked = plan.book(job, start, bucket.limit, share, bucket.use)
    hold = JoinedHold(template, share, rest, (), start, booked)
    provisioned = holds.state.provisioned
    hold.static = len(share) - len(provisioned.keys() & share.keys())
    if start > arrival:  # too soon to ask: asked for when they would come by then
        hold.asks_at = holds.now + (start - arrival)
        holds.due = min(holds.due, hold.asks_at)
        holds.later[job] = hold
    else:
        holds.held[job] = hold
    holds.hosts.update(share)
    return hold


def asked_later(hold: JoinedHold, now: float) -> Failure:
    """The pend reason of a job whose hold asks for the rest later."""
    return Failure(
        RESOURCE, BEYOND_MAX,
        f"{reserved(hold.start, now, hold.booked.hosts)} with {hold.rest} more slots "
        f"on hosts of template {hold.template.name}, to be requested at "
        f"{clock(hold.asks_at)} (in {span(hold.asks_at - now)}) so that they join by "
        f"then (the job is wider than the template's max of {hold.template.max} hosts)",
    )


def _real_part(
    plan: Plan, bucket: Bucket, need: int, arrival: float, latest: float
) -> tuple[float, dict[int, int]] | None:
    """The earliest time from `arrival`, and no later than `latest`, at which `need`
    slots of the open hosts the bucket may use stay free over its window on the
    profile, and those slots (most free first, then by label)."""
    elig = bucket.eligible
    assert isinstance(elig, Eligible)
    free_slots, window = plan.cap.free_slots, bucket.limit
    profiles: list[tuple[int, HostProfile]] = [
        (index, profile_of(plan, index)) for index in elig.open
    ]
    # The free slots of all of them at each change, a bound on what stays free over
    # a window from then: only where it reaches `need` are the hosts looked at.
    total = sum([free_slots[index] for index, _p in profiles])
    steps = sorted([(step[0], step[1]) for _i, p in profiles for step in p.steps])
    at = 0
    while at < len(steps) and steps[at][0] <= arrival:
        total += steps[at][1]
        at += 1
    candidates = [(arrival, total)]
    while at < len(steps) and steps[at][0] <= latest:
        time = steps[at][0]
        while at < len(steps) and steps[at][0] == time:
            total += steps[at][1]
            at += 1
        candidates.append((time, total))
    zeros = (0.0,) * len(plan.res)
    for start, bound in candidates:
        if bound < need:
            continue
        stop = start + window if window != math.inf else math.inf
        room: dict[int, int] = {}
        total = 0
        for index, profile in profiles:
            slots = profile.lowest(free_slots[index], zeros, start, stop)[0]
            if slots > 0:
                room[index] = slots
                total += slots
        if total >= need:
            ranked = most_room_first(room, room, plan.cap.labels)
            share, _pieces = take_share(ranked, room, need, ())
            return start, share
    return None
