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

import heapq
import math
from collections.abc import Callable

from xce.model.cluster import HostTemplate
from xce.model.result import SortKey, TraceEntry
from xce.sched import placement
from xce.sched.buckets import Bucket, PendingJob
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.eligibility import reach
from xce.sched.hosts import HostRecord, template_allowed
from xce.sched.pools import PoolRecord
from xce.sched.realpass import Evaluator, Failure, Settled
from xce.sched.reasons import LIMIT, RESOURCE
from xce.sched.state import SchedulerState


class TemplateSupply:
    """One template's virtual hosts in this session."""

    __slots__ = (
        "allowance",
        "empty",
        "expected",
        "free_total",
        "frontier",
        "hosts",
        "in_flight",
        "in_flight_total",
        "index",
        "jobs",
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

        self.jobs: list[int] = []
        self.empty, self.resources = virtual


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
    """Where the catalog pass put one job."""

    __slots__ = ("job", "new_hosts", "template", "tokens")

    def __init__(
        self, job: int, template: TemplateSupply | None, new_hosts: bool, tokens: list[TokenUse]
    ) -> None:
        self.job = job
        self.template = template
        self.new_hosts = new_hosts
        self.tokens = tokens


Outcome = Placed | Failure | None  # None: nothing provisionable could help


class CatalogPass:
    """Runs the catalog pass over the buckets the real pass settled on resources."""

    def __init__(
        self,
        state: SchedulerState,
        cap: Capacity,
        evaluator: Evaluator,
        trace: list[TraceEntry],
    ) -> None:
        self.state = state
        self.cap = cap
        self.evaluator = evaluator
        self.trace = trace
        self.templates: list[TemplateSupply] = []
        catalog = state.config.catalog
        ranked = sorted(catalog.templates, key=lambda t: (t.rank, t.name))
        for position, template in enumerate(ranked):
            in_flight = max(0, state.in_flight.get(template.name, 0))
            allowance = template.max - state.template_alive(template.name) - in_flight
            if template.name in state.allowance:
                allowance = min(allowance, state.allowance[template.name])
            virtual = state.virtual.get(template.name)
            if virtual is None:
                virtual = state.virtual[template.name] = _virtual_host(template)
            self.templates.append(
                TemplateSupply(position, template, in_flight, max(0, allowance), virtual)
            )
        self.tokens: dict[PoolRecord, TokenSupply] = {
            pool: TokenSupply(pool)
            for pools in state.pools.values()
            for pool in pools
            if pool.countable is not None
        }
        self.budget = catalog.max_jobs_per_session
        self.evaluated = 0
        self.placed: list[Placed] = []
        # Per bucket: templates that can never hold it (static), and first-fit cursors.
        self._fits: dict[tuple[int, int], Failure | None] = {}
        # First-fit state is shared by buckets of one shape (slots, per-slot
        # consumables, span): whether a host can take such a job does not depend on
        # the queue, user or select.
        self._cursor: dict[tuple[tuple[tuple[str, float], ...], int, int], int] = {}
        self._trace_of: dict[int, list[int]] = {}  # id(bucket) -> trace indices
        self._usable: dict[int, list[TemplateSupply]] = {}  # id(bucket) -> templates
        self._usable_fns: dict[tuple[tuple[str, float], ...], Callable[[int], int]] = {}
        # (shape, template) -> number of opened hosts that could not hold that shape
        self._no_room: dict[tuple[object, int], int] = {}
        self._dead: set[tuple[object, int]] = set()  # (shape, template) that never fit
        self._limit_noted: set[tuple[int, str]] = set()

    # ------------------------------------------------------------------ driver
    def run(self, settled: list[Settled]) -> list[tuple[Settled, list[PendingJob], Outcome]]:
        """Try the settled buckets' jobs in scheduling order.

        Returns, per bucket, runs of jobs with what happened to them: a Placed for
        each placed job (one entry per job), a Failure (the catalog's reason for the
        rest of the bucket) or None (keep the real pass's reason)."""
        results: list[tuple[Settled, list[PendingJob], Outcome]] = []
        if not self.templates and not self.tokens:  # nothing is provisionable
            return [(s, s.members, None) for s in settled]
        heap: list[tuple[SortKey, int, Settled, int]] = [
            (s.members[0].key, seq, s, 0)
            for seq, s in enumerate(settled)
            if s.failure.kind == RESOURCE and s.members
        ]
        for s in settled:
            if s.failure.kind != RESOURCE:
                results.append((s, s.members, None))
        heapq.heapify(heap)
        while heap:
            _key, seq, s, pos = heapq.heappop(heap)
            if self.evaluated >= self.budget:
                results.append((s, s.members[pos:], None))
                self._note(
                    s, s.members[pos], "cap", f"catalog pass cap reached ({self.budget} jobs)"
                )
                continue
            next_key = heap[0][0] if heap else None
            members = s.members
            while pos < len(members) and (next_key is None or members[pos].key < next_key):
                if self.evaluated >= self.budget:
                    break
                self.evaluated += 1
                job = members[pos]
                outcome = self.try_job(s, job)
                if isinstance(outcome, Failure) and outcome.kind == LIMIT:
                    results.append((s, [job], outcome))  # only this job's user or queue
                elif not isinstance(outcome, Placed):
                    limited, rest = self.evaluator.split_limited(members[pos:], s.bucket.n)
                    for held, why in limited:
                        self._note_limit(s, held, why)
                        results.append((s, [held], why))
                    results.append((s, rest, outcome))
                    pos = len(members)
                    break
                else:
                    results.append((s, [job], outcome))
                pos += 1
            if pos < len(members):
                heapq.heappush(heap, (members[pos].key, seq, s, pos))
        return results

    def trace_indices(self, bucket: Bucket) -> list[int]:
        return self._trace_of.get(id(bucket), [])

    def _note_limit(self, s: Settled, job: PendingJob, failure: Failure) -> None:
        """Trace a limit reached by virtual placements, once per bucket and limit."""
        if (id(s.bucket), failure.reason) not in self._limit_noted:
            self._limit_noted.add((id(s.bucket), failure.reason))
            self._note(s, job, "limit", failure.reason)

    def _note(self, s: Settled, job: PendingJob, check: str, detail: str) -> None:
        self.trace.append(TraceEntry(job.id, "catalog", check, detail))
        self._trace_of.setdefault(id(s.bucket), []).append(len(self.trace) - 1)

    # ------------------------------------------------------------------ one job
    def try_job(self, s: Settled, job: PendingJob) -> Outcome:
        bucket = s.bucket
        failure = self.evaluator.limit_failure(job, bucket.n)
        if failure is not None:
            self._note_limit(s, job, failure)
            return failure
        if s.failure.check == "shared":
            placed = self._on_real_hosts(s, job)
            if placed is not None:
                return placed
        usable = self._usable.get(id(bucket))
        if usable is None:
            usable = [t for t in self.templates if self._static_fit(s, job, t) is None]
            self._usable[id(bucket)] = usable
        if not usable:
            return self._why_not(s)
        n = bucket.n
        # Free slot totals are a cheap necessary condition: skip templates without them.
        shape = _shape(bucket)
        dead = self._dead
        for supply in usable:
            if supply.free_total >= n and (shape, supply.index) not in dead:
                outcome = self._on_template(s, job, supply, opening=False)
                if isinstance(outcome, Placed):
                    return outcome
        failures: list[Failure | HostTemplate] = []  # a template: it allows no more hosts
        for supply in usable:
            if (shape, supply.index) in dead or (
                supply.allowance == 0 and supply.in_flight == 0 and supply.free_total < n
            ):
                failures.append(supply.template)
                continue
            outcome = self._on_template(s, job, supply, opening=True)
            if isinstance(outcome, Placed):
                return outcome
            assert isinstance(outcome, Failure)  # opening hosts places or says why not
            failures.append(outcome)
        reasons = [f if isinstance(f, Failure) else _no_more_hosts(f) for f in failures]
        for failed in reasons:
            self._note(s, job, failed.check, failed.detail)
        return reasons[0]

    def _why_not(self, s: Settled) -> Outcome:
        """No template can take this bucket: say why, or keep the real reason when the
        queue may not burst at all."""
        verdicts = [self._fits[(id(s.bucket), t.index)] for t in self.templates]
        checks = [v for v in verdicts if v is not None and v.check != "queue"]
        if not checks:
            return None
        select = [v for v in checks if v.check == "select"]
        if len(select) == len(checks) and s.bucket.req.select is not None:
            return Failure(
                RESOURCE, "select",
                f"No template can host this job: select[{s.bucket.req.select.text}]",
            )
        shape = next(v for v in checks if v.check != "select")
        return Failure(RESOURCE, shape.check, f"No template can host this job: {shape.detail}")

    def _static_fit(self, s: Settled, job: PendingJob, supply: TemplateSupply) -> Failure | None:
        """Whether hosts of a template could ever take this bucket (cached)."""
        bucket = s.bucket
        key = (id(bucket), supply.index)
        if key in self._fits:
            return self._fits[key]
        template = supply.template
        verdict: Failure | None = None
        select = bucket.req.select
        if not template_allowed(bucket.queue.hosts, template.name):
            verdict = Failure(
                RESOURCE, "queue", f"queue {bucket.queue.name} may not use template {template.name}"
            )
        elif select is not None and not select(supply.empty.attrs):
            verdict = Failure(
                RESOURCE, "select", f"select[{select.text}] does not match template {template.name}"
            )
        else:
            room = self._empty_room(bucket, supply)
            need = self._unit(bucket)
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
        self._fits[key] = verdict
        if verdict is not None:
            self._note(s, job, verdict.check, verdict.detail)
        return verdict

    @staticmethod
    def _unit(bucket: Bucket) -> int:
        """Slots the job needs on at least one host."""
        req = bucket.req
        if req.span_hosts == 1:
            return bucket.n
        if req.span_ptile is not None:
            return min(req.span_ptile, bucket.n)
        return 1

    @staticmethod
    def _empty_room(bucket: Bucket, supply: TemplateSupply) -> int:
        room = supply.template.slots
        for res, amount in bucket.per_slot:
            value = supply.template.resources.get(res, 0)
            have = 0.0 if isinstance(value, bool) else float(value)
            room = min(room, int((have + EPSILON) // amount))
        return room

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
        return self._commit(bucket, job, None, hosts, False, tokens)

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
        self, s: Settled, job: PendingJob, supply: TemplateSupply, opening: bool
    ) -> Outcome:
        """Place the job on the template's hosts opened so far, and when `opening`,
        on more: its in-flight hosts first, then new ones within the allowance.

        In-flight hosts are opened exactly where new ones would be, so that a session
        that finds last session's demand in flight places the same jobs on it and
        asks for nothing more."""
        bucket = s.bucket
        cap = self.cap
        key = (_shape(bucket), supply.index)
        hosts_list = supply.hosts
        # Capacity only shrinks: hosts that could not hold this bucket still cannot
        # until the template opens more.
        known_full = self._no_room.get(key) == len(hosts_list)
        if known_full and not opening:
            return None
        if known_full and supply.allowance == 0 and supply.in_flight == 0:
            self._dead.add(key)  # for the rest of the session: capacity only shrinks
            return _no_more_hosts(supply.template)
        limit = len(hosts_list)
        n = bucket.n
        ptile = bucket.req.span_ptile
        # The pieces a job's span makes, each on its own host: the whole job for a
        # single-host job; for span[ptile=N], N-slot pieces and the remainder. A job
        # without span spreads slot by slot (no pieces).
        if self._unit(bucket) == n:
            pieces = [n]
        elif ptile is not None:
            full, rest = divmod(n, ptile)
            pieces = [ptile] * full + ([rest] if rest else [])
        else:
            pieces = []
        smallest = min(pieces) if pieces else 1
        usable = self._usable_fn(bucket)
        # First-fit fills hosts in order: hosts before the template's frontier are
        # full; hosts before this shape's cursor cannot take its smallest piece.
        free_slots = cap.free_slots
        frontier = supply.frontier
        while frontier < len(hosts_list) and free_slots[hosts_list[frontier]] <= 0:
            frontier += 1
        supply.frontier = frontier
        # Whether a host can take `smallest` slots depends only on the per-slot
        # consumables: every shape with the same ones shares the cursor.
        cursor_key = (bucket.per_slot, smallest, supply.index)
        cursor = max(self._cursor.get(cursor_key, 0), frontier)
        while cursor < limit and usable(hosts_list[cursor]) < smallest:
            cursor += 1
        self._cursor[cursor_key] = cursor
        chosen: dict[int, int] = {}
        unplaced: list[int] = []  # pieces no opened host can take
        left = 0
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
        else:
            left = n
            for position in range(cursor, limit):
                index = hosts_list[position]
                take = min(usable(index), left)
                if take > 0:
                    chosen[index] = take
                    left -= take
                    if left == 0:
                        break
        fresh: list[int] = []
        expected = 0
        if left > 0:
            self._no_room[key] = len(hosts_list)
            if not opening:
                return None
            if pieces:
                sizes = unplaced  # one more host for each piece
            else:
                per_host = self._empty_room(bucket, supply)
                count = math.ceil(left / per_host)
                sizes = [per_host] * (count - 1) + [left - per_host * (count - 1)]
            expected = min(len(sizes), supply.in_flight)
            if len(sizes) - expected > supply.allowance:
                return _no_more_hosts(supply.template)
            for size in sizes:
                index = self._open(supply)
                fresh.append(index)
                chosen[index] = size
        name = supply.template.name
        tokens = self._cover(
            bucket, lambda p: p.hosts is None or template_allowed(p.hosts, name)
        )
        if isinstance(tokens, Failure):
            self.cap.drop_hosts(len(fresh))
            supply.free_total -= len(fresh) * supply.template.slots
            return tokens
        hosts_list.extend(fresh)
        supply.expected.update(fresh[:expected])
        supply.in_flight -= expected
        supply.new += len(fresh) - expected
        supply.allowance -= len(fresh) - expected
        new_hosts = any(i not in supply.expected for i in chosen)
        return self._commit(bucket, job, supply, chosen, new_hosts, tokens)

    def _open(self, supply: TemplateSupply) -> int:
        """A new virtual host of the template (all share the template's record)."""
        supply.free_total += supply.template.slots
        return self.cap.add_host(supply.empty, supply.resources)

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
    ) -> Placed:
        self.cap.take(hosts, bucket.per_slot, {u.pool: u.amount for u in tokens}, job.limit_refs)
        for use in tokens:
            if use.supply is not None and use.short > 0:
                use.supply.in_flight -= use.from_in_flight
                use.supply.headroom -= use.from_headroom
                use.supply.from_in_flight += use.from_in_flight
                use.supply.from_headroom += use.from_headroom
                use.supply.jobs.append(job.id)
        if supply is not None:
            supply.jobs.append(job.id)
            supply.free_total -= sum(hosts.values())
        placed = Placed(job.id, supply, new_hosts, tokens)
        self.placed.append(placed)
        return placed


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


def _shape(bucket: Bucket) -> tuple[object, ...]:
    """What decides whether a virtual host can take a bucket's job: slots, per-slot
    consumables and span (not the queue, user or select)."""
    return (bucket.n, bucket.per_slot, bucket.req.span_hosts, bucket.req.span_ptile)
