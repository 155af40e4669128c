"""The catalog pass: would a job that failed on resources fit on supply we could
obtain?

Jobs that failed the real pass on resources are tried, in scheduling order, on
virtual supply: hosts of templates (in flight first, then hosts already opened this
session, then new ones, templates by rank) and tokens that are in flight or could be
borrowed (headroom). What a job is placed on stays reserved for the rest of the
session, so later jobs see less: demand respects job order and nothing is counted
twice. Virtual hosts are packed first-fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

from xce.model.cluster import HostTemplate
from xce.model.result import SortKey, TraceEntry
from xce.sched import placement
from xce.sched.buckets import Bucket, InKeyOrder, PendingJob
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.eligibility import reach
from xce.sched.holds import ElasticHolds, JoinedHold, empty_room
from xce.sched.hosts import HostRecord, template_allowed
from xce.sched.plan import Plan
from xce.sched.pools import PoolRecord
from xce.sched.realpass import Evaluator, Failure, Settled
from xce.sched.reasons import LIMIT, RESOURCE, clock, on_hosts, span
from xce.sched.state import SchedulerState


class TemplateSupply:
    """One template's virtual hosts in this session."""

    __slots__ = (
        "_no_more",
        "allowance",
        "arrival",
        "arrivals",
        "empty",
        "expected",
        "free_total",
        "frontier",
        "hosts",
        "in_flight",
        "in_flight_total",
        "index",
        "jobs",
        "lead",
        "new",
        "resources",
        "template",
    )

    def __init__(
        self,
        index: int,
        template: HostTemplate,
        in_flight: int,
        allowance: int,
        virtual: tuple[HostRecord, dict[str, float]],
        arrivals: list[float],
        lead: float,
    ) -> None:
        self.index = index  # position in rank order
        self.template = template
        self.expected: set[int] = set()  # capacity indices of the in-flight hosts
        self.free_total = 0  # free slots on this template's virtual hosts
        self.frontier = 0  # hosts[:frontier] have no free slot left
        self.in_flight = in_flight  # expected hosts not opened yet this session
        self.in_flight_total = in_flight
        self.allowance = allowance  # new hosts that may still be opened
        self.hosts: list[int] = []  # capacity indices, in the order they are tried
        self.new = 0  # new hosts opened
        self.arrivals = arrivals  # when each in-flight host is expected, earliest first
        self.lead = lead  # how long a new host takes to join
        self.arrival: dict[int, float] = {}  # opened host -> when it is expected

        self.jobs: list[int] = []
        self.empty, self.resources = virtual
        self._no_more: Failure | None = None

    @property
    def no_more(self) -> Failure:
        """Why the template cannot take more jobs (made once per session)."""
        if self._no_more is None:
            self._no_more = _no_more_hosts(self.template)
        return self._no_more


class TokenSupply:
    """Tokens of one pool that are in flight or could be borrowed."""

    __slots__ = ("from_headroom", "from_in_flight", "headroom", "in_flight", "jobs", "pool")

    def __init__(self, pool: PoolRecord) -> None:
        self.pool = pool
        self.in_flight = pool.tokens_in_flight
        self.headroom = pool.available_headroom()
        self.from_in_flight = 0.0
        self.from_headroom = 0.0
        self.jobs: list[int] = []


class TokenUse:
    """Tokens one job takes from a pool: `short` of them are not there yet."""

    __slots__ = ("amount", "from_headroom", "from_in_flight", "pool", "supply")

    def __init__(
        self,
        pool: PoolRecord,
        supply: TokenSupply | None,
        amount: float,
        from_in_flight: float = 0.0,
        from_headroom: float = 0.0,
    ) -> None:
        self.pool = pool
        self.supply = supply
        self.amount = amount
        self.from_in_flight = from_in_flight
        self.from_headroom = from_headroom

    @property
    def short(self) -> float:
        return self.from_in_flight + self.from_headroom


class Placed:
    """Where the catalog pass put one job, and when all its supply is expected."""

    __slots__ = ("job", "joined", "new_hosts", "start", "template", "tokens")

    def __init__(
        self, job: int, template: TemplateSupply | None, new_hosts: bool, tokens: list[TokenUse],
        start: float,
    ) -> None:
        self.job = job
        self.template = template
        self.new_hosts = new_hosts
        self.tokens = tokens
        self.start = start  # when all its supply is expected
        self.joined: dict[int, int] = {}  # joined hosts it holds (sched/holds.py): slots


