"""Hypothesis strategies for small XCE clusters, and an independent model of them.

`worlds()` draws a whole scheduler situation (configuration, runtime host facts, jobs,
some of them already running, supply facts) as plain data plus the events that build
it. `Model` recomputes usage, limit counters and feasibility from that plain data and
from dispatches, *without* reading the scheduler's own counters, so the property tests
can check the scheduler against docs/scheduling.md.

Requirement strings are generated from a small structured vocabulary (`Req`), so the
checker evaluates `select[]`, `rusage[]` and `span[]` from the structure, not from the
scheduler's parser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from itertools import product
from typing import Any

import msgspec
from hypothesis import strategies as st

from xce.model.cluster import (
    CHOOSE_RULES,
    Catalog,
    ClusterConfig,
    Countable,
    HostSpec,
    HostTemplate,
    Limit,
    Queue,
    ResourceDef,
    SharedPool,
)
from xce.model.events import (
    ConfigLoaded,
    Event,
    HostAdded,
    HostStateChanged,
    JobStarted,
    JobSubmitted,
    SupplyChanged,
)
from xce.model.jobs import JobSpec
from xce.sched.state import SchedulerState

USERS = ("alice", "bob", "carol")
TYPES = ("X86_64", "ARM64")
TEMPLATE_NAMES = ("aws.a", "aws.b", "gcp.c")
SHARED_NAMES = ("vcs", "lic")
NOW = 1000.0

# ----------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class Shape:
    """What `select[]` and `rusage[]` see of a host or a template."""

    name: str
    slots: int
    type: str
    resources: dict[str, float | bool]

    def amount(self, res: str) -> float:
        """Configured amount of a per-host consumable (0 when absent)."""
        value = self.resources.get(res, 0)
        return 0.0 if isinstance(value, bool) else float(value)


@dataclass(frozen=True)
class HostFact:
    shape: Shape
    template: str | None  # None: static host
    state: str  # ok, closed, unavail

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def open(self) -> bool:
        return self.state == "ok"


# Select vocabulary: text -> predicate over a Shape (docs/scheduling.md, "select":
# configured values; a host lacking a resource fails every comparison on it;
# `select[ssd]` means the boolean is true).
def _num(shape: Shape, res: str) -> float | None:
    value = shape.resources.get(res)
    if value is None or isinstance(value, bool):
        return None
    return float(value)


def _ssd(shape: Shape) -> bool:
    return shape.resources.get("ssd") is True


SELECTS: dict[str, Callable[[Shape], bool]] = {
    "type==X86_64": lambda s: s.type == "X86_64",
    "type==ARM64": lambda s: s.type == "ARM64",
    "type==any": lambda s: True,
    "ssd": _ssd,
    "!ssd": lambda s: not _ssd(s),
    "mem>=4000": lambda s: (m := _num(s, "mem")) is not None and m >= 4000,
    "mem>=16000": lambda s: (m := _num(s, "mem")) is not None and m >= 16000,
    "slots>=4": lambda s: s.slots >= 4,
    "gpu>0": lambda s: (g := _num(s, "gpu")) is not None and g > 0,
    "hname!=h01": lambda s: s.name != "h01",
    "type==X86_64 && mem>=8000": lambda s: (
        s.type == "X86_64" and (m := _num(s, "mem")) is not None and m >= 8000
    ),
    "ssd || slots>=6": lambda s: _ssd(s) or s.slots >= 6,
}
ORDERS = ("-slots", "slots", "mem", "-mem", "-slots:mem")


@dataclass(frozen=True)
class Req:
    """A requirement string built from the vocabulary above."""

    select: str | None = None
    rusage: tuple[tuple[str, float], ...] = ()
    span_hosts1: bool = False
    ptile: int | None = None
    order: str | None = None

    def text(self) -> str:
        parts = []
        if self.select is not None:
            parts.append(f"select[{self.select}]")
        if self.rusage:
            parts.append("rusage[" + ":".join(f"{r}={a:g}" for r, a in self.rusage) + "]")
        if self.span_hosts1:
            parts.append("span[hosts=1]")
        elif self.ptile is not None:
            parts.append(f"span[ptile={self.ptile}]")
        if self.order is not None:
            parts.append(f"order[{self.order}]")
        return " ".join(parts)

    def selects(self, shape: Shape) -> bool:
        return self.select is None or SELECTS[self.select](shape)

    def per_slot(self) -> list[tuple[str, float]]:
        return [(r, a) for r, a in self.rusage if r not in SHARED_NAMES]

    def shared(self) -> list[tuple[str, float]]:
        return [(r, a) for r, a in self.rusage if r in SHARED_NAMES]

    def single_host(self, n: int) -> bool:
        return self.span_hosts1 or n == 1 or (self.ptile is not None and self.ptile >= n)


# ----------------------------------------------------------------------------- patterns


def patterns_match(patterns: tuple[str, ...] | None, host: HostFact) -> bool:
    """Queue/pool host lists (docs/scheduling.md, "Host lists")."""
    if patterns is None:
        return True
    if host.template is None:
        return "all" in patterns or host.name in patterns
    return template_in(patterns, host.template)


def template_in(patterns: tuple[str, ...] | None, template: str) -> bool:
    if patterns is None:
        return True
    return any(p.startswith("template:") and fnmatchcase(template, p[9:]) for p in patterns)


def limit_counter(limit: Limit, user: str, queue: str) -> tuple[str, str] | None:
    """The counter of `limit` a job of (user, queue) uses (docs, section 3)."""
    if limit.users is None:
        u = ""
    elif limit.users == "each":
        u = user
    elif user in limit.users:
        u = ""
    else:
        return None
    if limit.queues is None:
        q = ""
    elif limit.queues == "each":
        q = queue
    elif queue in limit.queues:
        q = ""
    else:
        return None
    return (u, q)


# ----------------------------------------------------------------------------- world


@dataclass
class World:
    config: ClusterConfig
    hosts: dict[str, HostFact]  # static and provisioned hosts, by name
    jobs: dict[int, JobSpec]  # every submitted job (queue filled in)
    reqs: dict[int, Req]
    running: dict[int, tuple[dict[str, int], dict[str, str]]]  # id -> (hosts, pools)
    in_flight: dict[str, int]
    allowance: dict[str, int]  # runtime overrides
    tokens_in_flight: dict[tuple[str, str], float]  # (res, pool) -> tokens
    borrowed: dict[tuple[str, str], float]
    headroom: dict[tuple[str, str], float]  # runtime overrides
    events: list[Event] = field(default_factory=list)
    now: float = NOW

    # ------------------------------------------------------------------ building
    def state(self, extra: Sequence[Event] | None = None) -> SchedulerState:
        state = SchedulerState()
        state.apply_all(self.events)
        for event in extra or ():
            state.apply(event)
        return state

    # ------------------------------------------------------------------ lookups
    def queue(self, name: str) -> Queue:
        return next(q for q in self.config.queues if q.name == name)

    def template(self, name: str) -> HostTemplate:
        return next(t for t in self.config.catalog.templates if t.name == name)

    def pools(self, res: str) -> tuple[SharedPool, ...]:
        return self.config.shared[res]

    def pool(self, res: str, name: str) -> SharedPool:
        return next(p for p in self.pools(res) if p.pool == name)

    def label(self, res: str, pool: str) -> str:
        return res if len(self.pools(res)) == 1 else f"{res}/{pool}"

    def pool_of_label(self, label: str) -> tuple[str, str]:
        res, _, pool = label.partition("/")
        return (res, pool or self.pools(res)[0].pool)

    def countable(self, res: str, pool: str) -> Countable | None:
        single = len(self.pools(res)) == 1
        for c in self.config.catalog.countables:
            if c.resource == res and (c.pool == pool or (c.pool is None and single)):
                return c
        return None

    def sort_key(self, job: int) -> tuple[int, int, float, int]:
        spec = self.jobs[job]
        return (-self.queue(spec.queue).priority, -spec.priority, spec.submit, spec.id)

    def pending_ids(self) -> list[int]:
        return [j for j in self.jobs if j not in self.running]

    def present(self, template: str) -> int:
        return sum(1 for h in self.hosts.values() if h.template == template)

    def template_allowance(self, name: str) -> int:
        """New hosts a template allows this session (docs, section 4)."""
        t = self.template(name)
        allowance = t.max - self.present(name) - self.in_flight.get(name, 0)
        if name in self.allowance:
            allowance = min(allowance, self.allowance[name])
        return max(0, allowance)

    def pool_headroom(self, res: str, pool: str) -> float:
        c = self.countable(res, pool)
        if c is None:
            return 0.0
        if (res, pool) in self.headroom:
            return max(0.0, self.headroom[(res, pool)])
        return max(
            0.0,
            c.max_borrow
            - self.borrowed.get((res, pool), 0.0)
            - self.tokens_in_flight.get((res, pool), 0.0),
        )

    def template_shape(self, name: str, host_name: str) -> Shape:
        t = self.template(name)
        return Shape(host_name, t.slots, t.type, dict(t.resources))


class Model:
    """Usage recomputed from jobs' specs: running jobs plus whatever is started here."""

    def __init__(self, world: World, hosts: dict[str, HostFact] | None = None) -> None:
        self.world = world
        self.hosts = dict(hosts if hosts is not None else world.hosts)
        self.used_slots: dict[str, int] = {h: 0 for h in self.hosts}
        self.used_res: dict[tuple[str, str], float] = {}
        self.pool_used: dict[tuple[str, str], float] = {}
        self.pool_total: dict[tuple[str, str], float] = {
            (p.resource, p.pool): p.total + world.borrowed.get((p.resource, p.pool), 0.0)
            for pools in world.config.shared.values()
            for p in pools
        }
        self.limits: dict[tuple[int, tuple[str, str]], list[int]] = {}
        for job, (placed, chosen) in world.running.items():
            self.start(job, placed, chosen)

    def count_limits(self, job: int) -> None:
        """Count a job against its limits only (a placement on virtual supply)."""
        self.start(job, {}, {}, virtual_slots=self.world.jobs[job].n)

    def start(
        self,
        job: int,
        hosts: dict[str, int],
        pools: dict[str, str],
        virtual_slots: int | None = None,
    ) -> None:
        spec, req = self.world.jobs[job], self.world.reqs[job]
        for name, on_host in hosts.items():
            self.used_slots[name] = self.used_slots.get(name, 0) + on_host
            for res, amount in req.per_slot():
                key = (name, res)
                self.used_res[key] = self.used_res.get(key, 0.0) + amount * on_host
        for res, amount in req.shared():
            if res in pools:
                key = (res, pools[res])
                self.pool_used[key] = self.pool_used.get(key, 0.0) + amount
        for index, limit in enumerate(self.world.config.limits):
            counter = limit_counter(limit, spec.user, spec.queue)
            if counter is not None:
                c = self.limits.setdefault((index, counter), [0, 0])
                c[0] += sum(hosts.values()) if virtual_slots is None else virtual_slots
                c[1] += 1

    def hold(self, job: int, hosts: dict[str, int]) -> None:
        """`job` holds `hosts` (joined hosts kept for it while the rest of its supply
        comes, sched/holds.py): later jobs cannot use them for ever after (no limits
        count it: it is not running)."""
        req = self.world.reqs[job]
        for name, on_host in hosts.items():
            self.used_slots[name] = self.used_slots.get(name, 0) + on_host
            for res, amount in req.per_slot():
                key = (name, res)
                self.used_res[key] = self.used_res.get(key, 0.0) + amount * on_host

    # ------------------------------------------------------------------ queries
    def free_slots(self, name: str) -> int:
        return self.hosts[name].shape.slots - self.used_slots.get(name, 0)

    def free_res(self, name: str, res: str) -> float:
        return self.hosts[name].shape.amount(res) - self.used_res.get((name, res), 0.0)

    def usable(self, name: str, req: Req) -> int:
        """How many slots of a job with `req` fit on host `name` now."""
        slots = self.free_slots(name)
        for res, amount in req.per_slot():
            slots = min(slots, int((self.free_res(name, res) + 1e-9) // amount))
        return max(0, slots)

    def pool_free(self, res: str, pool: str) -> float:
        return self.pool_total[(res, pool)] - self.pool_used.get((res, pool), 0.0)

    def limit_blocked(self, job: int) -> bool:
        spec = self.world.jobs[job]
        for index, limit in enumerate(self.world.config.limits):
            counter = limit_counter(limit, spec.user, spec.queue)
            if counter is None:
                continue
            slots, jobs = self.limits.get((index, counter), [0, 0])
            if limit.slots is not None and slots + spec.n > limit.slots:
                return True
            if limit.jobs is not None and jobs + 1 > limit.jobs:
                return True
        return False

    def eligible(self, job: int) -> list[str]:
        """Open hosts the job's queue may use that satisfy its select."""
        spec, req = self.world.jobs[job], self.world.reqs[job]
        queue = self.world.queue(spec.queue)
        return [
            name
            for name, h in self.hosts.items()
            if h.open and patterns_match(queue.hosts, h) and req.selects(h.shape)
        ]

    def placement_exists(self, job: int) -> bool:
        """Exhaustively: is there any pool choice and host split that fits the job now?"""
        spec, req = self.world.jobs[job], self.world.reqs[job]
        hosts = self.eligible(job)
        shared = req.shared()
        choices = [
            [p for p in self.world.pools(res) if self.pool_free(res, p.pool) + 1e-9 >= amount]
            for res, amount in shared
        ]
        for combo in product(*choices):
            allowed = [
                h for h in hosts if all(patterns_match(p.hosts, self.hosts[h]) for p in combo)
            ]
            caps = tuple(self.usable(h, req) for h in allowed)
            if split_exists(caps, spec.n, req.span_hosts1, req.ptile):
                return True
        return False


def split_exists(caps: tuple[int, ...], n: int, hosts1: bool, ptile: int | None) -> bool:
    """Exhaustive search: can `n` slots be split over hosts with room `caps` under the
    span rule? (no span: any split; hosts=1: one host; ptile=N: hosts with exactly N,
    at most one, the last, with the remainder)."""
    caps = tuple(sorted((c for c in caps if c > 0), reverse=True))
    if hosts1 or n == 1 or (ptile is not None and ptile >= n):
        return any(c >= n for c in caps)
    if ptile is None:
        return _any_split(caps, n)
    full, rest = divmod(n, ptile)
    return _ptile_split(caps, full, rest, ptile)


@lru_cache(maxsize=100_000)
def _any_split(caps: tuple[int, ...], left: int) -> bool:
    if left == 0:
        return True
    if not caps:
        return False
    head, tail = caps[0], caps[1:]
    return any(_any_split(tail, left - take) for take in range(min(head, left), -1, -1))


@lru_cache(maxsize=100_000)
def _ptile_split(caps: tuple[int, ...], full: int, rest: int, ptile: int) -> bool:
    if full == 0 and rest == 0:
        return True
    if not caps:
        return False
    head, tail = caps[0], caps[1:]
    if full and head >= ptile and _ptile_split(tail, full - 1, rest, ptile):
        return True
    if rest and head >= rest and _ptile_split(tail, full, 0, ptile):
        return True
    return _ptile_split(tail, full, rest, ptile)


# ----------------------------------------------------------------------------- strategies
# Strategies are module constants (building them inside draws is slow), and
# collections are drawn with st.lists so that the shrinker can delete hosts and jobs.
# Choices are ordered so that shrinking goes towards the plain case (host open, job
# neither held nor running, no select/rusage/span).

RESOURCES = st.tuples(
    st.sampled_from([16000, 8000, None, 32000, 4000, 2000, 0]),  # mem
    st.sampled_from([None, None, 0, 1, 2]),  # gpu
    st.sampled_from([None, True, False]),  # ssd
)


def _resources(drawn: tuple[Any, Any, Any]) -> dict[str, float | bool]:
    mem, gpu, ssd = drawn
    res: dict[str, float | bool] = {}
    if mem is not None:
        res["mem"] = float(mem)
    if gpu is not None:
        res["gpu"] = float(gpu)
    if ssd is not None:
        res["ssd"] = ssd
    return res


HOSTS = st.lists(
    st.tuples(
        st.sampled_from([4, 8, 2, 6, 1, 3, 5, 7]),  # slots
        st.sampled_from(TYPES),
        RESOURCES,
        st.sampled_from(["ok", "ok", "ok", "closed", "unavail"]),
    ),
    min_size=1,
    max_size=8,
)
TEMPLATE = st.tuples(
    st.integers(1, 16),  # slots
    st.sampled_from(TYPES),
    RESOURCES,
    st.integers(0, 5),  # max
    st.integers(0, 3),  # rank
    st.integers(0, 2),  # provisioned hosts present
    st.sampled_from(["ok", "ok", "closed"]),  # their state
    st.integers(0, 2),  # in flight
    st.one_of(st.none(), st.none(), st.none(), st.integers(0, 3)),  # runtime allowance
)
SELECT = st.one_of(st.none(), st.sampled_from(sorted(SELECTS)))
REQ_PARTS = st.tuples(
    SELECT,
    st.sampled_from([None, None, None, 500, 1000, 2000, 4000]),  # mem per slot
    st.integers(0, 7),  # gpu=1 when 5
    st.sampled_from([None, None, 1, 2]),  # first shared resource
    st.sampled_from([None, None, None, 1]),  # second shared resource
    st.sampled_from(["none", "none", "hosts1", "ptile", "ptile"]),
    st.integers(1, 4),  # ptile
    st.one_of(st.none(), st.none(), st.sampled_from(ORDERS)),
)


def make_req(parts: tuple[Any, ...], shared: tuple[str, ...]) -> Req:
    select, mem, gpu, s1, s2, span, ptile, order = parts
    rusage: list[tuple[str, float]] = []
    if mem is not None:
        rusage.append(("mem", float(mem)))
    if gpu == 5:
        rusage.append(("gpu", 1.0))
    for res, amount in zip(shared, (s1, s2), strict=False):
        if amount is not None:
            rusage.append((res, float(amount)))
    return Req(select, tuple(rusage), span == "hosts1", ptile if span == "ptile" else None, order)


POOLS = st.tuples(
    st.booleans(),  # shorthand pool (else two pools, site and cloud)
    st.sampled_from([2, 4, 1, 0, 3, 6]),  # total (site)
    st.sampled_from([2, 4, 1, 0, 3, 6]),  # total (cloud)
    st.one_of(st.none(), st.lists(st.integers(0, 7), min_size=1, max_size=3)),  # site hosts
    st.sampled_from([("template:aws.*",), ("template:*",), ("all", "template:*")]),
    st.booleans(),  # cloud pool first
    st.integers(0, 2),  # countable: none, on site/default, on cloud
    st.integers(0, 4),  # max_borrow
    st.integers(0, 2),  # tokens in flight
    st.integers(0, 2),  # borrowed
    st.one_of(st.none(), st.none(), st.none(), st.integers(0, 3)),  # runtime headroom
)
QUEUES = st.lists(
    st.tuples(
        st.integers(0, 3),  # priority
        st.one_of(st.none(), st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True)),
    ),
    min_size=1,
    max_size=3,
)
LIMITS: st.SearchStrategy[list[Any]] = st.one_of(
    st.just([]),
    st.lists(
        st.tuples(
            st.sampled_from([None, 12, 8, 16, 24, 4, 2, 0]),  # slots
            st.sampled_from([None, None, None, 4, 8, 2, 1, 0]),  # jobs
            st.one_of(
                st.none(),
                st.just("each"),
                st.lists(st.sampled_from(USERS), min_size=1, unique=True),
            ),
            st.one_of(
                st.none(), st.just("each"), st.lists(st.integers(0, 2), min_size=1, unique=True)
            ),
        ),
        min_size=1,
        max_size=3,
    ),
)
# "Limits" worlds: always some limits, with small values that jobs reach exactly.
TIGHT_LIMITS = st.lists(
    st.tuples(
        st.sampled_from([None, 2, 3, 4, 6, 8, 1, 5]),  # slots
        st.sampled_from([None, None, 1, 2, 3]),  # jobs
        st.one_of(
            st.none(), st.just("each"), st.lists(st.sampled_from(USERS), min_size=1, unique=True)
        ),
        st.one_of(st.none(), st.just("each"), st.lists(st.integers(0, 2), min_size=1, unique=True)),
    ),
    min_size=1,
    max_size=3,
)
LIMITS_CLASSES = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from([1, 2, 3, 1, 4]), REQ_PARTS),
    min_size=1,
    max_size=5,
)
CLASSES = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 6), REQ_PARTS), min_size=1, max_size=5
)

