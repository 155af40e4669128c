"""The catalog pass: would a job that failed on resources fit on supply we could
obtain?

Jobs that failed the real pass on resources are tried, in scheduling order, on
virtual supply: hosts of templates (hosts already opened this session, then in flight,
then new ones; templates in the order of the catalog's `choose` rule, sched/choice.py)
and tokens that are in flight or could be borrowed (headroom). What a job is placed
on stays reserved for the rest of the session, so later jobs see less: demand
respects job order and nothing is counted twice. Virtual hosts are packed first-fit
(sched/first_fit.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from xce.model.result import SortKey, TraceEntry
from xce.sched import placement
from xce.sched.buckets import Bucket, InKeyOrder, PendingJob
from xce.sched.capacity import Capacity
from xce.sched.choice import bucket_order
from xce.sched.demand_after import DemandAfter
from xce.sched.eligibility import reach
from xce.sched.failure import Failure, Settled
from xce.sched.first_fit import FirstFit
from xce.sched.holds import ElasticHolds, JoinedHold
from xce.sched.holds_wide import keep_for_later
from xce.sched.hosts import template_allowed
from xce.sched.kept import KeptHosts
from xce.sched.plan import Plan
from xce.sched.pools import PoolRecord
from xce.sched.realpass import Evaluator
from xce.sched.reasons import LIMIT, RESOURCE
from xce.sched.room import template_room
from xce.sched.served import SERVED, ServedOnReal
from xce.sched.share_order import local_until, merge_key
from xce.sched.state import SchedulerState
from xce.sched.supply_state import arrivals
from xce.sched.tail import Tail
from xce.sched.tokens import TokenSupply, TokenUse, cover, lending
from xce.sched.virtual import BEYOND_MAX, TemplateSupply, static_verdict, virtual_of


class Placed:
    """Where the catalog pass put one job, and when all its supply is expected."""

    __slots__ = ("job", "joined", "new_hosts", "start", "static", "template", "tokens")

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
        self.static = 0  # of those, static hosts (sched/holds_real.py)


Outcome = Placed | Failure | None  # None: nothing provisionable could help


class StaticFit:
    """What the catalog pass knows of a bucket whatever the session: per template (rank
    order) why its hosts could never take the bucket's jobs (None: they could) and how
    many of the jobs' slots an empty host holds; the templates that could, in the order
    the catalog's `choose` rule tries them (`usable_at`). The configuration is fixed
    for the bucket's life (a new configuration makes new buckets)."""

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

    def entries_of(self, job: int) -> list[TraceEntry]:
        """The trace entries of `notes`, naming `job`. They are kept with the job they
        name: the next session that tries the same job first shares them (they are
        immutable)."""
        if self.traced_job != job:
            self.traced_job = job
            self.entries = [TraceEntry(job, "catalog", c, detail) for c, detail in self.notes]
        return self.entries


def _no_template(bucket: Bucket, verdicts: list[Failure | None]) -> Failure | None:
    """Why no template can host the bucket's jobs, or None when its queue (or its own
    host list, -m) lets it burst to none."""
    checks = [v for v in verdicts if v is not None and v.check not in ("queue", "hosts")]
    if not checks:
        return None
    select = [v for v in checks if v.check == "select"]
    if len(select) == len(checks) and bucket.req.select is not None:
        return Failure(
            RESOURCE, "select", f"No template can host this job: select[{bucket.req.select.text}]"
        )
    shape = next(v for v in checks if v.check != "select")
    if shape.check == BEYOND_MAX and bucket.plain:  # (admitted: sched/holds_wide.py)
        return Failure(
            RESOURCE, shape.check,
            f"No template can host this job wholly ({shape.detail}): waiting for free "
            "hosts to run it with the template's",
        )
    return Failure(RESOURCE, shape.check, f"No template can host this job: {shape.detail}")


def static_fit(
    state: SchedulerState, templates: list[TemplateSupply], bucket: Bucket
) -> StaticFit:
    """Whether each template's hosts could ever take the bucket's jobs. Static: kept
    on the bucket."""
    fit = bucket.fits
    if fit is None:
        fit = bucket.fits = StaticFit(
            bucket, [static_verdict(state, bucket, t) for t in templates]
        )
        fit.usable_at = bucket_order(state.config, bucket, state.ranked, fit.rooms, fit.usable_at)
    assert isinstance(fit, StaticFit)
    return fit