Outcome = Placed | Failure | None  # None: nothing provisionable could help

# The check of a job the plan starts on real capacity before new hosts could join.
SERVED: Final = "plan"


class StaticFit:
    """What the catalog pass knows of a bucket whatever the session: per template (rank
    order) why its hosts could never take the bucket's jobs (None: they could) and how
    many of the jobs' slots an empty host holds. The configuration is fixed for the
    bucket's life (a new configuration makes new buckets)."""

    __slots__ = ("entries", "notes", "rooms", "traced_job", "usable_at", "why_not")

    def __init__(self, bucket: Bucket, fits: list[tuple[Failure | None, int]]) -> None:
        verdicts = [verdict for verdict, _room in fits]
        self.rooms = [room for _verdict, room in fits]
        self.usable_at = [at for at, verdict in enumerate(verdicts) if verdict is None]
        self.notes = [(v.check, v.detail) for v in verdicts if v is not None]
        # The outcome when no template can take the jobs (None: keep the real reason)
        self.why_not = _no_template(bucket, verdicts)
        self.traced_job = -1  # the job the trace entries name
        self.entries: list[TraceEntry] = []


def _no_template(bucket: Bucket, verdicts: list[Failure | None]) -> Failure | None:
    """Why no template can host the bucket's jobs, or None when its queue may not
    burst at all."""
    checks = [v for v in verdicts if v is not None and v.check != "queue"]
    if not checks:
        return None
    select = [v for v in checks if v.check == "select"]
    if len(select) == len(checks) and bucket.req.select is not None:
        return Failure(
            RESOURCE, "select", f"No template can host this job: select[{bucket.req.select.text}]"
        )
    shape = next(v for v in checks if v.check != "select")
    return Failure(RESOURCE, shape.check, f"No template can host this job: {shape.detail}")