# "Tight" worlds stress placement: small hosts, multi-slot jobs, span[ptile] with a
# remainder, packing orders and per-slot memory, so free capacity gets fragmented.
TIGHT_HOSTS = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 3, 4, 2, 3]),
        st.sampled_from(TYPES),
        st.tuples(
            st.sampled_from([None, 1000, 2000, 4000, 8000]),
            st.sampled_from([None, 1, 2]),
            st.sampled_from([None, True, False]),
        ),
        st.sampled_from(["ok", "ok", "ok", "ok", "closed"]),
    ),
    min_size=2,
    max_size=8,
)
TIGHT_REQ_PARTS = st.tuples(
    st.one_of(st.none(), st.none(), st.none(), st.sampled_from(sorted(SELECTS))),
    st.sampled_from([None, 1000, 2000]),
    st.integers(0, 5),
    st.sampled_from([None, None, None, 1]),
    st.sampled_from([None, None, None, 1]),
    st.sampled_from(["none", "hosts1", "ptile", "ptile", "ptile", "ptile"]),
    st.integers(2, 4),
    st.sampled_from([None, "-slots", "-slots", "-slots", "mem", "-mem", "slots"]),
)
TIGHT_CLASSES = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from([3, 5, 4, 5, 6, 2]), TIGHT_REQ_PARTS),
    min_size=1,
    max_size=4,
)
JOB = st.tuples(
    st.integers(0, 4),  # requirement class
    st.sampled_from(USERS),
    st.sampled_from([0, 10, 20, 30]),  # submit
    st.sampled_from([0, 0, 1]),  # priority
    st.integers(0, 12),  # held when 12
    st.integers(0, 6),  # running when 6
    st.integers(0, 15),  # running: first host tried
    st.integers(0, 900),  # running: start time
)
# Mostly many jobs (st.lists alone averages only a handful); the first branch is
# what the shrinker aims for.
JOBS = st.one_of(st.lists(JOB, min_size=1, max_size=40), st.lists(JOB, min_size=12, max_size=40))
MANY_JOBS = st.lists(JOB, min_size=6, max_size=40)

