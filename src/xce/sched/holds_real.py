"""Holds on free real hosts (sched/holds.py) for a job no template can take wholly.

A job that spreads slot by slot, blocked on capacity, whose template cannot hold it
wholly (its `max` less the hosts of it present and in flight leaves too few new
hosts: "Template cloud allows no more hosts") could still run on the free hosts it
may use now, static or joined, together with new hosts of the template for the rest.
Without this it waits, holding nothing, until the template's busy hosts have all
finished and its idle ones have been given back, then asks for them anew, while the
static hosts it could use sit idle (on lublin_256, half static plus a burst template
of the whole machine: 25,000 static host-hours idle while only jobs wider than the
static half were pending).

Such a job holds the free hosts (most free first, then by the placement's label, up
to its slots) from when the rest is expected on new (or in-flight) hosts of the first
template by rank that can take it and has room for the rest; the catalog pass places
the rest there, as for any hold. Where the template could take the job wholly nothing
changes: ARCHITECTURE.md section 2's catalog placement stays wholly on one template.
"""

from __future__ import annotations

from xce.model.cluster import HostTemplate
from xce.sched.buckets import Bucket
from xce.sched.eligibility import Eligible
from xce.sched.holds import ElasticHolds, JoinedHold, empty_room, take_share
from xce.sched.holds_wide import WideOption, hold_wide, wide_option
from xce.sched.placement import most_room_first
from xce.sched.plan import Plan
from xce.sched.state import SchedulerState
from xce.sched.virtual import BEYOND_MAX, template_verdict, virtual_of


def hold_on_real(holds: ElasticHolds, bucket: Bucket, job: int, plan: Plan) -> JoinedHold | None:
    """Book `job` (of `bucket`, failed on capacity, holding no joined hosts of a
    template that could take it wholly) on the free hosts it may use plus new hosts
    of a template for the rest; None when that does not apply."""
    if bucket.single or bucket.shared or bucket.pieces:
        return None
    n = bucket.n
    free: dict[int, int] | None = None  # (found once a template lacks room for all)
    later: WideOption | None = None  # the soonest wide start asked for later
    for template, per_host, beyond in _holdable(holds.state, bucket):
        if beyond:  # (more hosts than the template's max: sched/holds_wide.py)
            option = wide_option(holds, bucket, plan, template, per_host)
            if option is None:
                continue
            if option.asks_at <= holds.now:  # (it holds both now)
                return hold_wide(holds, bucket, job, plan, option)
            # (a start later than new hosts could come: another template may start
            # it sooner; the first by rank of the soonest)
            if later is None or option.start < later.start:
                later = option
            continue
        if holds.room_for(template, -(-n // per_host)):
            return None  # (hot: the usual case) it could go wholly on new hosts
        if free is None:
            elig = bucket.eligible
            assert isinstance(elig, Eligible)
            free = _free_real(holds, bucket, elig.open, plan)
        if not free:
            return None
        hold = _hold(holds, bucket, job, plan, template, per_host, free)
        if hold is not None:
            return hold
    return hold_wide(holds, bucket, job, plan, later) if later is not None else None


def _holdable(state: SchedulerState, bucket: Bucket) -> list[tuple[HostTemplate, int, bool]]:
    """The templates by rank whose hosts could take the bucket's jobs, with the slots
    of one an empty host holds and whether the job needs more hosts than the
    template's max (then only a job of slots alone: `Bucket.plain`); kept on the
    bucket: fixed for its life."""
    found = bucket.holdable
    if found is None:
        found = bucket.holdable = []
        for template in state.ranked:
            verdict = template_verdict(state, bucket, template, virtual_of(state, template)[0])[0]
            beyond = verdict is not None and verdict.check == BEYOND_MAX and bucket.plain
            if verdict is None or beyond:
                found.append((template, empty_room(template, bucket.use), beyond))
    return found


def _hold(
    holds: ElasticHolds, bucket: Bucket, job: int, plan: Plan, template: HostTemplate,
    per_host: int, free: dict[int, int],
) -> JoinedHold | None:
    """The job's hold on `free` hosts with the rest on `template`, if the template
    cannot take it wholly (beyond its joined hosts) but has room for the rest."""
    hosts_of, provisioned, n = holds.cap.hosts, holds.state.provisioned, bucket.n
    joined = 0  # free slots of the template's joined hosts the job may use
    for index, slots in free.items():
        host = hosts_of[index]
        if host is not None and host.template == template.name:
            joined += slots
    if holds.room_for(template, -(-(n - joined) // per_host)):
        return None  # the catalog pass places it wholly on the template
    share, _pieces = take_share(list(free), free, n, ())
    left = n - sum(share.values())
    if not left:
        return None  # (it fits: it failed for a reason a hold does not change)
    start = holds.start_of(template, bucket, left, 0)
    if start is None:
        return None
    booked = plan.book(job, start, bucket.limit, share, bucket.use)
    hold = JoinedHold(template, share, left, (), start, booked)
    hold.static = len(share) - len(provisioned.keys() & share.keys())
    holds.held[job] = hold
    holds.hosts.update(share)
    return hold


def _free_real(
    holds: ElasticHolds, bucket: Bucket, usable: set[int], plan: Plan
) -> dict[int, int]:
    """The open hosts the job may use with room for its slots that no earlier
    reservation or hold has, most room first, then by label: host -> slots."""
    cap, booked, use = holds.cap, plan.booked, bucket.use
    room: dict[int, int] = {}
    for index in cap.open_free:
        if index in usable and index not in booked and index not in holds.hosts:
            slots = cap.usable(index, use)
            if slots > 0:
                room[index] = slots
    return {i: room[i] for i in most_room_first(room, room, cap.labels)}
