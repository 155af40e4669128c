"""Holds for a job wider than every host its template may have (sched/holds_real.py).

A job of slots alone (`Bucket.plain`) that needs more hosts than a template's `max`
could still run on all the hosts of the template that can come together with real
hosts (static, or joined) for the rest: admission lets it in where the static hosts
and the template's max together hold it (sched/ever.py). Placing it wholly on the
template, as the catalog pass does, never can, so without this it would pend until
enough real hosts happened to be free at once while smaller jobs kept taking them.

Such a job is planned as a reservation in two parts: hosts of the template
(in-flight ones first, then new ones within its allowance), from when they would be
there, and the rest on real hosts, at the earliest time from then on at which that
many slots of the hosts it may use stay free over its window on the profile (their
running jobs' planned ends, this session's dispatches, earlier reservations and
holds). The time is found with all the template's hosts that can come; at that time
the job takes as many real slots as stay free and asks only for the hosts it lacks
(at least one). From then on later jobs may use those real hosts only as backfill
that ends before the start.

* The real part frees no later than new hosts asked for now would come (now plus
  the template's lead time): the job holds both from its start (a hold, as for
  joined hosts: the catalog pass places the rest on the template, in flight first,
  which is demand now).
* The real part frees later: asking now would leave the hosts idle until then, so
  only the real part is booked, and nothing is asked for yet (hosts in flight it
  would have had are surplus); the hold's `due` is when asking makes new hosts come
  just in time (the start less the lead time), and the session's next_due names it,
  so a session runs then with no other event.
* Of several templates, the job takes the first by rank that it could hold now, else
  the one that starts it soonest (the first by rank of those).
"""

from __future__ import annotations

import math

from xce.model.cluster import HostTemplate
from xce.sched.buckets import Bucket
from xce.sched.eligibility import Eligible
from xce.sched.failure import Failure
from xce.sched.holds import ElasticHolds, JoinedHold, take_share
from xce.sched.placement import most_room_first
from xce.sched.plan import HostProfile, Plan, profiles_of
from xce.sched.reasons import RESOURCE, clock, plural, reserved, span
from xce.sched.virtual import BEYOND_MAX, TemplateSupply


class WideOption:
    """Where a job wider than `template`'s max could run (see the module): `count`
    hosts of the template, expected at `arrival`, and `share` (index -> slots) of
    real hosts, from `start`; new hosts asked for at `asks_at` (the start less the
    template's lead time) would join by then."""

    __slots__ = ("arrival", "asks_at", "count", "share", "start", "template")

    def __init__(
        self, template: HostTemplate, count: int, arrival: float, start: float,
        share: dict[int, int], lead_time: float,
    ) -> None:
        self.template = template
        self.count = count
        self.arrival = arrival
        self.start = start
        self.share = share
        self.asks_at = start - lead_time