# "Demand" worlds: few, small static hosts and roomy templates, so that jobs overflow
# to the catalog.
DEMAND_HOSTS = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 4, 3]),
        st.sampled_from(TYPES),
        RESOURCES,
        st.sampled_from(["ok", "ok", "ok", "closed"]),
    ),
    min_size=1,
    max_size=4,
)
DEMAND_TEMPLATE = st.tuples(
    st.sampled_from([4, 2, 8, 16, 1, 3, 6]),  # slots
    st.sampled_from(TYPES),
    st.tuples(
        st.sampled_from([16000, 32000, 64000, None, 4000]),
        st.sampled_from([None, 2, 4]),
        st.sampled_from([None, True, False]),
    ),
    st.sampled_from([4, 8, 2, 6, 1, 0]),  # max
    st.integers(0, 3),  # rank
    st.integers(0, 2),  # provisioned hosts present
    st.sampled_from(["ok", "ok", "closed"]),  # their state
    st.integers(0, 2),  # in flight
    st.one_of(st.none(), st.none(), st.none(), st.integers(0, 4)),  # runtime allowance
)
DEMAND_REQ_PARTS = st.tuples(
    st.sampled_from([None, "type==X86_64", "type==ARM64", None, "mem>=16000", "ssd", "!ssd"]),
    st.sampled_from([None, None, 1000, 4000, 8000]),
    st.integers(0, 5),
    st.sampled_from([None, None, None, 1, 2]),
    st.sampled_from([None, None, None, 1]),
    st.sampled_from(["none", "hosts1", "hosts1", "ptile"]),
    st.integers(1, 4),
    st.one_of(st.none(), st.none(), st.sampled_from(ORDERS)),
)
DEMAND_CLASSES = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from([1, 2, 4, 3, 1, 8]), DEMAND_REQ_PARTS),
    min_size=1,
    max_size=5,
)
DEMAND_QUEUES = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.one_of(
            st.none(),
            st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True).map(
                lambda hosts: [*hosts, 99]  # 99: template:* (see worlds)
            ),
        ),
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def worlds(draw: Any, flavor: str = "general", min_templates: int = 0) -> World:
    """A world; `flavor` "tight" stresses placement (no limits), "demand" the catalog
    pass (at least one template, jobs overflowing the static hosts), "limits" the
    limits (always some, small, and many small jobs)."""
    if flavor == "demand":
        min_templates = max(min_templates, 1)
    max_templates = 3
    shared = SHARED_NAMES[: draw(st.integers(0, 2))]
    resources = {
        "mem": ResourceDef("mem", "numeric", consumable=True),
        "gpu": ResourceDef("gpu", "numeric", consumable=True),
        "ssd": ResourceDef("ssd", "boolean"),
        **{s: ResourceDef(s, "numeric", consumable=True, shared=True) for s in shared},
    }

    host_rows = draw({"tight": TIGHT_HOSTS, "demand": DEMAND_HOSTS}.get(flavor, HOSTS))
    static = [
        HostSpec(name=f"h{i + 1:02d}", slots=slots, type=type_, resources=_resources(res))
        for i, (slots, type_, res, _state) in enumerate(host_rows)
    ]
    static_names = [h.name for h in static]

    n_templates = draw(
        st.sampled_from([2, 3, 1])
        if flavor == "demand"
        else st.integers(min_templates, max_templates)
    )
    template_names = sorted(draw(st.permutations(TEMPLATE_NAMES))[:n_templates])
    template_rows = [
        draw(DEMAND_TEMPLATE if flavor == "demand" else TEMPLATE) for _ in template_names
    ]
    templates = tuple(
        HostTemplate(
            name=name,
            provider=name.split(".")[0],
            slots=row[0],
            type=row[1],
            resources=_resources(row[2]),
            max=row[3],
            rank=row[4],
        )
        for name, row in zip(template_names, template_rows, strict=True)
    )

    pools: dict[str, tuple[SharedPool, ...]] = {}
    countables: list[Countable] = []
    token_rows: dict[str, tuple[str, tuple[Any, ...]]] = {}
    for res in shared:
        row = draw(POOLS)
        shorthand, site_total, cloud_total, site_hosts, cloud_hosts, cloud_first = row[:6]
        which, max_borrow = row[6], row[7]
        if shorthand:
            pools[res] = (SharedPool(res, "default", float(site_total)),)
            names = ["default", "default"]
        else:
            site = (
                ("all",)
                if site_hosts is None
                else tuple(dict.fromkeys(static_names[i % len(static_names)] for i in site_hosts))
            )
            two = [
                SharedPool(res, "site", float(site_total), site),
                SharedPool(res, "cloud", float(cloud_total), cloud_hosts),
            ]
            if cloud_first:
                two.reverse()
            pools[res] = tuple(two)
            names = ["site", "cloud"]
        if which:
            pool = names[which - 1]
            countables.append(Countable(res, None if shorthand else pool, float(max_borrow)))
            token_rows[res] = (pool, row[8:])

    queue_rows = draw(DEMAND_QUEUES if flavor == "demand" else QUEUES)
    patterns = [*static_names, "all", "template:aws.*", "template:gcp.c", "template:*"]
    queues = tuple(
        Queue(
            name=f"q{i + 1}",
            priority=priority,
            hosts=None
            if hosts is None
            else tuple(
                dict.fromkeys(
                    "template:*" if h == 99 else patterns[h % len(patterns)] for h in hosts
                )
            ),
        )
        for i, (priority, hosts) in enumerate(queue_rows)
    )
    queue_names = [q.name for q in queues]

    limits: list[Limit] = []
    limit_rows: list[Any] = draw(
        {"tight": st.just([]), "limits": TIGHT_LIMITS, "demand": LIMITS}.get(flavor, LIMITS)
    )
    for i, (slots, max_jobs, users, queue_dim) in enumerate(limit_rows):
        if slots is None and max_jobs is None:
            slots = 12
        limits.append(
            Limit(
                f"L{i}",
                slots,
                max_jobs,
                users if users is None or users == "each" else tuple(users),
                queue_dim
                if queue_dim is None or queue_dim == "each"
                else tuple(dict.fromkeys(queue_names[q % len(queue_names)] for q in queue_dim)),
            )
        )

    max_jobs = draw(st.sampled_from([10000, 10000, 10000, 10000, 3]))
    # Where new hosts come from (issue 20): every rule, with prices (drawn last, so
    # that the rest of a world is drawn as before).
    choose = draw(st.sampled_from(CHOOSE_RULES))
    templates = tuple(
        msgspec.structs.replace(t, price=draw(st.sampled_from([0.0, 1.0, 2.0, 3.5])))
        for t in templates
    )
    config = ClusterConfig(
        cluster="prop",
        resources=resources,
        hosts=tuple(static),
        shared=pools,
        queues=queues,
        limits=tuple(limits),
        catalog=Catalog(
            idle_time=600,
            max_jobs_per_session=max_jobs,
            templates=templates,
            countables=tuple(countables),
            choose=choose,
        ),
    )
    events: list[Event] = [ConfigLoaded(config=config)]

    # Runtime host facts: provisioned hosts and closed hosts.
    hosts: dict[str, HostFact] = {}
    for host_spec, row in zip(static, host_rows, strict=True):
        hosts[host_spec.name] = HostFact(
            Shape(host_spec.name, host_spec.slots, host_spec.type, dict(host_spec.resources)),
            None,
            row[3],
        )
        if row[3] != "ok":
            events.append(HostStateChanged(name=host_spec.name, state=row[3]))
    for t, row in zip(templates, template_rows, strict=True):
        for k in range(row[5]):
            name = f"{t.name}-p{k}"
            hosts[name] = HostFact(Shape(name, t.slots, t.type, dict(t.resources)), t.name, row[6])
            events.append(
                HostAdded(
                    name=name,
                    slots=t.slots,
                    type=t.type,
                    model=t.model,
                    resources=dict(t.resources),
                    template=t.name,
                    state=row[6],
                    time=0,
                    idle_since=float(100 * k),
                )
            )

    # Jobs: a few requirement classes shared by many jobs, so that buckets form.
    classes = [
        (queue_names[q % len(queue_names)], n, make_req(parts, shared))
        for q, n, parts in draw(
            {"tight": TIGHT_CLASSES, "demand": DEMAND_CLASSES, "limits": LIMITS_CLASSES}.get(
                flavor, CLASSES
            )
        )
    ]
    job_rows = draw(JOBS if flavor == "general" else MANY_JOBS)
    jobs: dict[int, JobSpec] = {}
    job_reqs: dict[int, Req] = {}
    for job_id, row in enumerate(job_rows, start=1):
        queue, n, req = classes[row[0] % len(classes)]
        spec = JobSpec(
            id=job_id,
            user=row[1],
            queue=queue,
            n=n,
            res=req.text(),
            submit=float(row[2]),
            priority=row[3],
            hold=row[4] == 12,
        )
        jobs[job_id] = spec
        job_reqs[job_id] = req
        events.append(JobSubmitted(job=spec))

    world = World(
        config=config,
        hosts=hosts,
        jobs=jobs,
        reqs=job_reqs,
        running={},
        in_flight={},
        allowance={},
        tokens_in_flight={},
        borrowed={},
        headroom={},
        events=events,
    )

    # Supply facts (before starting jobs: borrowed tokens add to pool totals).
    for t, row in zip(templates, template_rows, strict=True):
        world.in_flight[t.name] = row[7]
        if row[8] is not None:
            world.allowance[t.name] = row[8]
    tif: dict[str, float] = {}
    borrowed: dict[str, float] = {}
    headroom: dict[str, float] = {}
    for res, (pool, (t_in_flight, t_borrowed, t_headroom)) in token_rows.items():
        label = world.label(res, pool)
        tif[label] = world.tokens_in_flight[(res, pool)] = float(t_in_flight)
        borrowed[label] = world.borrowed[(res, pool)] = float(t_borrowed)
        if t_headroom is not None:
            headroom[label] = world.headroom[(res, pool)] = float(t_headroom)
    events.append(
        SupplyChanged(
            in_flight=dict(world.in_flight),
            tokens_in_flight=tif,
            borrowed=borrowed,
            headroom=headroom,
            allowance=dict(world.allowance),
            time=0,
        )
    )

    # Some jobs already run: placed greedily from a drawn first host, anywhere they
    # fit (a running job may sit on a host closed since), tokens from a reaching pool.
    model = Model(world)
    host_names = sorted(hosts)
    for (job_id, spec), row in zip(jobs.items(), job_rows, strict=True):
        if spec.hold or row[5] != 6:
            continue
        req = job_reqs[job_id]
        first = row[6] % len(host_names)
        placed: dict[str, int] = {}
        left = spec.n
        for name in host_names[first:] + host_names[:first]:
            take = min(model.usable(name, req), left)
            if take > 0:
                placed[name] = take
                left -= take
            if left == 0:
                break
        if left:
            continue
        chosen: dict[str, str] = {}
        for res, amount in req.shared():
            for p in world.pools(res):
                if model.pool_free(res, p.pool) >= amount and all(
                    patterns_match(p.hosts, hosts[h]) for h in placed
                ):
                    chosen[res] = p.pool
                    break
        if len(chosen) != len(req.shared()):
            continue
        model.start(job_id, placed, chosen)
        world.running[job_id] = (placed, chosen)
        events.append(JobStarted(job=job_id, hosts=placed, pools=chosen, time=float(row[7])))
    return world