class CatalogPass:
    """Runs the catalog pass over the buckets the real pass settled on resources."""

    def __init__(
        self,
        state: SchedulerState,
        cap: Capacity,
        evaluator: Evaluator,
        trace: list[TraceEntry] | None,
        now: float = 0.0,
        holds: ElasticHolds | None = None,
        planner: Callable[[], Plan] | None = None,
    ) -> None:
        """`holds`: the real pass's holds on joined hosts; `planner`: its plan (made
        when first asked), to tell when real capacity would serve a job."""
        self.state = state
        self.now = now
        self.holds = holds
        self.planner = planner if state.ends else None  # (no planned end: no earlier start)
        self.cap = cap
        self.evaluator = evaluator
        self.trace = trace
        self.templates: list[TemplateSupply] = []
        in_flights = state.in_flight
        for position, template in enumerate(state.ranked):
            name = template.name
            in_flight = max(0, in_flights.get(name, 0))
            allowance = state.new_hosts_allowed(template)
            virtual = state.virtual.get(name)
            if virtual is None:
                virtual = state.virtual[name] = _virtual_host(template)
            self.templates.append(
                TemplateSupply(
                    position, template, in_flight, allowance, virtual,
                    state.arrivals(name, now), state.lead_time(name),
                )
            )
        self._by_name = {supply.template.name: supply for supply in self.templates}
        self.tokens: dict[PoolRecord, TokenSupply] = {
            pool: TokenSupply(pool) for pool in state.countable_pools
        }
        self.budget = state.config.catalog.max_jobs_per_session
        self.evaluated = 0
        # True while each settled bucket has one outcome for all its jobs: no job was
        # placed or held at a limit on its own.
        self.one_each = True
        # First-fit state is shared by buckets of one shape (slots, per-slot
        # consumables, span): whether a host can take such a job does not depend on
        # the queue, user or select.
        self._cursor: dict[tuple[tuple[tuple[str, float], ...], int, int], int] = {}
        self._trace_of: dict[Bucket, list[tuple[int, int]]] = {}  # runs of trace indices
        self._usable: dict[Bucket, list[TemplateSupply]] = {}
        self._usable_fns: dict[tuple[tuple[str, float], ...], Callable[[int], int]] = {}
        # (shape, template) -> number of opened hosts that could not hold that shape
        self._no_room: dict[tuple[object, int], int] = {}
        self._dead: set[tuple[object, int]] = set()  # (shape, template) that never fit
        self._limit_noted: set[tuple[Bucket, str]] = set()
        self._free_by: dict[float, int] = {}  # time -> free slots by then at most
        self._served_slots = 0  # slots of jobs booked on real capacity (_served)

    # ------------------------------------------------------------------ driver
    def run(self, settled: list[Settled]) -> list[tuple[Settled, list[PendingJob], Outcome]]:
        """Try the settled buckets' jobs in scheduling order.

        Returns, per bucket, runs of jobs with what happened to them: a Placed for
        each placed job (one entry per job), a Failure (the catalog's reason for the
        rest of the bucket) or None (keep the real pass's reason)."""
        if not self.templates and not self.tokens:  # nothing is provisionable
            return [(s, s.members, None) for s in settled]
        results: list[tuple[Settled, list[PendingJob], Outcome]] = []
        fresh: list[tuple[SortKey, int, Settled, int]] = []
        buckets: set[Bucket] = set()
        for s in settled:
            if s.failure.kind != RESOURCE:
                results.append((s, s.members, None))
            elif s.members:
                fresh.append((s.members[0].key, len(fresh), s, 0))
                if s.bucket in buckets:  # settled in parts (reservations, holds)
                    self.one_each = False
                buckets.add(s.bucket)
        queue = InKeyOrder(fresh)
        budget = self.budget
        limits = self.state.config.limits
        while queue.left():
            _key, seq, s, pos = queue.pop()
            if self.evaluated >= budget:
                results.append((s, s.members[pos:], None))
                self._note(
                    s, s.members[pos], "cap", f"catalog pass cap reached ({budget} jobs)"
                )
                continue
            members = s.members
            end = len(members)
            next_key: SortKey | None = None  # where another bucket's next job comes
            known = False
            while True:  # the job at `pos` is the earliest left
                self.evaluated += 1
                job = members[pos]
                outcome = self.try_job(s, job)
                # Placed, or held for this job only: at its user's or queue's limit, or
                # started on real capacity
                if isinstance(outcome, Placed) or (
                    isinstance(outcome, Failure)
                    and (outcome.kind == LIMIT or outcome.check == SERVED)
                ):
                    results.append((s, [job], outcome))
                    self.one_each = False
                else:
                    rest = members[pos:] if pos else members
                    if limits:
                        limited, rest = self.evaluator.split_limited(rest, s.bucket.n)
                        for held, why in limited:
                            self.one_each = False
                            self._note_limit(s, held, why)
                            results.append((s, [held], why))
                    results.append((s, rest, outcome))
                    pos = end
                    break
                pos += 1
                if pos == end or self.evaluated >= budget:
                    break
                if not known:
                    next_key = queue.next_key()
                    known = True
                if next_key is not None and not members[pos].key < next_key:
                    break
            if pos < end:
                queue.push(members[pos].key, seq, s, pos)
        return results

    def trace_runs(self, bucket: Bucket) -> Sequence[tuple[int, int]]:
        """Where the bucket's catalog entries are in the trace: runs of indices
        (start, stop)."""
        return self._trace_of.get(bucket) or ()

    def _note_limit(self, s: Settled, job: PendingJob, failure: Failure) -> None:
        """Trace a limit reached by virtual placements, once per bucket and limit."""
        if (s.bucket, failure.reason) not in self._limit_noted:
            self._limit_noted.add((s.bucket, failure.reason))
            self._note(s, job, "limit", failure.reason)

    def _note(self, s: Settled, job: PendingJob, check: str, detail: str) -> None:
        trace = self.trace
        if trace is None:  # nothing traced (a session without pend reasons)
            return
        trace.append(TraceEntry(job.id, "catalog", check, detail))
        self._traced(s.bucket, len(trace) - 1, len(trace))

    def _traced(self, bucket: Bucket, start: int, stop: int) -> None:
        """The bucket's entries include trace[start:stop]."""
        runs = self._trace_of.get(bucket)
        if runs is None:
            self._trace_of[bucket] = [(start, stop)]
        elif runs[-1][1] == start:
            runs[-1] = (runs[-1][0], stop)
        else:
            runs.append((start, stop))

    # ------------------------------------------------------------------ one job
    def try_job(self, s: Settled, job: PendingJob) -> Outcome:
        bucket = s.bucket
        if job.limit_refs:
            failure = self.evaluator.limit_failure(job, bucket.n)
            if failure is not None:
                self._note_limit(s, job, failure)
                return failure
        if s.failure.check == "shared":
            placed = self._on_real_hosts(s, job)
            if placed is not None:
                return placed
        usable = self._usable.get(bucket)
        if usable is None:
            usable = self._usable[bucket] = self._usable_templates(s, job)
        if not usable:
            return self._fits(bucket).why_not
        hold = self.holds.held.get(job.id) if self.holds is not None else None
        if hold is not None:
            return self._on_template(s, job, self._by_name[hold.template.name], True, hold)
        if self.planner is not None and not bucket.shared:
            served = self._served(bucket, job, usable)
            if served is not None:
                return served
        n = bucket.n
        # Supply that needs no new host first, whichever template has it: hosts opened
        # this session, then in-flight hosts, templates by rank (free slot totals are a
        # cheap necessary condition for the first).
        shape = bucket.shape
        dead = self._dead
        for supply in usable:
            if supply.free_total >= n and (shape, supply.index) not in dead:
                outcome = self._on_template(s, job, supply, False, in_flight=False)
                if isinstance(outcome, Placed):
                    return outcome
        for supply in usable:
            if supply.in_flight and (shape, supply.index) not in dead:
                outcome = self._on_template(s, job, supply, False)
                if isinstance(outcome, Placed):
                    return outcome
        failures: list[Failure] = []
        for supply in usable:
            if (shape, supply.index) in dead or (
                supply.allowance == 0 and supply.in_flight == 0 and supply.free_total < n
            ):
                failures.append(supply.no_more)
                continue
            outcome = self._on_template(s, job, supply, new=True)
            if isinstance(outcome, Placed):
                return outcome
            assert isinstance(outcome, Failure)  # opening hosts places or says why not
            failures.append(outcome)
        for failed in failures:
            self._note(s, job, failed.check, failed.detail)
        return failures[0]

    def _served(
        self, bucket: Bucket, job: PendingJob, usable: list[TemplateSupply]
    ) -> Failure | None:
        """Nothing is bought that would arrive too late: a job the plan starts on real
        capacity no later than new hosts of a template it may use could join is
        booked there and asks for nothing (ARCHITECTURE.md section 2a, "Elastic")."""
        now = self.now
        joins = now + min([supply.lead for supply in usable])
        assert self.planner is not None
        plan = self.planner()
        if self._slots_by(joins, plan) < bucket.n:  # (cheap: not that many slots by then)
            return None
        found = plan.find(bucket, joins)
        if found is None:
            return None
        start, hosts = found
        booked = plan.book(job.id, start, bucket.limit, hosts, bucket.per_slot)
        self._served_slots += bucket.n
        return Failure(
            RESOURCE, SERVED,
            f"Expected to start at {clock(start)} (in {span(start - now)}) on "
            f"{on_hosts(booked.hosts)}, no later than new hosts could join: nothing "
            "requested",
        )

    def _slots_by(self, time: float, plan: Plan) -> int:
        """At most how many slots are free by `time`: free now plus those of running
        jobs planned to end by then, less those of jobs served so far."""
        found = self._free_by.get(time)
        if found is None:
            state = self.state
            free = state.free_slots
            found = 0
            for index in state.open_free:
                found += free[index]
            now, planned = self.now, plan.planned
            for end, _job, run in state.ends:
                if planned(end) > time:
                    if end > now:
                        break  # (sorted by end: the rest end later still)
                    continue
                for slots in run.hosts.values():
                    found += slots
            self._free_by[time] = found
        return found - self._served_slots

    def _usable_templates(self, s: Settled, job: PendingJob) -> list[TemplateSupply]:
        """The templates whose hosts could ever take the bucket's jobs; the others are
        traced (with `job`, the first job tried this session) in rank order."""
        fit = self._fits(s.bucket)
        if self.trace is not None and fit.notes:
            self._note_static(s, job, fit)
        templates = self.templates
        return [templates[at] for at in fit.usable_at]

    def _note_static(self, s: Settled, job: PendingJob, fit: StaticFit) -> None:
        """Trace the templates that can never take the bucket's jobs. The entries are
        kept with the job they name: the next session that tries the same job first
        shares them (they are immutable)."""
        trace = self.trace
        assert trace is not None
        if fit.traced_job != job.id:
            fit.traced_job = job.id
            fit.entries = [
                TraceEntry(job.id, "catalog", check, detail) for check, detail in fit.notes
            ]
        start = len(trace)
        trace.extend(fit.entries)
        self._traced(s.bucket, start, len(trace))

    def _fits(self, bucket: Bucket) -> StaticFit:
        """Whether each template's hosts could ever take the bucket's jobs. Static: kept
        on the bucket."""
        fit = bucket.fits
        if fit is None:
            fit = bucket.fits = StaticFit(
                bucket, [self._static_fit(bucket, t) for t in self.templates]
            )
        assert isinstance(fit, StaticFit)
        return fit

    def _static_fit(self, bucket: Bucket, supply: TemplateSupply) -> tuple[Failure | None, int]:
        template = supply.template
        verdict: Failure | None = None
        select = bucket.req.select
        room = empty_room(supply.template, bucket.per_slot)
        if not template_allowed(bucket.queue.hosts, template.name):
            verdict = Failure(
                RESOURCE, "queue", f"queue {bucket.queue.name} may not use template {template.name}"
            )
        elif select is not None and not select(supply.empty.attrs):
            verdict = Failure(
                RESOURCE, "select", f"select[{select.text}] does not match template {template.name}"
            )
        else:
            need = bucket.unit
            per_host = bucket.n if need == bucket.n else (
                room if bucket.req.span_ptile is None else need
            )
            if room < need:
                verdict = Failure(
                    RESOURCE, "shape",
                    f"template {template.name} holds {room} such slots per host, "
                    f"the job needs {need} on one host",
                )
            elif math.ceil(bucket.n / per_host) > template.max:
                verdict = Failure(
                    RESOURCE, "shape",
                    f"template {template.name} would need {math.ceil(bucket.n / per_host)} "
                    f"hosts for the job, max {template.max}",
                )
            else:
                for res, _amount in bucket.shared:
                    if not any(
                        p.hosts is None or template_allowed(p.hosts, template.name)
                        for p in self.state.pools[res]
                    ):
                        verdict = Failure(
                            RESOURCE, "shared",
                            f"no pool of {res} reaches template {template.name}",
                        )
                        break
        return verdict, room

    # ------------------------------------------------------------------ placements
    def _on_real_hosts(self, s: Settled, job: PendingJob) -> Placed | None:
        """A job short only of shared tokens: real hosts plus tokens to come."""
        bucket = s.bucket
        cands = self.evaluator.candidates(bucket)
        if isinstance(cands, Failure):
            return None
        req = bucket.req
        hosts = placement.place(
            self.evaluator.room(bucket, cands), bucket.n, req.span_hosts, req.span_ptile,
            self.evaluator.key_for(bucket),
        )
        if hosts is None:
            return None
        tokens = self._cover(bucket, lambda p: self._reaches_real(p, hosts))
        if isinstance(tokens, Failure):
            self._note(s, job, tokens.check, tokens.detail)
            return None
        return self._commit(bucket, job, None, hosts, False, tokens, 0, self.now)

    def _usable_fn(self, bucket: Bucket) -> Callable[[int], int]:
        """How many slots of this bucket fit on a host now (inlined for one consumable)."""
        found = self._usable_fns.get(bucket.per_slot)
        if found is not None:
            return found
        cap, per_slot = self.cap, bucket.per_slot
        free_slots = cap.free_slots
        if not per_slot:
            found = free_slots.__getitem__
        elif len(per_slot) == 1:
            (res, amount), = per_slot
            column = cap.free_res[res]

            def found(i: int) -> int:
                return min(free_slots[i], int((column[i] + EPSILON) // amount))
        else:
            def found(i: int) -> int:
                return cap.usable(i, per_slot)
        self._usable_fns[bucket.per_slot] = found
        return found

    def _reaches_real(self, pool: PoolRecord, hosts: dict[int, int]) -> bool:
        reachable = reach(self.state, pool)
        return reachable is None or all(i in reachable for i in hosts)

    def _on_template(
        self, s: Settled, job: PendingJob, supply: TemplateSupply, new: bool,
        hold: JoinedHold | None = None, in_flight: bool = True,
    ) -> Outcome:
        """Place the job (with a hold: the rest of it, beyond the joined hosts it
        holds) on the template's hosts opened so far, then (`in_flight`) on its
        in-flight hosts, and when `new`, on new ones within the allowance. None: not
        on those.

        In-flight hosts are opened exactly where new ones would be, so that a session
        that finds last session's demand in flight places the same jobs on it and
        asks for nothing more."""
        bucket = s.bucket
        key = (bucket.shape, supply.index)
        limit = len(supply.hosts)
        # Capacity only shrinks: hosts that could not hold this bucket still cannot
        # until the template opens more.
        if hold is None and self._no_room.get(key) == limit and not (
            in_flight and supply.in_flight
        ):
            if not new:
                return None
            if supply.allowance == 0:
                self._dead.add(key)  # for the rest of the session: capacity only shrinks
                return supply.no_more
        need = bucket.n if hold is None else hold.rest
        pieces = bucket.pieces if hold is None else hold.pieces
        chosen, unplaced, left = self._first_fit(bucket, supply, need, pieces)
        sizes: list[int] = []
        if left > 0:
            if hold is None:
                self._no_room[key] = limit
            if pieces:
                sizes = unplaced  # one more host for each piece
            else:
                per_host = self._fits(bucket).rooms[supply.index]
                count = -(-left // per_host)
                sizes = [per_host] * count
                sizes[-1] = left - per_host * (count - 1)
            if not in_flight:
                return None
            beyond = len(sizes) - min(len(sizes), supply.in_flight)  # new hosts needed
            if beyond and not new:
                return None
            if beyond > supply.allowance:
                return supply.no_more
        if bucket.shared:
            name = supply.template.name
            tokens = self._cover(
                bucket, lambda p: p.hosts is None or template_allowed(p.hosts, name)
            )
            if isinstance(tokens, Failure):
                return tokens
        else:
            tokens = []
        start = self.now if hold is None else hold.start
        arrival = supply.arrival
        for index in chosen:
            if arrival[index] > start:
                start = arrival[index]
        new_hosts, opened, latest = self._open(supply, sizes, bucket) if sizes else (False, 0, 0.0)
        if latest > start:
            start = latest
        if not new_hosts:
            expected_hosts = supply.expected
            new_hosts = any(i not in expected_hosts for i in chosen)
        if hold is None:
            return self._commit(bucket, job, supply, chosen, new_hosts, tokens, opened, start)
        chosen.update(hold.hosts)
        placed = self._commit(bucket, job, supply, chosen, new_hosts, tokens, opened, start)
        supply.free_total += bucket.n - hold.rest  # (joined hosts: not the template's total)
        placed.joined = hold.hosts
        return placed

    def _first_fit(
        self, bucket: Bucket, supply: TemplateSupply, need: int, pieces: tuple[int, ...]
    ) -> tuple[dict[int, int], list[int], int]:
        """`need` slots of a job of `bucket` (in `pieces`, each on its own host, if it
        has a span) first-fit on the template's hosts opened so far: (host -> slots,
        pieces none of them can take, slots left over)."""
        hosts_list = supply.hosts
        limit = len(hosts_list)
        chosen: dict[int, int] = {}
        if not limit:
            return chosen, list(pieces), need
        unplaced: list[int] = []
        left = 0
        usable = self._usable_fn(bucket)
        # First-fit fills hosts in order: hosts before the template's frontier are
        # full; hosts before this shape's cursor cannot take its smallest piece.
        free_slots = self.cap.free_slots
        frontier = supply.frontier
        while frontier < limit and free_slots[hosts_list[frontier]] <= 0:
            frontier += 1
        supply.frontier = frontier
        # Whether a host can take `smallest` slots depends only on the per-slot
        # consumables: every shape with the same ones shares the cursor.
        smallest = bucket.smallest
        cursor_key = (bucket.per_slot, smallest, supply.index)
        cursor = self._cursor.get(cursor_key, 0)
        if cursor < frontier:
            cursor = frontier
        while cursor < limit and usable(hosts_list[cursor]) < smallest:
            cursor += 1
        self._cursor[cursor_key] = cursor
        if pieces:
            for piece in pieces:
                for position in range(cursor, limit):
                    index = hosts_list[position]
                    if index not in chosen and usable(index) >= piece:
                        chosen[index] = piece
                        break
                else:
                    unplaced.append(piece)
                    left += piece
            return chosen, unplaced, left
        left = need
        for position in range(cursor, limit):
            index = hosts_list[position]
            take = usable(index)
            if take > 0:
                if take >= left:
                    chosen[index] = left
                    return chosen, unplaced, 0
                chosen[index] = take
                left -= take
        return chosen, unplaced, left

    def _open(
        self, supply: TemplateSupply, sizes: list[int], bucket: Bucket
    ) -> tuple[bool, int, float]:
        """Open one host per entry of `sizes` with that many of the job's slots on it:
        in-flight hosts first, then new ones. Returns whether new hosts were opened,
        the slots on them all and when the last of them is expected."""
        count = len(sizes)
        expected = min(count, supply.in_flight)
        first = self.cap.add_hosts(supply.empty, supply.resources, sizes, bucket.per_slot)
        supply.free_total += count * supply.template.slots
        hosts_list, arrival = supply.hosts, supply.arrival
        arrivals = supply.arrivals
        taken = supply.in_flight_total - supply.in_flight  # in-flight hosts opened before
        new_at = self.now + supply.lead
        latest = 0.0
        # (loops: compiled, extending by a range is a generic call)
        for offset in range(count):
            index = first + offset
            hosts_list.append(index)
            if offset < expected:
                supply.expected.add(index)
                at = arrivals[taken + offset]
            else:
                at = new_at
            arrival[index] = at
            if at > latest:
                latest = at
        supply.in_flight -= expected
        supply.new += count - expected
        supply.allowance -= count - expected
        opened = 0
        for size in sizes:
            opened += size
        return count > expected, opened, latest

    def _cover(
        self, bucket: Bucket, reachable: Callable[[PoolRecord], bool]
    ) -> list[TokenUse] | Failure:
        """Tokens for the job's shared needs: free ones, then in flight, then headroom."""
        uses: list[TokenUse] = []
        for res, amount in bucket.shared:
            best_short = amount
            headroom = 0.0
            for pool in self.state.pools[res]:
                if not reachable(pool):
                    continue
                free = max(0.0, self.cap.pool_free[pool])
                short = max(0.0, amount - free)
                supply = self.tokens.get(pool)
                if short <= EPSILON:
                    uses.append(TokenUse(pool, supply, amount))
                    break
                if supply is None:
                    best_short = min(best_short, short)
                    continue
                from_in_flight = min(short, supply.in_flight)
                from_headroom = short - from_in_flight
                if from_headroom <= supply.headroom + EPSILON:
                    uses.append(TokenUse(pool, supply, amount, from_in_flight, from_headroom))
                    break
                best_short = min(best_short, short)
                headroom = max(headroom, supply.headroom)
            else:
                return Failure(
                    RESOURCE, "tokens",
                    f"Short {best_short:g} of {res}: not enough headroom to borrow "
                    f"({headroom:g} left)",
                )
        return uses

    def _commit(
        self,
        bucket: Bucket,
        job: PendingJob,
        supply: TemplateSupply | None,
        hosts: dict[int, int],
        new_hosts: bool,
        tokens: list[TokenUse],
        opened: int = 0,
        start: float = 0.0,
    ) -> Placed:
        """Reserve the job's hosts (`opened` more slots on new hosts, reserved when
        they were opened) and tokens; `start`: when they are all expected."""
        self.cap.take(
            hosts, bucket.per_slot, {u.pool: u.amount for u in tokens} if tokens else {},
            job.limit_refs, opened,
        )
        for use in tokens:
            if use.supply is not None and use.short > 0:
                use.supply.in_flight -= use.from_in_flight
                use.supply.headroom -= use.from_headroom
                use.supply.from_in_flight += use.from_in_flight
                use.supply.from_headroom += use.from_headroom
                use.supply.jobs.append(job.id)
        if supply is not None:
            supply.jobs.append(job.id)
            supply.free_total -= sum(hosts.values()) + opened
        return Placed(job.id, supply, new_hosts, tokens, start)


def _no_more_hosts(template: HostTemplate) -> Failure:
    return Failure(
        RESOURCE, "allowance", f"Template {template.name} allows no more hosts (max {template.max})"
    )


def _virtual_host(template: HostTemplate) -> tuple[HostRecord, dict[str, float]]:
    """The record every virtual host of a template shares, and its consumables."""
    record = HostRecord(
        -1, f"{template.name}:virtual", template.slots, template.type, template.model,
        template.resources, template.name, "ok", 0,
    )
    resources = {
        r: (0.0 if isinstance(v, bool) else float(v)) for r, v in template.resources.items()
    }
    return record, resources
