"""What one scheduling session produces (see FORMATS.md, "Session result")."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Protocol

import msgspec

# A job's place in scheduling order: (-queue priority, -job priority, submit, id).
# Typed as a tuple of any length for the compiler: a fixed-length tuple type is kept
# unboxed, its items apart, and boxed anew (a tuple and its numbers allocated) each
# time a key is compared or stored, several times per job a session (bench_easy.py,
# docs/performance.md); items of Any keep Python's exact arithmetic (merge keys).
SortKey = tuple[Any, ...]


class OrderedJob(Protocol):
    """A pending job as the scheduler keeps it: an id and its scheduling-order key."""

    @property
    def id(self) -> int: ...

    @property
    def key(self) -> SortKey: ...


class Dispatch(msgspec.Struct, frozen=True):
    """Start `job` on `hosts` (host name -> slots); shared tokens from `pools`."""

    job: int
    hosts: dict[str, int]
    pools: dict[str, str] = {}


class Preemption(msgspec.Struct, frozen=True):
    """Running `job` is preempted for pending job `by`: requeued, suspended or killed
    as `by`'s queue says (its `preempt_action`)."""

    job: int
    by: int
    action: str


class Reservation(msgspec.Struct, frozen=True):
    """A blocked job's planned start: at `start` on `hosts` (host name -> slots),
    until `end` (inf: the job has no run limit). `virtual`: held on supply being
    obtained (not counted toward reserve_depth)."""

    job: int
    start: float
    hosts: dict[str, int]
    end: float = math.inf
    virtual: bool = False


class TraceEntry(msgspec.Struct, frozen=True):
    """One failing check of one evaluation. `job` is the job evaluated; jobs of the same
    bucket that failed with it share the entry."""

    job: int
    stage: str  # "real" or "catalog"
    check: str  # queue, hold, limit, select, slots, consumable, span, shared, template
    detail: str


class PendGroup(msgspec.Struct):
    """Jobs that pend for the same reason after the same evaluation (one bucket).

    A Struct: its __init__ in C (a session makes one per bucket, where a class of
    this interpreted module paid for a Python frame: bench_demand.py)."""

    reason: str
    kind: str  # resource, limit, queue, hold, provisioning, ...
    members: Sequence[OrderedJob]
    # Indices into SessionResult.trace: `_trace`, then the `_runs` of consecutive
    # ones, (start, stop) (a session with many buckets makes them by the thousand:
    # the ints are made only when read).
    _trace: Sequence[int]
    _runs: Sequence[tuple[int, int]] = ()

    @property
    def trace(self) -> list[int]:
        """Indices into SessionResult.trace of the entries of this group's evaluation."""
        return list(chain(self._trace, *(range(*run) for run in self._runs)))

    @property
    def jobs(self) -> list[int]:
        return [member.id for member in self.members]


class HostCount(msgspec.Struct, frozen=True):
    """A number of hosts of a template: the first fields of the demand's host entries
    (new hosts wanted, hosts in flight that no job needs)."""

    template: str
    count: int


class TokenAmount(msgspec.Struct, frozen=True):
    """An amount of tokens of a pool, `resource` its key ("vcs", "hspice/cloud"): the
    first fields of the token entries of the demand and of the idle supply."""

    resource: str
    amount: float


class HostDemand(HostCount, frozen=True):
    in_flight_used: int
    jobs: list[int]


class ResourceDemand(TokenAmount, frozen=True):
    in_flight_used: float
    jobs: list[int]


class SurplusHosts(HostCount, frozen=True):
    """In-flight hosts of a template that no pending job needs."""


class SurplusTokens(TokenAmount, frozen=True):
    """Tokens in flight that no pending job needs."""


class Demand(msgspec.Struct, frozen=True):
    hosts: list[HostDemand] = []
    resources: list[ResourceDemand] = []
    surplus_hosts: list[SurplusHosts] = []
    surplus_tokens: list[SurplusTokens] = []


class IdleHost(msgspec.Struct, frozen=True):
    host: str
    template: str
    idle_for: float


class IdleResource(TokenAmount, frozen=True):
    """Borrowed tokens of a pool unused for at least its idle time."""


class Idle(msgspec.Struct, frozen=True):
    hosts: list[IdleHost] = []
    resources: list[IdleResource] = []


class SessionStats(msgspec.Struct):
    pending: int = 0
    real_pass_ms: float = 0.0
    catalog_pass_ms: float = 0.0
    end_ms: float = 0.0
    session_ms: float = 0.0
    evaluations: int = 0
    dispatched: int = 0


