"""Property tests of the catalog pass and the demand it reports (docs/scheduling.md,
sections 4 and 5).

Allowances, headroom and feasibility are recomputed from the drawn world through
`strategies.World` / `strategies.Model`, never read from the scheduler's state.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, example, given, settings
from strategies import (
    HostFact,
    Model,
    Req,
    Shape,
    World,
    comparable,
    scheduling_order,
    simple_world,
    template_in,
    worlds,
)

from xce.model.cluster import Catalog, ClusterConfig, HostSpec, HostTemplate
from xce.model.events import Event, HostAdded, JobKilled, JobStarted, SupplyChanged
from xce.model.jobs import JobSpec
from xce.model.result import SessionResult, TraceEntry
from xce.sched.capacity import Capacity
from xce.sched.catalog import CatalogPass
from xce.sched.demand import pend_groups
from xce.sched.realpass import RealPass
from xce.sched.session import run_session
from xce.sched.state import SchedulerState

PROPS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
EPS = 1e-6
LATER = 10.0  # the next session runs this much later


def session(
    world: World, extra: list[Event] | None = None, now: float | None = None
) -> tuple[SchedulerState, SessionResult]:
    state = world.state(extra)
    return state, run_session(state, world.now if now is None else now)


def kinds(result: SessionResult) -> dict[int, str]:
    return {job: group.kind for group in result.pending for job in group.jobs}


def demand_jobs(result: SessionResult) -> set[int]:
    jobs = {j for h in result.demand.hosts for j in h.jobs}
    return jobs | {j for r in result.demand.resources for j in r.jobs}


def unit(n: int, req: Req) -> int:
    """Slots the job needs on at least one host."""
    if req.span_hosts1:
        return n
    if req.ptile is not None:
        return min(req.ptile, n)
    return 1


def empty_room(shape: Shape, req: Req) -> int:
    """Slots of this job an empty host of `shape` holds."""
    room = shape.slots
    for res, amount in req.per_slot():
        room = min(room, int((shape.amount(res) + 1e-9) // amount))
    return room


# ----------------------------------------------------------------------------- 7


@PROPS
@given(worlds("demand"))
def test_demand_within_allowance_and_headroom(world: World) -> None:
    """New hosts never exceed a template's allowance (max - present - in flight,
    lowered by the runtime allowance), in-flight hosts used never exceed those in
    flight, borrowed tokens never exceed the pool's headroom; in-flight supply is
    either used or reported as surplus; listed jobs pend waiting for provisioning, in
    scheduling order, each wholly on one template it may use, under its select and
    shape; nothing is requested that its jobs could not use."""
    _state, result = session(world)
    kind = kinds(result)
    dispatched = {d.job for d in result.dispatch}
    on_template: dict[int, str] = {}
    for hd in result.demand.hosts:
        name = hd.template
        allowance = world.template_allowance(name)
        in_flight = world.in_flight.get(name, 0)
        assert 0 <= hd.count <= allowance, (hd, allowance)
        assert 0 <= hd.in_flight_used <= in_flight, (hd, in_flight)
        assert hd.jobs and hd.count + hd.in_flight_used >= 1, hd
        assert len(set(hd.jobs)) == len(hd.jobs), hd
        assert hd.jobs == scheduling_order(world, hd.jobs), hd
        needed = 0
        for job in hd.jobs:
            assert job not in dispatched and kind.get(job) == "provisioning", (
                job,
                result.reason_of(job),
            )
            assert job not in on_template, f"job {job} on templates {on_template[job]} and {name}"
            on_template[job] = name
            spec, req = world.jobs[job], world.reqs[job]
            shape = world.template_shape(name, f"{name}:virtual")
            assert template_in(world.queue(spec.queue).hosts, name), (job, spec.queue, name)
            assert req.selects(shape), (job, req.select, name)
            room = empty_room(shape, req)
            assert room >= unit(spec.n, req), (job, req.text(), name, room)
            per_host = (
                spec.n if req.single_host(spec.n) else room if req.ptile is None else req.ptile
            )
            needed += math.ceil(spec.n / per_host)
        assert hd.count + hd.in_flight_used <= needed, (hd, needed)

    for rd in result.demand.resources:
        res, pool = world.pool_of_label(rd.resource)
        assert world.countable(res, pool) is not None, (
            f"demand for {rd.resource}, which has no countable"
        )
        headroom = world.pool_headroom(res, pool)
        tokens_in_flight = world.tokens_in_flight.get((res, pool), 0.0)
        assert -EPS <= rd.amount <= headroom + EPS, (rd, headroom)
        assert -EPS <= rd.in_flight_used <= tokens_in_flight + EPS, (rd, tokens_in_flight)
        assert rd.jobs and rd.amount + rd.in_flight_used > 0, rd
        assert len(set(rd.jobs)) == len(rd.jobs), rd
        assert rd.jobs == scheduling_order(world, rd.jobs), rd
        wanted = 0.0
        for job in rd.jobs:
            assert job not in dispatched and kind.get(job) == "provisioning", (
                job,
                result.reason_of(job),
            )
            amounts = dict(world.reqs[job].shared())
            assert res in amounts, (job, rd)
            wanted += amounts[res]
        assert rd.amount + rd.in_flight_used <= wanted + EPS, (rd, wanted)

    for job, k in kind.items():
        if k == "provisioning":
            assert job in demand_jobs(result), (job, result.reason_of(job))

    # In-flight supply is either used by pending jobs or reported as surplus.
    surplus_hosts = {s.template: s.count for s in result.demand.surplus_hosts}
    used_hosts = {h.template: h.in_flight_used for h in result.demand.hosts}
    for t in world.config.catalog.templates:
        in_flight = world.in_flight.get(t.name, 0)
        assert used_hosts.get(t.name, 0) + surplus_hosts.get(t.name, 0) == in_flight, (
            t.name,
            in_flight,
            result.demand,
        )
    surplus_tokens = {s.resource: s.amount for s in result.demand.surplus_tokens}
    used_tokens = {r.resource: r.in_flight_used for r in result.demand.resources}
    for (res, pool), tokens in world.tokens_in_flight.items():
        label = world.label(res, pool)
        total = used_tokens.get(label, 0.0) + surplus_tokens.get(label, 0.0)
        assert abs(total - tokens) <= EPS, (label, tokens, result.demand)


# ----------------------------------------------------------------------------- 8


def first_fit(
    world: World, template: str, jobs: list[int], to_come: dict[int, int] | None = None
) -> tuple[int, int]:
    """Pack `jobs` (scheduling order) on hosts of `template` as section 4 describes:
    first-fit on the hosts opened so far, in the order they were opened, the
    template's in-flight hosts opened first, then new ones, for what does not fit.
    First-fit is applied to the pieces a job's span makes: the whole job for
    span[hosts=1]; for span[ptile=N], N-slot pieces, one per host, and the remainder
    on one more (section 2, "Placement"); slot by slot without span. Returns (new
    hosts opened, in-flight hosts given work). All these hosts start empty and alike,
    so the round a job was placed in does not change where first-fit puts it.
    `to_come`: for jobs that hold joined hosts (sched/holds.py), the slots still to
    come: without span they go first-fit like a job of that many slots; with
    span[ptile] they are the job's last pieces (the first ones are held)."""
    to_come = to_come or {}
    shape = world.template_shape(template, f"{template}:virtual")
    in_flight = max(0, world.in_flight.get(template, 0))
    hosts: list[list[float]] = []  # per host: free slots, then free per-slot resources
    resources = ("mem", "gpu")

    def empty() -> list[float]:
        return [float(shape.slots), *(shape.amount(r) for r in resources)]

    def room(host: list[float], req: Req) -> int:
        slots = int(host[0])
        for res, amount in req.per_slot():
            slots = min(slots, int((host[1 + resources.index(res)] + 1e-9) // amount))
        return max(0, slots)

    def take(host: list[float], req: Req, slots: int) -> None:
        host[0] -= slots
        for res, amount in req.per_slot():
            host[1 + resources.index(res)] -= amount * slots

    used: set[int] = set()
    hosts = [empty() for _ in range(in_flight)]

    def first_host(req: Req, slots: int, skip: set[int]) -> int:
        """The first host (opened order) with room for `slots`, opening one if none."""
        for position, host in enumerate(hosts):
            if position not in skip and room(host, req) >= slots:
                return position
        hosts.append(empty())
        if room(hosts[-1], req) < slots:
            raise AssertionError(f"{slots} slots do not fit on an empty {template} host")
        return len(hosts) - 1

    for job in jobs:
        n, req = world.jobs[job].n, world.reqs[job]
        if req.single_host(n):
            pieces = [n]
        elif req.ptile is not None:
            # span[ptile]: one piece of ptile slots per host, the remainder on one more.
            full, rest = divmod(n, req.ptile)
            pieces = [req.ptile] * full + ([rest] if rest else [])
        else:
            pieces = []
        if pieces and job in to_come:  # held pieces: the first ones (the largest)
            while sum(pieces) > to_come[job]:
                pieces.pop(0)
        mine: set[int] = set()
        for piece in pieces:
            position = first_host(req, piece, mine)
            take(hosts[position], req, piece)
            mine.add(position)
        left = to_come.get(job, n) if not pieces else 0
        position = 0
        while left:  # no span: slots spread first-fit over the hosts in order
            if position == len(hosts):
                hosts.append(empty())
                if room(hosts[-1], req) == 0:
                    raise AssertionError(f"job {job} does not fit on an empty {template} host")
            want = min(room(hosts[position], req), left)
            take(hosts[position], req, want)
            left -= want
            if want:
                mine.add(position)
            position += 1
        used.update(p for p in mine if p < in_flight)
    return len(hosts) - in_flight, len(used)


# Regression example, found by the test below (minimised by hand; fixed since): job 1
# (2 slots) opens an aws.a host; job 2 (5 slots, span[ptile=3]) needs a 3-slot piece
# on a new host and its 2-slot remainder fits on the first host, so 2 hosts in all
# (the real pass indeed runs both jobs on 2 delivered hosts). The catalog skipped the
# first host for a 3-slot piece, then opened 2 new hosts for 3 + 2: it requested 3.
PTILE_REMAINDER_CATALOG = simple_world(
    ClusterConfig(
        hosts=(HostSpec("h01", 1),),
        catalog=Catalog(templates=(HostTemplate("aws.a", "aws", 4, max=5),)),
    ),
    [(JobSpec(id=1, n=2), Req()), (JobSpec(id=2, n=5), Req(ptile=3))],
    closed=("h01",),
)


@PROPS
@given(worlds("demand"))
@example(PTILE_REMAINDER_CATALOG)
def test_host_demand_is_first_fit_packing(world: World) -> None:
    """Per template, the new hosts and in-flight hosts reported are exactly what
    first-fit packing of the template's listed jobs, in scheduling order, needs: the
    demand is enough for its jobs, and no more."""
    _state, result = session(world)
    # Jobs holding joined hosts: only the rest of their slots is on virtual hosts.
    to_come = {
        r.job: r.hosts[virtual]
        for r in result.reservations
        for virtual in r.hosts
        if r.virtual and virtual.endswith(":virtual") and len(r.hosts) > 1
    }
    for hd in result.demand.hosts:
        new, used = first_fit(world, hd.template, hd.jobs, to_come)
        assert (hd.count, hd.in_flight_used) == (new, used), (
            hd,
            {"new": new, "in_flight_used": used},
        )


def provide(world: World, result: SessionResult) -> tuple[list[Event], Model]:
    """Events that start the session's dispatches, deliver exactly its demand (new
    hosts, requested for the demand's jobs as live, in-flight hosts joining, borrowed
    tokens) and kill the pending jobs the
    demand is not for; and a model of the resulting cluster."""
    events: list[Event] = [
        JobStarted(job=d.job, hosts=d.hosts, pools=d.pools, time=world.now) for d in result.dispatch
    ]
    hosts = dict(world.hosts)
    in_flight: dict[str, int] = {}
    for hd in result.demand.hosts:
        t = world.template(hd.template)
        for k in range(hd.count + hd.in_flight_used):
            name = f"new-{t.name}-{k}"
            hosts[name] = HostFact(world.template_shape(t.name, name), t.name, "ok")
            events.append(
                HostAdded(
                    name=name,
                    slots=t.slots,
                    type=t.type,
                    model=t.model,
                    resources=dict(t.resources),
                    template=t.name,
                    state="ok",
                    time=world.now + 1,
                    requested_for=tuple(hd.jobs[: hd.count + hd.in_flight_used]),
                )
            )
        in_flight[t.name] = world.in_flight.get(t.name, 0) - hd.in_flight_used
    borrowed: dict[str, float] = {}
    tokens_in_flight: dict[str, float] = {}
    extra_tokens: dict[tuple[str, str], float] = {}
    for rd in result.demand.resources:
        key = world.pool_of_label(rd.resource)
        extra_tokens[key] = rd.amount + rd.in_flight_used
        borrowed[rd.resource] = world.borrowed.get(key, 0.0) + rd.amount + rd.in_flight_used
        tokens_in_flight[rd.resource] = world.tokens_in_flight.get(key, 0.0) - rd.in_flight_used
    events.append(
        SupplyChanged(
            in_flight=in_flight,
            borrowed=borrowed,
            tokens_in_flight=tokens_in_flight,
            time=world.now + 1,
        )
    )
    wanted = demand_jobs(result)
    started = {d.job for d in result.dispatch}
    for job in world.pending_ids():
        if job not in wanted and job not in started:
            events.append(JobKilled(job=job, time=world.now + 1))
    model = Model(world, hosts)
    for key, extra in extra_tokens.items():
        model.pool_total[key] += extra
    for d in result.dispatch:
        model.start(d.job, d.hosts, d.pools)
    return events, model


@PROPS
@given(worlds("demand"))
def test_delivered_demand_lets_its_jobs_run(world: World) -> None:
    """Start what the session dispatched, deliver its demand (the new hosts, the
    in-flight hosts used, the tokens) and run the next session: the jobs the demand is
    for are dispatched, unless a limit (reached by running jobs and jobs dispatched
    earlier in that session) blocks them.

    Narrowed, as docs/scheduling.md promises no more:
    * Pending jobs the demand is not for are killed first. The catalog pass reserved
      nothing for them, yet in the real pass they may use the delivered hosts in ways
      the catalog never considers (a job without span[] spreads over hosts of several
      templates and static hosts, while the catalog puts a job wholly on one template).
    * The first demand job (scheduling order) must run. A later one may pend when no
      placement exists for it at its turn (checked exhaustively) and an earlier demand
      job was dispatched in that session: the real pass places by `order[]` / most
      free slots (spreading), the catalog packs first-fit, so earlier jobs can leave
      the delivered hosts fragmented differently (e.g. two 1-slot jobs on two 4-slot
      hosts instead of one, then a span[hosts=1] 4-slot job has no host). That the
      counts themselves are right is test_host_demand_is_first_fit_packing's job.
    """
    _state, first = session(world)
    wanted = demand_jobs(first)
    events, model = provide(world, first)
    _state2, second = session(world, events, world.now + LATER)
    dispatched = {d.job: d for d in second.dispatch}
    assert set(dispatched) <= wanted, "only demand jobs were left pending"
    earlier_ran = False
    for job in scheduling_order(world, sorted(wanted)):
        if job in dispatched:
            d = dispatched[job]
            model.start(job, d.hosts, d.pools)
            earlier_ran = True
            continue
        if model.limit_blocked(job):
            continue
        story = (
            f"job {job} ({world.jobs[job].n} slots, {world.reqs[job].text()!r}) was in the "
            f"demand ({first.reason_of(job)!r}) but pends once it is delivered: "
            f"{second.reason_of(job)!r}"
        )
        assert earlier_ran, story
        assert not model.placement_exists(job), story + " although it fits"


# ----------------------------------------------------------------------------- 9


# Regression example, found by the test below (minimised by hand; fixed since by
# opening in-flight hosts where new ones would be opened). Session 1: job 1 (ARM64
# only) opens an aws.b host, job 2 (any type) joins it, job 3 (X86_64, 2 slots on one
# host) opens an aws.a host: demand aws.a 1, aws.b 1. With those two hosts in flight,
# the former round "in-flight hosts of every template first" put job 2 on the
# in-flight aws.a host (rank first), so job 3 no longer fitted there and a new aws.a
# host was requested again (aws.b's in-flight host kept a free slot): count 1, not 0.
IN_FLIGHT_SWITCH = simple_world(
    ClusterConfig(
        hosts=(HostSpec("h01", 1),),
        catalog=Catalog(
            templates=(
                HostTemplate("aws.a", "aws", 2, type="X86_64", max=5, rank=0),
                HostTemplate("aws.b", "aws", 2, type="ARM64", max=5, rank=1),
            )
        ),
    ),
    [
        (JobSpec(id=1), Req(select="type==ARM64")),
        (JobSpec(id=2), Req()),
        (JobSpec(id=3, n=2), Req(select="type==X86_64", span_hosts1=True)),
    ],
    closed=("h01",),
)


@PROPS
@given(worlds("demand"))
@example(IN_FLIGHT_SWITCH)
def test_demand_in_flight_is_not_requested_again(world: World) -> None:
    """Mark the demanded hosts and tokens as in flight (and the runtime allowance and
    headroom as spent): the next session asks for no new host and no token, and
    waits for the in-flight supply with the same jobs.

    With hosts in flight for one template at most: in-flight hosts of any template
    come before new ones (issue 18), so once hosts of a better-ranked template are in
    flight for jobs behind it, a job may move there from a worse-ranked template's
    in-flight hosts and displace them (the scheduler does not read which job a host
    was requested for; see the closing note of issue 18)."""
    _state, first = session(world)
    in_flight: dict[str, int] = {}
    allowance: dict[str, int] = {}
    for hd in first.demand.hosts:
        in_flight[hd.template] = world.in_flight.get(hd.template, 0) + hd.count
        if hd.template in world.allowance:
            allowance[hd.template] = max(0, world.allowance[hd.template] - hd.count)
    assume(sum(1 for count in {**world.in_flight, **in_flight}.values() if count > 0) <= 1)
    tokens: dict[str, float] = {}
    headroom: dict[str, float] = {}
    for rd in first.demand.resources:
        key = world.pool_of_label(rd.resource)
        tokens[rd.resource] = world.tokens_in_flight.get(key, 0.0) + rd.amount
        if key in world.headroom:
            headroom[rd.resource] = max(0.0, world.headroom[key] - rd.amount)
    supply = SupplyChanged(
        in_flight=in_flight,
        allowance=allowance,
        tokens_in_flight=tokens,
        headroom=headroom,
        time=world.now + 1,
    )
    _state2, second = session(world, [supply], world.now + LATER)
    assert [d.job for d in second.dispatch] == [d.job for d in first.dispatch]
    for hd in second.demand.hosts:
        assert hd.count == 0, (hd, first.demand.hosts)
    for rd in second.demand.resources:
        assert rd.amount <= EPS, (rd, first.demand.resources)
    assert demand_jobs(second) == demand_jobs(first), (first.demand, second.demand)


# ----------------------------------------------------------------------------- 10


@PROPS
@given(worlds("demand"))
def test_demand_is_deterministic(world: World) -> None:
    """The whole result, demand, surplus and idle supply included, is the same on two
    identical states and when a state is run twice."""
    state_a, first = session(world)
    _state_b, second = session(world)
    again = run_session(state_a, world.now)
    assert comparable(first) == comparable(second)
    assert comparable(first) == comparable(again)
    assert first.demand == second.demand == again.demand
    # Pend groups and decision traces too: the second session on a state reuses the
    # trace entries kept with each bucket and must read exactly as the first.
    assert explained(first) == explained(second) == explained(again)


@PROPS
@given(worlds("demand"))
def test_a_session_after_jobs_left_explains_as_a_fresh_state_does(world: World) -> None:
    """Trace entries kept with a bucket name the job they were made for: once the
    first pending jobs have left, the next session names the new first jobs, exactly
    as a state that never ran a session does."""
    state, _first = session(world)
    pending = world.pending_ids()
    leaving: list[Event] = [JobKilled(job=job, time=world.now) for job in pending[::2]]
    for event in leaving:
        state.apply(event)
    after = run_session(state, world.now + LATER)
    _fresh_state, fresh = session(world, leaving, world.now + LATER)
    assert explained(after) == explained(fresh)


def explained(result: SessionResult) -> list[tuple[str, str, list[int], list[TraceEntry]]]:
    """Each pend group: reason, kind, jobs and the trace entries of its evaluation."""
    return [
        (g.reason, g.kind, g.jobs, [result.trace[i] for i in g.trace]) for g in result.pending
    ]


@PROPS
@given(worlds("demand"))
def test_pend_groups_are_the_same_however_they_are_built(world: World) -> None:
    """When every bucket the real pass settled has one outcome for all its jobs, the
    pend groups are made one per bucket without merging; they must equal the groups
    the merging path makes from the same outcomes."""
    state = world.state()
    cap = Capacity(state)
    trace: list[TraceEntry] = []
    real = RealPass(state, cap, trace, world.now)
    real.run()
    catalog = CatalogPass(
        state, cap, real.evaluator, trace, world.now, real.holds, real.ensure_plan
    )
    outcomes = catalog.run(real.settled)
    direct = pend_groups(catalog, outcomes)
    catalog.one_each = False  # force the merging path
    merged = pend_groups(catalog, outcomes)
    assert [(g.reason, g.kind, g.jobs, g.trace) for g in direct] == [
        (g.reason, g.kind, g.jobs, g.trace) for g in merged
    ]
