"""Whether any configured host or template could ever run a job (issue 21, part 6).

One rule behind admission (a job that nothing here could ever run is refused at
submit: sched/admission.py) and behind jobs a configuration change made impossible
(they pend with NEVER_RUNS, are never tried on the catalog and make no demand: the
real pass settles their buckets before evaluating anything).

What could ever run a job: the configured static hosts (present or not: a host merely
down does not make a job impossible), the hosts present that are not static
(provisioned or joined), the templates that may ever have a host (`max` > 0, and not a
runtime allowance of 0 with none in flight), each within the job's queue host list,
satisfying its `select[]`, with its GPUs per host and room for its per-slot
consumables and span; and for each shared resource it asks for, a pool reaching them
whose ceiling (its total plus what may still be borrowed) covers the request.

A verdict is kept per requirement (queue, slots, requirement string, GPUs) until one
of those inputs changes (a new configuration, a runtime allowance or headroom, a
shared total, a non-static host joining or leaving): work done when the
configuration, the catalog or the host set changes, not per job nor per session.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, product
from typing import Final

from xce.model.cluster import HostTemplate
from xce.sched.buckets import Bucket
from xce.sched.capacity import EPSILON
from xce.sched.failure import Failure
from xce.sched.holds import shape_room
from xce.sched.hosts import HostRecord, pattern_matches, template_allowed
from xce.sched.pools import PoolRecord
from xce.sched.reasons import NEVER, NEVER_RUNS
from xce.sched.state import HostIndex, SchedulerState
from xce.sched.virtual import BEYOND_MAX, template_verdict, virtual_of

KEY: Final = ("ever",)  # where the state keeps the Universe (state.indexes)

VerdictKey = tuple[object, ...]  # a bucket's key but its run limit
Signature = tuple[int, tuple[bool, ...], tuple[float, ...]]
Hosts = list[tuple[HostRecord, int]]  # a host (or a shape's first host) and how many
Templates = list[tuple[HostTemplate, HostRecord]]  # a template and its virtual host


class Universe(HostIndex):
    """Every host and template that could ever run a job, and the verdicts made on
    them (kept with the state's derived indexes: a new configuration drops it)."""

    __slots__ = (
        "_groups", "_shapes", "config", "extra", "signature", "static", "static_names",
        "verdicts", "version",
    )

    def __init__(self, state: SchedulerState) -> None:
        config = self.config = state.config
        self.static = [
            HostRecord(-1, s.name, s.slots, s.type, s.model, s.resources, None, "ok", 0, s.gpus)
            for s in config.hosts
        ]
        self.static_names = {s.name for s in config.hosts}
        self.extra: dict[int, HostRecord] = {
            h.index: h for h in state.hosts if h is not None and h.name not in self.static_names
        }
        self.version = 0  # bumped when a non-static host joins or leaves
        # The hosts of each shape, in the order they came (static ones first), kept as
        # hosts come and go: elastic hosts join and leave all the time, and rebuilding
        # the shapes from every host at each change was 12 % of an elastic simulation
        # (bench_traces.py, HPC2N).
        self._shapes: dict[object, dict[int, HostRecord]] = {}
        for h in chain(self.static, self.extra.values()):
            self._shapes.setdefault(_shape(h), {})[id(h)] = h
        self._groups: Hosts | None = None
        self.signature: Signature | None = None
        self.verdicts: dict[VerdictKey, Failure | None] = {}

    def host_changed(self, host: HostRecord, present: bool) -> None:
        if host.name in self.static_names:
            return  # counted whether it is there or not, whatever its state
        if present:
            old = self.extra.get(host.index)
            if old is not host:
                if old is not None:
                    self._leave(old)
                self.extra[host.index] = host
                self._shapes.setdefault(_shape(host), {})[id(host)] = host
                self.version += 1
                self._groups = None
        else:
            old = self.extra.pop(host.index, None)
            if old is not None:
                self._leave(old)
                self.version += 1
                self._groups = None

    def _leave(self, host: HostRecord) -> None:
        key = _shape(host)
        members = self._shapes[key]
        del members[id(host)]
        if not members:
            del self._shapes[key]

    def refresh(self, state: SchedulerState) -> None:
        """Forget the verdicts if what they were made on changed (O(templates + pools))."""
        ranked, pools = state.ranked, state.pools  # (none: nothing to build, each session)
        signature = (
            self.version,
            tuple(usable(state, t) for t in ranked) if ranked else (),
            tuple(ceiling(p) for each in pools.values() for p in each) if pools else (),
        )
        if signature != self.signature:
            self.signature = signature
            self.verdicts = {}

    def hosts(self, named: bool) -> Hosts:
        """Every host, one by one when their names matter (`named`), else one per
        shape with how many have it."""
        if named:
            return [(h, 1) for h in chain(self.static, self.extra.values())]
        if self._groups is None:
            self._groups = [
                (next(iter(members.values())), len(members)) for members in self._shapes.values()
            ]
        return self._groups

    def never(self, state: SchedulerState, bucket: Bucket) -> Failure | None:
        """Why nothing here could ever run the bucket's jobs (a Failure of kind NEVER:
        its reason the pend reason, its detail what is missing), or None. Call
        `refresh` first (once per session is enough: `universe` does)."""
        verdicts = self.verdicts
        kept = bucket.ever  # (hot in simulations: asked of every bucket every session)
        if kept is not None and kept[0] is verdicts:  # (a new dict when they are forgotten)
            return kept[1]
        key = bucket.key[:3] + bucket.key[4:7]  # (its run limit and fairshare user aside)
        if key in verdicts:
            failure = verdicts[key]
        else:
            why = judge(self, state, bucket)
            failure = (
                None if why is None else Failure(NEVER, "never", f"{NEVER_RUNS}: {why}", why)
            )
            verdicts[key] = failure
        bucket.ever = (verdicts, failure)
        return failure


def _shape(host: HostRecord) -> object:
    """What makes hosts alike for the verdicts: their class and template."""
    return (host.class_key, host.template)


def universe(state: SchedulerState) -> Universe:
    """The state's Universe, made on first use, its verdicts current."""
    found = state.indexes.get(KEY)
    if not isinstance(found, Universe) or found.config is not state.config:
        found = Universe(state)
        state.indexes[KEY] = found
    found.refresh(state)
    return found


def usable(state: SchedulerState, template: HostTemplate) -> bool:
    """Whether a template may ever have a host: a `max` above 0 and not a runtime
    allowance of 0 with none of its hosts in flight."""
    name = template.name
    return template.max > 0 and (
        state.allowance.get(name) != 0 or state.in_flight.get(name, 0) > 0
    )


def ceiling(pool: PoolRecord) -> float:
    """The most a pool could ever have: its total plus what may still be borrowed."""
    return pool.base + pool.borrowed + pool.tokens_in_flight + pool.available_headroom()


def _named(patterns: tuple[str, ...] | None) -> bool:
    """Whether a host list names hosts (then hosts of one shape may differ)."""
    return patterns is not None and any(
        p != "all" and not p.startswith("template:") for p in patterns
    )


def judge(universe: Universe, state: SchedulerState, bucket: Bucket) -> str | None:
    """Why no host nor template could ever run a job of the bucket, or None; the
    checks narrow the hosts and templates in turn, and the first one that leaves
    none names what is missing."""
    queue, req, gpus = bucket.queue, bucket.req, bucket.gpus
    select = req.select
    own = bucket.hosts or None  # the jobs' own host list (-m)
    named = (
        (select is not None and select.uses_hname) or _named(queue.hosts) or _named(own)
        or any(_named(p.hosts) for r, _a in bucket.shared for p in state.pools[r])
    )
    hosts = [
        (h, c) for h, c in universe.hosts(named)
        if pattern_matches(queue.hosts, h) and pattern_matches(own, h)
    ]
    temps = [
        (t, virtual_of(state, t)[0]) for t in state.ranked
        if usable(state, t) and template_allowed(queue.hosts, t.name)
        and template_allowed(own, t.name)
    ]
    among = ""
    if queue.hosts is not None:
        among = f" to queue {queue.name}"
    if own is not None:
        among += f" in the job's host list (-m {' '.join(own)})"
    if (queue.hosts is not None or own is not None) and not hosts and not temps:
        if own is not None:
            return f"no host or template{among} may ever run jobs"
        return f"queue {queue.name} has no host nor template that may ever run jobs"
    if select is not None:
        hosts_s = [(h, c) for h, c in hosts if select(h.attrs)]
        temps_s = [(t, e) for t, e in temps if select(e.attrs)]
        if not hosts_s and not temps_s:
            return no_select(bucket, hosts, temps)
        hosts, temps = hosts_s, temps_s
        among += f" under select[{select.text}]"
    if gpus:
        most = max([h.gpus for h, _c in hosts] + [t.gpus for t, _e in temps], default=0)
        if gpus > most:
            return (
                f"job requests {gpus} GPUs per host; the most any host or template{among} "
                f"has is {most}"
            )
        hosts = [(h, c) for h, c in hosts if h.gpus >= gpus]
        temps = [(t, e) for t, e in temps if t.gpus >= gpus]
        among += f" with {gpus} GPU{'s' if gpus > 1 else ''} per host"
    for res, amount in bucket.shared:
        why = _shared(state, res, amount, among, hosts, temps)
        if isinstance(why, str):
            return why
        if len(why[0]) < len(hosts) or len(why[1]) < len(temps):
            among += f" with {amount:g} {res} from one pool"
        hosts, temps = why
    if any(_holds(state, bucket, h, t) for h, t in _by_pools(state, bucket, hosts, temps)):
        return None
    rooms = [(shape_room(h.slots, h.resources, h.gpus, bucket.use), c) for h, c in hosts]
    return too_big(bucket, hosts, rooms, temps, among)


def _holds(state: SchedulerState, bucket: Bucket, hosts: Hosts, temps: Templates) -> bool:
    """Whether these empty hosts together, or one of these templates, could take a
    job of the bucket."""
    rooms = [(shape_room(h.slots, h.resources, h.gpus, bucket.use), c) for h, c in hosts]
    if hosts_hold(bucket, rooms):
        return True
    beyond: list[HostTemplate] = []  # templates that only lack hosts enough for all of it
    for t, e in temps:
        verdict = template_verdict(state, bucket, t, e)[0]
        if verdict is None:
            return True
        if verdict.check == BEYOND_MAX:
            beyond.append(t)
    return bool(beyond) and _with_static(bucket, hosts, rooms, beyond)


def _with_static(
    bucket: Bucket, hosts: Hosts, rooms: list[tuple[int, int]], beyond: list[HostTemplate]
) -> bool:
    """Whether the static hosts with all the hosts one of these templates may have
    could take a job of the bucket together: a job of slots alone may run on both
    (sched/holds_wide.py plans it so)."""
    if not bucket.plain:
        return False
    static = _static_slots(hosts, rooms)
    return any(static + t.max * room_of(bucket, t) >= bucket.n for t in beyond)


def _static_slots(hosts: Hosts, rooms: list[tuple[int, int]]) -> int:
    """Slots of a job the static hosts among these hold together."""
    return sum(
        room * count for (h, _c), (room, count) in zip(hosts, rooms, strict=True)
        if h.template is None
    )


def _by_pools(
    state: SchedulerState, bucket: Bucket, hosts: Hosts, temps: Templates
) -> Iterator[tuple[Hosts, Templates]]:
    """The hosts and templates a job may use together for each choice of one pool per
    shared resource it asks for (one pool reaching every host of the job, as the real
    pass takes them), among the pools able to hold its request."""
    if not bucket.shared:
        yield hosts, temps
        return
    choices = [
        [p for p in state.pools[r] if ceiling(p) + EPSILON >= a] for r, a in bucket.shared
    ]
    for combo in product(*choices):
        yield (
            [(h, c) for h, c in hosts if all(p.reaches(h) for p in combo)],
            [(t, e) for t, e in temps
             if all(p.hosts is None or template_allowed(p.hosts, t.name) for p in combo)],
        )


def _shared(
    state: SchedulerState, res: str, amount: float, among: str, hosts: Hosts,
    temps: Templates,
) -> str | tuple[Hosts, Templates]:
    """The hosts and templates a pool of `res` able to hold `amount` reaches, or why
    there are none."""
    pools = state.pools[res]
    enough = [p for p in pools if ceiling(p) + EPSILON >= amount]
    if not enough:
        best = max(pools, key=ceiling)
        top = ceiling(best)
        return (
            f"job requests {amount:g} {res} (shared); the most {best.label} can ever have "
            f"is {top:g} (total {best.base:g} + {top - best.base:g} borrowable)"
        )
    reached_hosts = [(h, c) for h, c in hosts if any(p.reaches(h) for p in enough)]
    reached_temps = [
        (t, e) for t, e in temps
        if any(p.hosts is None or template_allowed(p.hosts, t.name) for p in enough)
    ]
    if not reached_hosts and not reached_temps:
        return (
            f"no pool of {res} that can hold {amount:g} reaches a host or "
            f"template{among} the job could run on"
        )
    return reached_hosts, reached_temps


def hosts_hold(bucket: Bucket, rooms: list[tuple[int, int]]) -> bool:
    """Whether empty hosts with these rooms (slots of the job each holds, how many
    such hosts) could take a job of the bucket together, under its span."""
    pieces = bucket.pieces
    if not pieces:  # spread slot by slot
        return sum(room * count for room, count in rooms) >= bucket.n
    first = pieces[0]
    big = sum(count for room, count in rooms if room >= first)
    if len(pieces) == 1:
        return big >= 1
    small = sum(count for room, count in rooms if room >= pieces[-1])
    return big >= pieces.count(first) and small >= len(pieces)


def too_big(
    bucket: Bucket, hosts: Hosts, rooms: list[tuple[int, int]], temps: Templates,
    among: str,
) -> str:
    """What the hosts and templates left lack: room for one piece of the job, hosts
    enough for its pieces, or slots enough for the whole job."""
    n, pieces, per_slot = bucket.n, bucket.pieces, bucket.per_slot
    troom = [(t, room_of(bucket, t)) for t, _e in temps]

    def asked(piece: int) -> str:
        return ", ".join(f"{r}={a * piece:g}" for r, a in per_slot)

    piece = pieces[0] if pieces else 1
    singles = [(room, f"host {h.name}") for (h, _c), (room, _n) in zip(hosts, rooms, strict=True)]
    singles += [(room, f"a host of template {t.name}") for t, room in troom]
    most, where = max(singles, default=(0, "no host"))
    if most < piece:
        if per_slot:
            return (
                f"no host or template{among} can hold {piece} slot(s) of this job "
                f"with {asked(piece)}"
            )
        shape = " on one host" if len(pieces) == 1 else (
            f", {piece} per host (span[ptile={piece}])" if pieces else ""
        )
        return f"job requests {n} slots{shape}; the most this cluster offers{among} is " \
               f"{most} ({where})"
    if pieces:  # span[ptile]: hosts enough for the pieces
        sizes = [(sum(c for (_h, c), (r, _n) in zip(hosts, rooms, strict=True) if r >= piece),
                  "all hosts")]
        sizes += [(t.max, f"template {t.name} (max {t.max})") for t, room in troom if room >= piece]
        best, at = max(sizes)
        return (
            f"job requests {len(pieces)} hosts of {piece} slots (span[ptile={piece}]); "
            f"the most this cluster offers{among} is {best} such host"
            f"{'' if best == 1 else 's'} ({at})"
        )
    totals = [(sum(r * c for r, c in rooms), "all hosts")]
    totals += [(room * t.max, f"template {t.name} (max {t.max})") for t, room in troom]
    combined = [  # (slots alone: static hosts and a template together)
        (_static_slots(hosts, rooms) + room * t.max,
         f"the static hosts with template {t.name} (max {t.max})")
        for t, room in troom
    ]
    if bucket.plain:
        totals += combined
    largest, at = max(totals)
    with_ = f" with {asked(1)} per slot" if per_slot else ""
    why = ""
    if not bucket.plain and max(combined, default=(0, ""))[0] >= n:
        why = (
            "; static hosts and a template's hosts run a job together only when it asks "
            "for slots alone (no span[], per-slot consumable, GPU, shared resource, order[] "
            "or -x)"
        )
    return (
        f"job requests {n} slots{with_}; the most this cluster offers{among} is {largest} "
        f"({at}){why}"
    )


def room_of(bucket: Bucket, template: HostTemplate) -> int:
    """Slots of a job of the bucket an empty host of `template` holds."""
    return shape_room(template.slots, template.resources, template.gpus, bucket.use)


def no_select(bucket: Bucket, hosts: Hosts, temps: Templates) -> str:
    """Why no host nor template of the queue satisfies the bucket's select: the
    largest value of each number it reads, the values of each string."""
    select = bucket.req.select
    assert select is not None
    queue = bucket.queue
    of = f" of queue {queue.name}" if queue.hosts is not None else ""
    if bucket.hosts:
        of += f" in the job's host list (-m {' '.join(bucket.hosts)})"
    parts: list[str] = []
    shapes = [(h.attrs, h.name) for h, _c in hosts] + [
        (e.attrs, f"template {t.name}") for t, e in temps
    ]
    for name in sorted(select.names - {"hname"}):
        values = [(attrs[name], where) for attrs, where in shapes if name in attrs]
        numbers = [(float(v), w) for v, w in values if isinstance(v, (int, float))
                   and not isinstance(v, bool)]
        if numbers:
            on_hosts = [(v, w) for v, w in numbers if not w.startswith("template ")]
            on_temps = [(v, w) for v, w in numbers if w.startswith("template ")]
            bits = [f"{v:g} on {w}" for v, w in (max(x) for x in (on_hosts, on_temps) if x)]
            parts.append(f"largest {name}: {', '.join(bits)}")
        elif any(isinstance(v, str) for v, _w in values):
            seen = sorted({str(v) for v, _w in values})
            parts.append(f"{name}: {', '.join(seen[:4])}{' ...' if len(seen) > 4 else ''}")
        elif not any(v is True for v, _w in values):
            parts.append(f"{name}: on no host or template")
    tail = f" ({'; '.join(parts)})" if parts else ""
    return f"No host or template{of} satisfies select[{select.text}]{tail}"