def has_jobs_to_try(settled: list[Settled]) -> bool:
    """Whether a catalog pass over `settled` would try a job (`CatalogPass.run` tries
    the jobs the real pass settled on resources; the others keep its reason)."""
    for s in settled:
        _jobs, start, stop = s.span()
        if start < stop and s.failure.kind == RESOURCE:
            return True
    return False


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
        when first asked), to tell when real capacity would serve a job (None: no
        job has a planned end, so none would)."""
        self.state = state
        self.now = now
        self.holds = holds
        self.on_real = ServedOnReal(state, planner, now) if planner is not None else None
        self.cap = cap
        self.evaluator = evaluator
        self.trace = trace
        self.templates: list[TemplateSupply] = []
        in_flights = state.in_flight
        for position, template in enumerate(state.ranked):
            name = template.name
            in_flight = max(0, in_flights.get(name, 0))
            allowance = state.new_hosts_allowed(template)
            by_max = template_room(template.max, state.template_alive(name), in_flight)
            virtual = virtual_of(state, template)
            self.templates.append(
                TemplateSupply(
                    position, template, in_flight, allowance, virtual,
                    arrivals(state, name, now), state.lead_time(name),
                    held_back=allowance < by_max,
                )
            )
        self._by_name = {supply.template.name: supply for supply in self.templates}
        for later in holds.later.values() if holds is not None else ():  # (sched/kept.py)
            self._by_name[later.template.name].kept = KeptHosts()
        self.tokens: dict[PoolRecord, TokenSupply] = {
            pool: TokenSupply(pool) for pool in state.countable_pools
        }
        self.budget = state.config.catalog.max_jobs_per_session
        self.demand_after = DemandAfter(state, now)  # (and when its next job comes of age)
        self.evaluated = 0
        # True while each settled bucket has one outcome for all its jobs: no job was
        # placed or held at a limit on its own.
        self.one_each = True
        self.first_fit = FirstFit(cap, now)
        self._trace_of: dict[Bucket, list[tuple[int, int]]] = {}  # runs of trace indices
        self._usable: dict[Bucket, list[TemplateSupply]] = {}
        # (shape, template) -> number of opened hosts that could not hold that shape
        self._no_room: dict[tuple[object, int], int] = {}
        self._dead: set[tuple[object, int]] = set()  # (shape, template) that never fit
        self._limit_noted: set[tuple[Bucket, str]] = set()

    # ------------------------------------------------------------------ driver
    def run(self, settled: list[Settled]) -> list[tuple[Settled, Sequence[PendingJob], Outcome]]:
        """Try the settled buckets' jobs in scheduling order.

        Returns, per bucket, runs of jobs with what happened to them: a Placed for
        each placed job (one entry per job), a Failure (the catalog's reason for the
        rest of the bucket) or None (keep the real pass's reason)."""
        if not self.templates and not self.tokens:  # nothing is provisionable
            return [(s, s.pending(), None) for s in settled]
        results: list[tuple[Settled, Sequence[PendingJob], Outcome]] = []
        fresh: list[tuple[SortKey, int, Settled, int]] = []
        buckets: set[Bucket] = set()
        fair = bool(self.state.fairshare.trees)  # (merge keys: sched/share_order.py)
        # (the settled jobs are read where they are, not copied: Settled.span)
        for s in settled:
            jobs, start, stop = s.span()
            if s.failure.kind != RESOURCE:
                results.append((s, s.pending(), None))
            elif start < stop:
                key = jobs[start].key
                fresh.append((merge_key(s.bucket, key) if fair else key, len(fresh), s, start))
                if s.bucket in buckets:  # settled in parts (reservations, holds)
                    self.one_each = False
                buckets.add(s.bucket)
        queue = InKeyOrder(fresh)
        budget = self.budget
        limits = self.state.config.limits
        while queue.left():
            _key, seq, s, pos = queue.pop()
            members, _start, end = s.span()
            if self.evaluated >= budget:
                results.append((s, Tail(members, pos, end), None))
                self._note(
                    s, members[pos], "cap", f"catalog pass cap reached ({budget} jobs)"
                )
                continue
            next_key: SortKey | None = None  # where another bucket's next job comes
            known = False
            while True:  # the job at `pos` is the earliest left
                self.evaluated += 1
                job = members[pos]
                outcome = self.try_job(s, job)
                # Placed, or held for this job only: at its user's or queue's limit, or
                # started on real capacity
                if isinstance(outcome, Placed) or (
                    isinstance(outcome, Failure) and (
                        outcome.kind == LIMIT or outcome.check == SERVED
                        or self.demand_after.alone(outcome, s.bucket, members, pos + 1, end)
                    )
                ):
                    results.append((s, [job], outcome))
                    self.one_each = False
                else:
                    rest: Sequence[PendingJob] = Tail(members, pos, end)
                    if limits:
                        limited, rest = self.evaluator.split_limited(
                            members[pos:end], s.bucket.n
                        )
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
                    next_key = local_until(s.bucket, members[pos].key, queue.next_key(), fair)
                    known = True
                if next_key is not None and not members[pos].key < next_key:
                    break
            if pos < end:
                key = members[pos].key
                queue.push(merge_key(s.bucket, key) if fair else key, seq, s, pos)
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
            if (young := self._young(s, job)) is not None:  # (no token borrowed)
                return young
            placed = self._on_real_hosts(s, job)
            if placed is not None:
                return placed
        usable = self._usable.get(bucket)
        if usable is None:
            usable = self._usable[bucket] = self._usable_templates(s, job)
        # (a hold first: a job wider than its template's max holds it, and only it
        # places the job there, sched/holds_wide.py)
        hold = self.holds.held.get(job.id) if self.holds is not None else None
        if hold is not None:
            return self._on_template(s, job, self._by_name[hold.template.name], True, hold)
        if self.holds is not None and job.id in self.holds.later:
            supply = self._by_name[self.holds.later[job.id].template.name]
            per_host = static_fit(self.state, self.templates, bucket).rooms[supply.index]
            return keep_for_later(self.holds, job.id, supply, per_host)
        if not usable:
            return static_fit(self.state, self.templates, bucket).why_not
        if self.on_real is not None and not bucket.shared:
            served = self.on_real.served(bucket, job, usable)
            if served is not None:
                return served
        if (young := self._young(s, job)) is not None:
            return young
        n = bucket.n
        # Supply that needs no new host first, whichever template has it: hosts opened
        # this session, then in-flight hosts, templates in the `choose` rule's order (free
        # slot totals are a cheap necessary condition for the first).
        shape = bucket.shape
        dead = self._dead
        for supply in usable:
            if supply.free_total >= n and (shape, supply.index) not in dead:
                outcome = self._on_template(s, job, supply, False, in_flight=False)
                if isinstance(outcome, Placed):
                    return outcome
        flying = [u for u in usable if u.in_flight and (shape, u.index) not in dead]
        for supply in flying:
            outcome = self._on_template(s, job, supply, False)
            if isinstance(outcome, Placed):
                return outcome
        failures: list[Failure] = []
        # Then new hosts: first of a template with hosts in flight, for the rest of a
        # job on them (in-flight hosts are not left as surplus while new ones are
        # asked for: issue 18's "in-flight first"), then of the others.
        for supply in (flying + [u for u in usable if u not in flying]) if flying else usable:
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

    def _young(self, s: Settled, job: PendingJob) -> Failure | None:
        """Why a job asks for no supply yet (sched/demand_after.py), traced."""
        young = self.demand_after.young(s.bucket, job)
        if young is not None:
            self._note(s, job, young.check, young.detail)
        return young

    def _usable_templates(self, s: Settled, job: PendingJob) -> list[TemplateSupply]:
        """The templates whose hosts could ever take the bucket's jobs; the others are
        traced (with `job`, the first job tried this session) in rank order."""
        fit = static_fit(self.state, self.templates, s.bucket)
        if self.trace is not None and fit.notes:
            self._note_static(s, job, fit)
        templates = self.templates
        return [templates[at] for at in fit.usable_at]

    def _note_static(self, s: Settled, job: PendingJob, fit: StaticFit) -> None:
        """Trace the templates that can never take the bucket's jobs."""
        trace = self.trace
        assert trace is not None
        start = len(trace)
        trace.extend(fit.entries_of(job.id))
        self._traced(s.bucket, start, len(trace))

    # ------------------------------------------------------------------ placements
    def _on_real_hosts(self, s: Settled, job: PendingJob) -> Placed | None:
        """A job short only of shared tokens: real hosts plus tokens to come, first
        where the real pass would put it, then on the hosts each choice of pools able
        to lend enough reaches (as the real pass takes pools: Evaluator.by_pools)."""
        bucket = s.bucket
        evaluator = self.evaluator
        cands = evaluator.candidates(bucket)
        if isinstance(cands, Failure):
            return None
        req, key = bucket.req, evaluator.key_for(bucket)
        hosts = placement.place(
            evaluator.room(bucket, cands), bucket.n, req.span_hosts, req.span_ptile, key
        )
        if hosts is None:
            return None
        state, cap = self.state, self.cap
        tokens = cover(state, cap, self.tokens, bucket, partial(reaches_all, state, hosts))
        if isinstance(tokens, Failure):
            for combo, found in evaluator.by_pools(
                bucket, cands, hosts, key, lending(state, cap, self.tokens, bucket)
            ):
                # (the hosts found are all within reach of the pools chosen)
                uses = cover(state, cap, self.tokens, bucket, combo.__contains__)
                if not isinstance(uses, Failure):
                    return self._commit(bucket, job, None, found, False, uses, 0, self.now)
            self._note(s, job, tokens.check, tokens.detail)
            return None
        return self._commit(bucket, job, None, hosts, False, tokens, 0, self.now)

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
        chosen, unplaced, left = self.first_fit.place(bucket, supply, need, pieces)
        sizes: list[int] = []
        if left > 0:
            if hold is None:
                self._no_room[key] = limit
            if pieces:
                sizes = unplaced  # one more host for each piece
            else:
                sizes = host_sizes(
                    left, static_fit(self.state, self.templates, bucket).rooms[supply.index]
                )
            if not in_flight:
                return None
            beyond = len(sizes) - min(len(sizes), supply.in_flight)  # new hosts needed
            if beyond and not new:
                return None
            if beyond > supply.allowance:
                return supply.no_more
        busy_until = _busy_until(supply, hold, self.now) + bucket.limit if supply.kept else 0.0
        if supply.kept is not None and (kept := supply.kept_from(chosen, len(sizes), busy_until)):
            return kept
        if bucket.shared:
            name = supply.template.name
            tokens = cover(
                self.state, self.cap, self.tokens, bucket,
                lambda p: p.hosts is None or template_allowed(p.hosts, name),
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
        new_hosts, opened, latest = (
            self.first_fit.open_hosts(supply, sizes, bucket) if sizes else (False, 0, 0.0)
        )
        supply.lend(chosen, len(sizes), busy_until)
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
        placed.static = hold.static
        return placed

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
            hosts, bucket.use, {u.pool: u.amount for u in tokens} if tokens else {},
            job.limit_refs, opened, bucket.exclusive,
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


def host_sizes(slots: int, per_host: int) -> list[int]:
    """`slots` of a job on new hosts of `per_host` slots each: full ones, then the
    remainder."""
    count = -(-slots // per_host)
    sizes = [per_host] * count
    sizes[-1] = slots - per_host * (count - 1)
    return sizes


def _busy_until(supply: TemplateSupply, hold: JoinedHold | None, now: float) -> float:
    """The latest a job placed on the template now could start: when a new host or
    the last in-flight one would join, or its hold's start."""
    start = now + supply.lead
    if supply.arrivals and supply.arrivals[-1] > start:
        start = supply.arrivals[-1]
    return start if hold is None or hold.start < start else hold.start


def reaches_all(state: SchedulerState, hosts: dict[int, int], pool: PoolRecord) -> bool:
    """Whether `pool` reaches every one of the hosts."""
    reachable = reach(state, pool)
    return reachable is None or all(i in reachable for i in hosts)