class SessionResult(msgspec.Struct, dict=True):
    """Dispatch decisions, pend reasons, decision trace, demand and idle supply.

    A Struct (its __init__ in C: one is made per session, hot in simulations,
    bench_easy.py); `dict=True` lets it cache its pend groups by job (`_groups`)."""

    now: float
    dispatch: list[Dispatch]
    pending: list[PendGroup]
    trace: list[TraceEntry]
    demand: Demand
    idle: Idle
    stats: SessionStats
    # Blocked jobs' planned starts, in scheduling order (ARCHITECTURE.md 2a).
    reservations: list[Reservation] = []
    # The earliest time after `now` at which the decisions could change with no
    # new event (inf: never): idle supply reaching its idle time.
    next_due: float = math.inf
    # Jobs dispatched ahead of an earlier job's reservation, in dispatch order.
    backfilled: list[int] = []
    # Pending jobs whose dependency condition can never be satisfied, for the
    # driver to end now (LSF's -ti, or past orphan_job_term_timeout).
    orphans: list[int] = []
    # Running jobs to preempt for pending ones, for the driver to carry out
    # (JobPreempted, then requeue or kill; a suspend releases their slots at once)
    preemptions: list[Preemption] = []
    # Jobs suspended by a preemption whose preemptor has ended: to resume now
    # (JobResumed); the session counted their slots as taken
    resumes: list[int] = []

    def _groups(self) -> dict[int, PendGroup]:
        groups: dict[int, PendGroup] | None = getattr(self, "_group_of", None)
        if groups is None:
            groups = self._group_of = {m.id: g for g in self.pending for m in g.members}
        return groups

    def reason_of(self, job: int) -> str | None:
        """The pend reason of `job` in this session, or None if it was not pending."""
        group = self._groups().get(job)
        return group.reason if group else None

    def trace_of(self, job: int) -> list[TraceEntry]:
        """Every failing check recorded for `job`'s evaluation in this session."""
        group = self._groups().get(job)
        return [self.trace[i] for i in group.trace] if group else []

    def pending_in_order(self) -> Iterator[tuple[int, str]]:
        """(job, reason) for every pending job, in scheduling order."""
        streams = [[(m.key, m.id, g.reason) for m in g.members] for g in self.pending]
        for _key, job, reason in heapq.merge(*streams):
            yield job, reason

    def to_json_obj(self) -> dict[str, Any]:
        """The session result exactly as FORMATS.md specifies it: `reservations` the
        reservations of `reserve_depth` (empty without it), and the holds on supply
        being obtained (`virtual`, ARCHITECTURE.md 2a "Elastic") under `holds`, when
        there are any."""
        holds = [reservation_json(r) for r in self.reservations if r.virtual]
        return {
            "now": number(self.now),
            "dispatch": [{"job": d.job, "hosts": d.hosts} for d in self.dispatch],
            "pending": [{"job": j, "reason": r} for j, r in self.pending_in_order()],
            "demand": demand_json(self.demand),
            "idle": idle_json(self.idle),
            "reservations": [reservation_json(r) for r in self.reservations if not r.virtual],
            "preemptions": [
                {"job": p.job, "by": p.by, "action": p.action} for p in self.preemptions
            ],
            # (XCE's own keys, after FORMATS.md's)
            **({"holds": holds} if holds else {}),
            "next_due": None if math.isinf(self.next_due) else number(self.next_due),
            **({"orphans": self.orphans} if self.orphans else {}),
            **({"resumes": self.resumes} if self.resumes else {}),
            "stats": {
                "pending": self.stats.pending,
                "real_pass_ms": round(self.stats.real_pass_ms, 3),
                "catalog_pass_ms": round(self.stats.catalog_pass_ms, 3),
                "end_ms": round(self.stats.end_ms, 3),
                "session_ms": round(self.stats.session_ms, 3),
            },
        }

    def reservation_of(self, job: int) -> Reservation | None:
        """`job`'s reservation in this session, if it has one."""
        for found in self.reservations:
            if found.job == job:
                return found
        return None


def number(value: float) -> float | int:
    """Whole amounts print as integers, as in FORMATS.md."""
    return int(value) if float(value).is_integer() else value


def reservation_json(found: Reservation) -> dict[str, Any]:
    """A reservation as FORMATS.md shows it (`start` in seconds on the session's
    clock; `end` only when the job has a run limit)."""
    out: dict[str, Any] = {"job": found.job, "start": float(found.start), "hosts": found.hosts}
    if not math.isinf(found.end):
        out["end"] = float(found.end)
    if found.virtual:
        out["virtual"] = True
    return out


def idle_json(idle: Idle) -> dict[str, Any]:
    """Idle supply as FORMATS.md shows it."""
    return {
        "hosts": [
            {"host": h.host, "template": h.template, "idle_for": number(h.idle_for)}
            for h in idle.hosts
        ],
        "resources": [{"resource": r.resource, "amount": number(r.amount)} for r in idle.resources],
    }


class _SurplusJson(msgspec.Struct, frozen=True):
    hosts: list[SurplusHosts] = []
    resources: list[SurplusTokens] = []


class _DemandJson(msgspec.Struct, frozen=True):
    hosts: list[HostDemand] = []
    resources: list[ResourceDemand] = []
    surplus: _SurplusJson = _SurplusJson()


def demand_from_json(shown: Mapping[str, Any] | None) -> Demand:
    """The inverse of `demand_json` (None: no demand). Raises msgspec.ValidationError."""
    found = msgspec.convert(shown or {}, _DemandJson)
    return Demand(found.hosts, found.resources, found.surplus.hosts, found.surplus.resources)


def idle_from_json(shown: Mapping[str, Any] | None) -> Idle:
    """The inverse of `idle_json` (None: nothing idle). Raises msgspec.ValidationError."""
    return msgspec.convert(shown or {}, Idle)


def demand_json(demand: Demand) -> dict[str, Any]:
    """Demand as FORMATS.md shows it; `surplus` only when there is some."""
    out: dict[str, Any] = {
        "hosts": [msgspec.to_builtins(h) for h in demand.hosts],
        "resources": [
            {
                "resource": r.resource,
                "amount": number(r.amount),
                "in_flight_used": number(r.in_flight_used),
                "jobs": r.jobs,
            }
            for r in demand.resources
        ],
    }
    if demand.surplus_hosts or demand.surplus_tokens:
        out["surplus"] = {
            "hosts": [msgspec.to_builtins(h) for h in demand.surplus_hosts],
            "resources": [
                {"resource": t.resource, "amount": number(t.amount)}
                for t in demand.surplus_tokens
            ],
        }
    return out