# ----------------------------------------------------------------------------- explicit worlds


def simple_world(
    config: ClusterConfig,
    jobs: list[tuple[JobSpec, Req]],
    closed: tuple[str, ...] = (),
    in_flight: dict[str, int] | None = None,
) -> World:
    """A world given by hand (for @example): static hosts, some closed, pending jobs
    (their `res` is taken from the Req), optional hosts in flight; nothing running."""
    events: list[Event] = [ConfigLoaded(config=config)]
    hosts = {
        h.name: HostFact(
            Shape(h.name, h.slots, h.type, dict(h.resources)),
            None,
            "closed" if h.name in closed else "ok",
        )
        for h in config.hosts
    }
    events += [HostStateChanged(name=name, state="closed") for name in closed]
    specs: dict[int, JobSpec] = {}
    reqs_: dict[int, Req] = {}
    for spec, req in jobs:
        spec = JobSpec(
            id=spec.id,
            user=spec.user,
            queue=spec.queue or config.queues[0].name,
            n=spec.n,
            res=req.text(),
            submit=spec.submit,
            priority=spec.priority,
        )
        specs[spec.id], reqs_[spec.id] = spec, req
        events.append(JobSubmitted(job=spec))
    if in_flight:
        events.append(SupplyChanged(in_flight=dict(in_flight)))
    return World(
        config=config,
        hosts=hosts,
        jobs=specs,
        reqs=reqs_,
        running={},
        in_flight=dict(in_flight or {}),
        allowance={},
        tokens_in_flight={},
        borrowed={},
        headroom={},
        events=events,
    )


# ----------------------------------------------------------------------------- helpers


def scheduling_order(world: World, jobs: list[int]) -> list[int]:
    return sorted(jobs, key=world.sort_key)


def comparable(result: Any) -> dict[str, Any]:
    """A session result as JSON without timing, plus the dispatches' pools and kinds."""
    obj = result.to_json_obj()
    obj["stats"] = {"pending": obj["stats"]["pending"]}
    obj["pools"] = [(d.job, dict(d.pools)) for d in result.dispatch]
    obj["kinds"] = sorted((j, g.kind) for g in result.pending for j in g.jobs)
    return obj