def wide_option(
    holds: ElasticHolds, bucket: Bucket, plan: Plan, template: HostTemplate, per_host: int
) -> WideOption | None:
    """Where `bucket`'s job could run with the hosts of `template` that can come (see
    the module), found without booking it; None when the template can send none or
    real hosts never free up enough."""
    count = min(holds.to_come(template), -(-bucket.n // per_host))
    if count <= 0:
        return None
    # (> 0: more hosts than its max; none when hosts in flight beyond a lowered max
    # hold it wholly: then it holds them alone)
    need = max(0, bucket.n - count * per_host)
    arrival = holds.arrival(template, count)
    # (reserve_depth 0: no reservation on real hosts ahead of their time, as for any
    # job; it holds those free by the time the template's hosts would come)
    latest = arrival if not holds.state.config.reserve_depth else math.inf
    found = _real_part(plan, bucket, need, arrival, latest)
    if found is None:
        return None
    start, room = found
    # Real slots free over its window from then beyond the least it needs stand in
    # for whole hosts of the template (it asks only for what it lacks; at least one,
    # or it is no hold on supply but a reservation of real hosts)
    fewer = min((sum(room.values()) - need) // per_host, count - 1)
    if fewer > 0:
        count -= fewer
        need += fewer * per_host
        arrival = holds.arrival(template, count)  # (no later: fewer hosts)
    share, _pieces = take_share(most_room_first(room, room, plan.cap.labels), room, need, ())
    lead = holds.state.lead_time(template.name)
    return WideOption(template, count, arrival, start, share, lead)


def hold_wide(holds: ElasticHolds, bucket: Bucket, job: int, plan: Plan,
              option: WideOption) -> JoinedHold:
    """Book `job` where `option` runs it: holding both parts, or, when new hosts
    asked for now would join before the real part starts, the real part alone,
    asking for the hosts at `option.asks_at` (in-flight hosts it counted on are then
    surplus)."""
    template, share, start = option.template, option.share, option.start
    rest = bucket.n - sum(share.values())
    given = holds.start_of(template, bucket, rest, 0)  # (its hosts: no later job's)
    assert given == option.arrival
    booked = plan.book(job, start, bucket.limit, share, bucket.use)
    hold = JoinedHold(template, share, rest, (), start, booked)
    provisioned = holds.state.provisioned
    hold.static = len(share) - len(provisioned.keys() & share.keys())
    asks_at = option.asks_at
    if asks_at > holds.now:  # too soon to ask: asked for when they would come by then
        hold.asks_at = asks_at
        holds.due = min(holds.due, asks_at)
        holds.later[job] = hold
    else:
        holds.held[job] = hold
    holds.hosts.update(share)
    return hold


def asked_later(hold: JoinedHold, now: float) -> Failure:
    """The pend reason of a job whose hold asks for the rest later."""
    return Failure(
        RESOURCE, BEYOND_MAX,
        f"{reserved(hold.start, now, hold.booked.hosts)} with "
        f"{plural(hold.rest, 'more slot')} on hosts of template {hold.template.name}, to "
        f"be requested at {clock(hold.asks_at)} (in {span(hold.asks_at - now)}) so that "
        f"they join by then (the job is wider than the template's max of "
        f"{plural(hold.template.max, 'host')})",
    )


def keep_for_later(
    holds: ElasticHolds, job: int, supply: TemplateSupply, per_host: int
) -> Failure:
    """`job`'s hold that asks for the rest later, in the catalog pass: its hosts are
    kept (later jobs have them only as backfill: sched/kept.py), unless jobs ahead of
    it that only the template can take were given too many of them in this pass;
    then it holds no hosts to come (it plans again at the next session)."""
    later = holds.later[job]
    count = -(-later.rest // per_host)
    if not supply.keep(job, count, later.start):
        del holds.later[job]
        return _taken_ahead(later, count, supply.room)
    return asked_later(later, holds.now)


def _taken_ahead(hold: JoinedHold, count: int, left: int) -> Failure:
    """The pend reason of a job whose hold asked for the rest later, when jobs ahead
    of it in the catalog pass took the template's hosts it counted on."""
    return Failure(
        RESOURCE, BEYOND_MAX,
        f"Not enough hosts of template {hold.template.name} to come: the job needs "
        f"{count} more (it is wider than the template's max of "
        f"{plural(hold.template.max, 'host')}) and jobs ahead of it take all but {left} "
        "this session; planned again at the next session",
    )


def _real_part(
    plan: Plan, bucket: Bucket, need: int, arrival: float, latest: float
) -> tuple[float, dict[int, int]] | None:
    """The earliest time from `arrival`, and no later than `latest`, at which `need`
    slots of the open hosts the bucket may use stay free over its window on the
    profile, and the slots of each that stay free then (at least `need` in all)."""
    elig = bucket.eligible
    assert isinstance(elig, Eligible)
    free_slots, window = plan.cap.free_slots, bucket.window
    profiles: list[tuple[int, HostProfile]] = profiles_of(plan, elig.open)
    # The free slots of all of them at each change, a bound on what stays free over
    # a window from then: only where it reaches `need` are the hosts looked at.
    total = sum([free_slots[index] for index, _p in profiles])
    # (each time's changes summed, then the times sorted: sorting the steps
    # themselves compared tuples, the most of an elastic simulation whose template's
    # max is less than wide jobs' hosts: SDSC-SP2 at `--elastic 0.5`)
    change_at: dict[float, int] = {}
    for _i, p in profiles:
        for step in p.steps:
            time = step[0]
            change_at[time] = change_at.get(time, 0) + step[1]
    times = sorted(change_at)
    at = 0
    while at < len(times) and times[at] <= arrival:
        total += change_at[times[at]]
        at += 1
    candidates = [(arrival, total)]
    while at < len(times) and times[at] <= latest:
        time = times[at]
        total += change_at[time]
        at += 1
        candidates.append((time, total))
    for start, bound in candidates:
        if bound < need:
            continue
        stop = start + window if window != math.inf else math.inf
        room: dict[int, int] = {}
        total = 0
        for index, profile in profiles:
            slots = profile.lowest_slots(free_slots[index], start, stop)
            if slots > 0:
                room[index] = slots
                total += slots
        if total >= need:
            return start, room
    return None
