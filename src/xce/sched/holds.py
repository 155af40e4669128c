"""Supply held in the plan (ARCHITECTURE.md section 2a, "Elastic"): hosts that joined
for blocked jobs stay theirs while the rest of their supply is coming.

A job that fails on capacity in the real pass, while provisioned hosts of a template
its queue may use are free, holds them: it is booked on them (most free first, then
name, up to its slots) from its planned start, when the rest of its slots are
expected to be there: the in-flight hosts of that template it would be given (in
scheduling order, earliest arrival first), or now plus the template's lead time when
more than those are needed. Jobs after it in scheduling order may use the held hosts
only as backfill that ends before that start; jobs before it (their plan is made
first) may take them, and its demand then grows. The catalog pass places the rest of
the job on virtual hosts of the same template.

Nothing is kept between sessions: holds are made again every session from the hosts
present, the in-flight hosts and their request times.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from xce.model.cluster import HostTemplate, ResourceValue
from xce.model.result import Reservation
from xce.sched.buckets import Bucket
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.eligibility import Eligible
from xce.sched.placement import most_room_first
from xce.sched.plan import Plan
from xce.sched.state import SchedulerState
from xce.sched.supply_state import arrivals as expected_arrivals
from xce.sched.usage import Use


class JoinedHold:
    """What one blocked job holds on joined hosts: `hosts` (index -> slots) of
    `template` from `start`, with `rest` slots still to come on virtual hosts (in
    `pieces`, each on a host of its own, for a job with span[ptile])."""

    __slots__ = ("asks_at", "booked", "hosts", "pieces", "rest", "start", "static", "template")

    def __init__(
        self, template: HostTemplate, hosts: dict[int, int], rest: int,
        pieces: tuple[int, ...], start: float, booked: Reservation,
    ) -> None:
        self.template = template
        self.hosts = hosts
        self.rest = rest
        self.pieces = pieces
        self.start = start
        self.booked = booked
        self.static = 0  # of `hosts`, those that are not provisioned (holds_real.py)
        # When the rest is asked for: later than now for a job wider than the
        # template's max whose real hosts free up after the rest would come
        # (sched/holds_wide.py: ElasticHolds.later, not `held`, which the catalog
        # pass places)
        self.asks_at = 0.0


class ElasticHolds:
    """The holds of one session's real pass, made in scheduling order."""

    def __init__(self, state: SchedulerState, cap: Capacity, now: float) -> None:
        self.state = state
        self.cap = cap
        self.now = now
        self.held: dict[int, JoinedHold] = {}  # job -> its hold
        self.later: dict[int, JoinedHold] = {}  # job -> its hold asked for later
        self.hosts: set[int] = set()  # hosts held by some job
        self._free: list[int] | None = None  # provisioned hosts free at the first hold
        self._arrivals: dict[str, list[float]] = {}
        self._counted: dict[str, int] = {}  # in-flight hosts given to holds so far
        self._new: dict[str, int] = {}  # new hosts given to holds so far
        # The soonest time a hold asks for hosts it could not ask for yet: a job wider
        # than its template's max, whose real hosts free up after new hosts would
        # come (sched/holds_wide.py): the session's next_due.
        self.due = math.inf

    def hold(self, bucket: Bucket, job: int, plan: Plan) -> JoinedHold | None:
        """Book `job` (of `bucket`, failed on capacity) on the free joined hosts it
        could use, if there are any; None when it holds nothing.

        Jobs that spread slot by slot or over span[ptile] pieces, without shared
        resources: a job on one host or with tokens waits for its supply as before."""
        if bucket.single or bucket.shared:
            return None
        free = self._free_hosts()
        if not free:
            return None
        elig = bucket.eligible
        assert isinstance(elig, Eligible)
        found = self._choose(bucket, free, elig.open, plan)
        if found is None:
            return None
        template, hosts, pieces = found
        rest = bucket.n - sum(hosts.values())
        start = self.start_of(template, bucket, rest, len(pieces))
        if start is None:
            return None
        booked = plan.book(job, start, bucket.limit, hosts, bucket.use)
        hold = JoinedHold(template, hosts, rest, pieces, start, booked)
        self.held[job] = hold
        self.hosts.update(hosts)
        return hold

    def _free_hosts(self) -> list[int]:
        """Open provisioned hosts with a free slot and no hold, as of the first hold
        of the session (what this session dispatches on them is read when used)."""
        free = self._free
        if free is None:
            open_free, provisioned = self.cap.open_free, self.state.provisioned
            # (the smaller side: most provisioned hosts are busy, or most hosts are
            # static; the order is the choice's, which sorts them: hot in elastic
            # simulations)
            if len(open_free) < len(provisioned):
                free = [i for i in open_free if i in provisioned and provisioned[i].is_open]
            else:
                free = [i for i in provisioned if i in open_free and provisioned[i].is_open]
            self._free = free
        elif self.hosts:
            held = self.hosts
            free = self._free = [i for i in free if i not in held]
        return free

    def _choose(
        self, bucket: Bucket, free: list[int], usable: set[int], plan: Plan
    ) -> tuple[HostTemplate, dict[int, int], tuple[int, ...]] | None:
        """The first template by rank with free joined hosts the job may use that no
        earlier reservation holds, the job's share of them (most free first, then
        name), fewer than its slots (else it would have started), and its pieces left
        (span[ptile]: one per host)."""
        cap, hosts_of, booked = self.cap, self.cap.hosts, plan.booked
        use = bucket.use
        by_template: dict[str, list[int]] = {}
        for index in free:
            host = hosts_of[index]
            if host is None or host.template is None or index not in usable:
                continue
            if index in booked or cap.usable(index, use) <= 0:
                continue
            by_template.setdefault(host.template, []).append(index)
        for template in self.state.ranked:
            found = by_template.get(template.name)
            if not found:
                continue
            room = {i: cap.usable(i, use) for i in found}
            ranked = most_room_first(found, room, cap.labels)  # (labels: by name)
            share, pieces = take_share(ranked, room, bucket.n, bucket.pieces)
            if share and (pieces if bucket.pieces else sum(share.values()) < bucket.n):
                return template, share, pieces
        return None

    def room_for(self, template: HostTemplate, count: int) -> bool:
        """Whether `count` more hosts of `template` could come: in-flight ones not
        given to a hold yet, then new ones within what its allowance leaves."""
        allowed = self._new_allowed(template)
        if count <= allowed:  # (hot: most jobs; the arrivals are not needed)
            return True
        left = len(self._arrivals_of(template.name)) - self._counted.get(template.name, 0)
        return count <= left + allowed

    def _new_allowed(self, template: HostTemplate) -> int:
        """New hosts of `template` its allowance leaves once earlier holds of the
        session have theirs (as the catalog pass gives them, in the same order)."""
        return self.state.new_hosts_allowed(template) - self._new.get(template.name, 0)

    def _arrivals_of(self, name: str) -> list[float]:
        arrivals = self._arrivals.get(name)
        if arrivals is None:
            arrivals = self._arrivals[name] = expected_arrivals(self.state, name, self.now)
        return arrivals

    def start_of(
        self, template: HostTemplate, bucket: Bucket, rest: int, pieces: int
    ) -> float | None:
        """When the rest of a job's slots (`pieces` of them with a span) are expected
        on hosts of `template`: the arrival of the last in-flight host it would be
        given, or now plus the lead time when it needs new ones; None if the template
        cannot hold the rest."""
        name = template.name
        per_host = empty_room(template, bucket.use)
        if per_host < bucket.smallest:
            return None
        count = pieces if bucket.pieces else -(-rest // per_host)
        arrivals = self._arrivals_of(name)
        counted = self._counted.get(name, 0)
        new = count - (len(arrivals) - counted)
        if new > self._new_allowed(template):
            return None
        at = self.arrival(template, count)
        if new <= 0:
            self._counted[name] = counted + count
        else:
            self._counted[name] = len(arrivals)
            self._new[name] = self._new.get(name, 0) + new
        return at

    def to_come(self, template: HostTemplate) -> int:
        """How many more hosts of `template` could come for holds: its in-flight ones
        not given to one yet, then the new ones its allowance leaves."""
        left = len(self._arrivals_of(template.name)) - self._counted.get(template.name, 0)
        return left + max(0, self._new_allowed(template))

    def arrival(self, template: HostTemplate, count: int) -> float:
        """When `count` more hosts of `template` would be there (none given yet):
        the last of the in-flight ones they would be, or now plus the lead time."""
        arrivals = self._arrivals_of(template.name)
        last = self._counted.get(template.name, 0) + count - 1
        if last < len(arrivals):
            return arrivals[last]
        return self.now + self.state.lead_time(template.name)


def take_share(
    ranked: list[int], room: dict[int, int], n: int, pieces: tuple[int, ...]
) -> tuple[dict[int, int], tuple[int, ...]]:
    """A job's share of `ranked` hosts (`room`: its slots each can take): slot by slot
    up to `n`, or with pieces one per host, the largest first (pieces come so: ptile
    ones, then the remainder); and the pieces left."""
    share: dict[int, int] = {}
    if not pieces:
        left = n
        for index in ranked if left > 0 else ():
            take = min(room[index], left)
            share[index] = take
            left -= take
            if not left:
                break
        return share, ()
    at = 0
    for index in ranked:
        if at < len(pieces) and room[index] >= pieces[at]:
            share[index] = pieces[at]
            at += 1
    return share, pieces[at:]


def empty_room(template: HostTemplate, use: Use) -> int:
    """Slots of a job of this use (sched/usage.py) an empty host of `template` holds:
    none unless the template has the job's GPUs per host."""
    return shape_room(template.slots, template.resources, template.gpus, use)


def shape_room(slots: int, resources: Mapping[str, ResourceValue], gpus: int, use: Use) -> int:
    """Slots of a job of this use an empty host of this shape (slots, consumables,
    GPUs) holds: none unless it has the job's GPUs per host."""
    per_slot, want = use
    if want > gpus:
        return 0
    room = slots
    for res, amount in per_slot:
        value = resources.get(res, 0)
        have = 0.0 if isinstance(value, bool) else float(value)
        room = min(room, int((have + EPSILON) // amount))
    return room
