"""The simulator: the scheduler core driven by a workload and simulated providers.

It feeds the scheduler exactly the events the live controller does (`xce.model.events`),
runs a session at the next session tick after any input changed or a timer fell due
(sessions where nothing changed are not run at all: they could not decide anything
new), applies the session's dispatches (each job ends after its recorded run time, or
at its run limit when `simulation.enforce_run_limits` says so), and runs the
provisioning policy (`xce.policy.decide`) on the session's demand and idle supply.

Timers are not decided here: the session result's `next_due` (the scheduler's) and
`xce.policy.timers.next_due` (the policy's) say when the next wake-up is due.
"""

from __future__ import annotations

import math
import random
import time as wallclock
from collections.abc import Callable, Mapping
from functools import partial
from itertools import groupby
from typing import Any, Final

from xce.model.api import RUN_LIMIT_REACHED
from xce.model.cluster import Catalog, ClusterConfig, HostTemplate, Queue
from xce.model.events import (
    ConfigLoaded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobStarted,
    JobSubmitted,
    SchedulerEvent,
    SupplyChanged,
)
from xce.model.jobs import JobSpec
from xce.model.policy import LeadTime, PolicyConfig, ProviderModel, TokenModel
from xce.model.recording import Recorder
from xce.model.result import SessionResult
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    PolicyInput,
    PolicyMemory,
    ProvisionedHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)
from xce.policy.actions import CancelHosts
from xce.policy.decide import decide, quiet_memory  # (functions; also a module `decide`)
from xce.policy.timers import due_at
from xce.sched import SchedulerState, run_session
from xce.sched.admission import oversize
from xce.sched.idle import idle_due
from xce.sched.loss import lost_job
from xce.sched.runlimit import run_limit
from xce.sim.loop import SESSION, TIMER, EventLoop
from xce.sim.metrics import Metrics
from xce.sim.providers import HostProvider, TokenPool
from xce.sim.workload import Workload, WorkloadJob
from xce.tuning import collector_paused

NEVER: Final = math.inf
# A job ended at its run limit, as the live agent ends it (TERM first).
LIMIT_SIGNAL: Final = 15
# The policy actions kept in `Simulator.actions_log`: at least the latest this many
# (older ones are dropped in batches, so that a run going on for ever stays bounded).
ACTIONS_KEPT: Final = 10_000


class Order:
    """Hosts of one template requested together that join at the same moment (one
    action), or fail then (one action each: `joins` False); the hosts of it cancelled
    before then are taken off `count`."""

    __slots__ = ("count", "joins", "requested")

    def __init__(self, requested: float, count: int, joins: bool) -> None:
        self.requested = requested
        self.count = count
        self.joins = joins


def mean_lead_time(lead: LeadTime) -> float:
    """The mean of a lead-time model (`xce.sim.providers.draw_lead_time` draws from it;
    a normal one is taken at its mean, its few draws below 0 notwithstanding)."""
    if lead.dist == "uniform":
        return (lead.low + lead.high) / 2
    return lead.mean


class Simulator:
    """One simulation run (see docs/simulator.md)."""

    def __init__(
        self,
        config: ClusterConfig,
        workload: Workload,
        *,
        seed: int | None = None,
        recorder: Recorder | None = None,
        policy: PolicyConfig | None = None,
        timer: Callable[[], float] | None = None,
        host_providers: Mapping[str, HostProvider] | None = None,
        reasons: bool = True,
    ) -> None:
        self.config = config
        self.policy = policy or config.policy  # (a property: see its setter)
        self.workload = workload
        self.seed = config.simulation.seed if seed is None else seed
        self.rng = random.Random(self.seed)
        self.recorder = recorder
        self.timer = timer
        # Whether sessions build their pend groups (why each job waits): a run nobody
        # asks that of (`xce sim run` without --record) leaves them out, same decisions.
        self.reasons = reasons or recorder is not None
        self._interval: float = config.session_interval
        self.loop = EventLoop()
        self.state = SchedulerState()
        self.metrics = Metrics()
        # The provisioning policy's round (observers may wrap it: a compiled module's
        # globals cannot be patched).
        self.decide: Callable[
            [PolicyInput, PolicyMemory, PolicyConfig, Catalog], tuple[list[Action], PolicyMemory]
        ] = decide
        self.memory = PolicyMemory()
        self.templates: dict[str, HostTemplate] = {t.name: t for t in config.catalog.templates}
        self._supply(config, host_providers)
        self.actions_log: list[tuple[float, Action]] = []  # the latest (ACTIONS_KEPT)
        self.last_result: SessionResult | None = None
        self._host_seq = 0
        # running job -> the number of its start among all starts: a finish scheduled
        # for an earlier run of a job since requeued is stale (numbers never repeat)
        self._run_gen: dict[int, int] = {}
        self._starts = 0
        self._session_at: float | None = None
        self._last_session = -math.inf
        self._timer_at: float | None = None
        self._core_due = NEVER  # the last session's next_due (the scheduler's timers)
        self._specs: dict[int, WorkloadJob] = {}
        # job -> how long it runs here: its recorded run time, or its run limit when
        # that is shorter and limits are enforced (those jobs are in `_cut`)
        self._runs: dict[int, float] = {}
        self._cut: set[int] = set()
        self._enforce = config.simulation.enforce_run_limits
        self._queue_of: dict[str, Queue] = {q.name: q for q in config.queues}
        self._token_clock = 0.0
        self.first_submit = workload.jobs[0].submit if workload.jobs else 0.0
        # Available slot-seconds, integrated as capacity changes (from the first submit):
        # the slots present now, since when, and the slot-seconds up to then.
        self._capacity_level = 0.0
        self._capacity_clock = self.first_submit
        self._capacity_seconds = 0.0
        self._apply(ConfigLoaded(config=config))
        self._expected_lead_times()
        self._static_slots = sum(h.slots for h in config.hosts)
        self._static_hosts = len(config.hosts)
        # Wide jobs use at least a quarter of the machine: the static hosts' slots, or
        # without static hosts the most the catalog could provide.
        machine = self._static_slots or sum(t.max * t.slots for t in config.catalog.templates)
        self.metrics.wide_slots = machine / 4
        self._capacity(float(self._static_slots))
        self._first_queue = config.queues[0].name
        self._queues = {q.name for q in config.queues}
        self._admit(workload)
        self.start_wall = wallclock.perf_counter()

    def _supply(
        self, config: ClusterConfig, host_providers: Mapping[str, HostProvider] | None
    ) -> None:
        """The simulated host providers (per provider, and per template) and license
        pools, and what is in flight, borrowed and provisioned (nothing yet)."""
        self.providers = {
            t.provider: HostProvider(
                t.provider, config.simulation.providers.get(t.provider, ProviderModel())
            )
            for t in config.catalog.templates
        }
        # template -> its simulated provider: its provider's, unless `host_providers`
        # gives it one of its own (xce.sim.provider_kinds: real providers' models)
        self.template_providers: dict[str, HostProvider] = {
            t.name: self.providers[t.provider] for t in config.catalog.templates
        }
        self.template_providers.update(host_providers or {})
        self.pools: dict[str, TokenPool] = {}
        for countable in config.catalog.countables:
            key = self._token_key(countable.resource, countable.pool)
            model = config.simulation.countables.get(key) or config.simulation.countables.get(
                countable.resource, TokenModel()
            )
            size = countable.max_borrow if model.pool is None else model.pool
            self.pools[key] = TokenPool(key, model, size)
        self.in_flight: dict[str, int] = {t: 0 for t in self.templates}
        # template -> its hosts in flight, in request order (the scheduler is told when
        # each was requested; cancelled: the latest first)
        self._orders: dict[str, list[Order]] = {t: [] for t in self.templates}
        self._void = 0  # scheduled joins and failures of hosts since cancelled (no work)
        self._template_slots: dict[str, float] = {
            t.name: float(t.slots) for t in config.catalog.templates
        }
        self.tokens_in_flight: dict[str, float] = {k: 0.0 for k in self.pools}
        self.borrowed: dict[str, float] = {k: 0.0 for k in self.pools}
        self.provisioned: dict[str, tuple[str, float]] = {}  # host -> (template, joined)
        self.used_hosts: set[str] = set()  # hosts present that ran a job
        # running job on provisioned hosts -> (start, template -> its slots there over
        # the template's slots): host-hours busy, counted when its run ends
        self._busy: dict[int, tuple[float, dict[str, float]]] = {}
        self.closed: set[str] = set()  # provisioned hosts drained, not yet released
        # provisioned hosts not drained -> when they joined, in join order
        self._open_provisioned: dict[str, float] = {}
        self.failures: list[str] = []
        self.joined: list[str] = []

    def _admit(self, workload: Workload) -> None:
        """The workload's jobs that could ever run (the others are too large), as the
        stream of arrivals."""
        config, hosts = self.config, self.state.live_hosts()
        # Admission depends on the job's slots and requirement only: once per pair.
        verdicts: dict[tuple[int, str], bool] = {}
        arrivals: list[WorkloadJob] = []
        for job in workload.jobs:
            shape = (job.procs, job.res)
            fits = verdicts.get(shape)
            if fits is None:
                fits = verdicts[shape] = oversize(config, hosts, job.procs, job.res) is None
            if not fits:
                self.metrics.too_large.append(job.id)
                continue
            self._specs[job.id] = job
            arrivals.append(job)
        # Arrivals are a sorted stream merged into the event loop (each as an input
        # scheduled before anything else), not hundreds of thousands of heap entries.
        # (A stable sort by time: the order the heap would pop them in.)
        now = self.loop.now
        arrivals.sort(key=lambda j: max(j.submit, now))
        self._arrivals = arrivals
        self.loop.stream([max(j.submit, now) for j in arrivals], self._arrive)

    # ------------------------------------------------------------------ plumbing
    @staticmethod
    def _token_key(resource: str, pool: str | None) -> str:
        return resource if pool in (None, "default") else f"{resource}/{pool}"

    @property
    def now(self) -> float:
        return self.loop.now

    # The policy and its memory, with the fields read on every session kept beside them
    # (compiled, reading a field of a model struct is a slow generic call).
    @property
    def policy(self) -> PolicyConfig:
        return self._policy

    @policy.setter
    def policy(self, policy: PolicyConfig) -> None:
        self._policy = policy
        self._max_lifetime: float = policy.max_lifetime
        self._persistence: float = policy.persistence

    @property
    def memory(self) -> PolicyMemory:
        return self._memory

    @memory.setter
    def memory(self, memory: PolicyMemory) -> None:
        self._memory = memory
        self._demand_since: dict[str, float] = memory.demand_since
        self._backoff_until: dict[str, float] = memory.backoff_until
        self._held_until: dict[str, float] = memory.held_until

    def _oldest_joined(self) -> float:
        """When the provisioned host that joined first joined (inf: none is up)."""
        for _template, joined in self.provisioned.values():
            return joined
        return math.inf

    def _apply(self, event: SchedulerEvent) -> None:
        if self.recorder is not None:
            self.recorder.event(self.now, event)
        self.state.apply(event)

    def _expected_lead_times(self) -> None:
        """Tell the scheduler how long a new host of each template takes to join, the
        mean of its simulated provider's lead-time model, for templates whose
        `expected_lead_time` is not set (the scheduler uses the configured one)."""
        leads = {
            t.name: mean_lead_time(self.template_providers[t.name].model.lead_time)
            for t in self.config.catalog.templates if t.expected_lead_time is None
        }
        if leads:
            self._apply(SupplyChanged(lead_time=leads, time=self.now))

    def _capacity(self, delta: float) -> None:
        """The slots present change by `delta` now (integrated from the first submit)."""
        when = self.now
        if when < self.first_submit:
            when = self.first_submit
        self._capacity_seconds += self._capacity_level * (when - self._capacity_clock)
        self._capacity_clock = when
        self._capacity_level += delta

    def _dirty(self) -> None:
        """An input changed: run a session at the next session tick.

        A session already due is at that tick: it was the next tick after the last
        session when it was set, and time has not passed it (nor has a session run)."""
        if self._session_at is not None:
            return
        interval = self._interval
        tick = math.ceil(self.now / interval) * interval
        if tick <= self._last_session:
            tick = self._last_session + interval
        self._session_at = tick
        self.loop.at(tick, partial(self._session, tick), SESSION)

    # ------------------------------------------------------------------ jobs
    def _arrive(self, index: int) -> None:
        job = self._arrivals[index]
        queue = job.queue
        spec = JobSpec(
            id=job.id, user=job.user or "nobody",
            queue=queue if queue in self._queues else self._first_queue,
            n=job.procs, res=job.res, submit=job.submit, run=job.run,
            run_limit=job.run_limit,
        )
        run = job.run
        if self._enforce:
            limit = run_limit(spec, self._queue_of[spec.queue])
            if limit is not None and run > limit:
                run = limit
                self._cut.add(job.id)
        self._runs[job.id] = run
        self._submit(spec)

    def _submit(self, spec: JobSpec) -> None:
        self._apply(JobSubmitted(job=spec))
        self.metrics.submitted[spec.id] = spec.submit
        self.metrics.slots[spec.id] = spec.n
        self._dirty()

    def _finish(self, job: int, generation: int) -> None:
        if self._run_gen.get(job) != generation:
            return  # requeued meanwhile
        del self._run_gen[job]
        if job in self._busy:
            self._busy_end(job)
        if self._cut and job in self._cut:  # ended at its run limit
            self._cut.discard(job)
            self.metrics.jobs_killed_at_limit += 1
            self._apply(JobFinished(job=job, time=self.now, signal=LIMIT_SIGNAL,
                                    reason=RUN_LIMIT_REACHED))
        else:
            self._apply(JobFinished(job=job, time=self.now))
        self.metrics.finish(job, self.now)
        self._freed()

    def _busy_start(self, job: int, hosts: dict[str, int], start: float) -> None:
        """A job starts on `hosts`: its share of each template's provisioned hosts."""
        provisioned, slots_of = self.provisioned, self._template_slots
        shares: dict[str, float] = {}
        for host, slots in hosts.items():
            entry = provisioned.get(host)
            if entry is not None:
                template = entry[0]
                shares[template] = shares.get(template, 0.0) + slots / slots_of[template]
        if shares:
            self._busy[job] = (start, shares)

    def _busy_end(self, job: int) -> None:
        """A job's run on provisioned hosts ends (finished, killed, requeued or lost)."""
        start, shares = self._busy[job]
        del self._busy[job]
        seconds, run = self.metrics.busy_host_seconds, self.now - start
        for template, share in shares.items():
            seconds[template] = seconds.get(template, 0.0) + share * run

    def _freed(self) -> None:
        """Capacity was freed: it matters to jobs waiting for it, and to a drained host
        its last job left (the next policy round gives it back, as the live
        provisioner does after the next session). Else a session could decide nothing
        (no dispatch, no demand; idle supply falls due on its own timer), so none is
        run; the timer covers the idle host."""
        if self.state.pending or self._drained_empty():
            self._dirty()
        else:
            self._schedule_timer()

    # ------------------------------------------------------------------ sessions
    def _session(self, tick: float) -> None:
        assert self._session_at == tick  # (one session is due at a time: see _dirty)
        self._session_at = None
        self._last_session = tick
        result = run_session(self.state, tick, self.timer, self.reasons)
        self.metrics.sessions += 1
        self.last_result = result
        self._core_due = result.next_due
        if self.recorder is not None:
            self.recorder.session(tick, result)
        if result.dispatch:
            started, used_hosts, run_gen = self.metrics.started, self.used_hosts, self._run_gen
            runs, loop, finish = self._runs, self.loop, self._finish
            for d in result.dispatch:
                job = d.job
                self._apply(JobStarted(job=job, hosts=d.hosts, time=tick, pools=d.pools))
                started.setdefault(job, tick)
                used_hosts.update(d.hosts)
                if self.provisioned:
                    self._busy_start(job, d.hosts, tick)
                self._starts += 1
                run_gen[job] = self._starts
                loop.at(tick + runs[job], partial(finish, job, self._starts))
        if result.backfilled:
            self.metrics.backfilled.update(result.backfilled)
        self._policy_round(result)
        self._sample(result)
        self._schedule_timer()

    def _sample(self, result: SessionResult) -> None:
        state = self.state
        closed = len(self.closed)
        # (loops, not sum(): compiled, each builtin sum() is a slow generic call)
        in_flight = demanded = 0
        for count in self.in_flight.values():
            in_flight += count
        for entry in result.demand.hosts:
            demanded += entry.count
        borrowed = used = 0.0
        for amount in self.borrowed.values():
            borrowed += amount
        for pool in state.countable_pools:
            used += pool.used
        self.metrics.series.add_row(
            result.now, len(state.pending) + len(state.held), len(state.running),
            float(state.busy_slots), self._static_hosts, len(state.provisioned) - closed,
            closed, in_flight, demanded, borrowed, used,
        )

    # ------------------------------------------------------------------ policy
    def _policy_round(self, result: SessionResult) -> None:
        if not self.templates and not self.pools:
            return
        if not self.failures and not result.idle.hosts and self._nothing_to_reclaim():
            quiet = quiet_memory(
                result.demand, result.idle, self.memory, self.policy, self.in_flight,
                self.state.alive, self.joined,
            )
            if quiet is not None:  # the round would decide nothing: no need to run it
                self.memory = quiet
                self.joined = []
                return
        inp = PolicyInput(
            now=result.now, demand=result.demand, idle=result.idle,
            hosts=self._reclaim_candidates(result), in_flight=dict(self.in_flight),
            alive=dict(self.state.alive), tokens_in_flight=dict(self.tokens_in_flight),
            failures=self.failures, joined=self.joined,
        )
        self.failures, self.joined = [], []
        actions, self.memory = self.decide(inp, self.memory, self.policy, self.config.catalog)
        log = self.actions_log
        for action in actions:
            log.append((result.now, action))
            self._act(action)
        if len(log) > 2 * ACTIONS_KEPT:
            del log[:-ACTIONS_KEPT]

    def _nothing_to_reclaim(self) -> bool:
        """Whether no closed host nor host past its maximum lifetime is one a policy
        round could act on: each is drained already and still runs jobs (with no idle
        host, a round then drains and decommissions nothing).

        Provisioned hosts change state only here (drained: closed), so a host not in
        `closed` is open."""
        if self._drained_empty():
            return False
        lifetime = self._max_lifetime
        if lifetime <= 0:
            return True
        # The open host that joined first: past its lifetime, it would be drained.
        for joined in self._open_provisioned.values():
            return joined + lifetime > self.now
        return True

    def _drained_empty(self) -> bool:
        """Whether a drained host runs nothing: a policy round would give it back."""
        if self.closed:
            by_name = self.state.host_by_name
            for name in self.closed:
                if not by_name[name].running:
                    return True
        return False

    def _reclaim_candidates(self, result: SessionResult) -> list[ProvisionedHost]:
        """The provisioned hosts a policy round may act on: closed, idle, or past their
        maximum lifetime (`provisioned` is in join order, so those are a prefix)."""
        lifetime = self._max_lifetime
        if not result.idle.hosts and not self.closed and (
            lifetime <= 0 or self._oldest_joined() + lifetime > self.now
        ):
            return []
        names = set(self.closed)
        for idle in result.idle.hosts:
            names.add(idle.host)
        left = len(names)  # of them, not yet met
        now, by_name = self.now, self.state.host_by_name
        past = lifetime > 0  # while in the prefix of hosts past their lifetime
        hosts = []
        # In join order, the order the policy takes them in (decide orders them by join
        # time and name: mostly, they already are so)
        for name, (_template, joined) in self.provisioned.items():
            if past and joined + lifetime > now:
                past = False
            if name in names:
                left -= 1
            elif not past:
                if not left:
                    break
                continue
            host = by_name.get(name)
            if host is not None and host.template is not None:
                hosts.append(
                    ProvisionedHost(name, host.template, host.state, joined, len(host.running))
                )
        return hosts

    def _act(self, action: Action) -> None:
        # (by exact type, most frequent first: compiled, a class pattern is a slow
        # generic isinstance per case)
        if type(action) is DrainHost:
            host = action.host
            self._apply(HostStateChanged(name=host, state="closed", time=self.now))
            self.closed.add(host)
            if host in self._open_provisioned:
                del self._open_provisioned[host]
            self._dirty()
        elif type(action) is DecommissionHost:
            self._release(action.host, lost=False)
            if self.state.pending:  # (the session sets its timers once its round is over)
                self._dirty()
        elif type(action) is RequestHosts:
            self._request_hosts(action.template, action.count)
        elif type(action) is RequestTokens:
            self._request_tokens(action.resource, action.amount)
        elif type(action) is CancelHosts:
            self._cancel_hosts(action.template, action.count)
        elif type(action) is ReturnTokens:
            key = action.resource
            amount = min(action.amount, self.borrowed.get(key, 0.0))
            if amount > 0:
                self._account_tokens()
                self.borrowed[key] -= amount
                self.pools[key].returned(amount)
                self._apply(SupplyChanged(borrowed={key: self.borrowed[key]}, time=self.now))
                self._dirty()
        elif type(action) is SetAllowance:
            value = -1 if action.allowance is None else action.allowance
            self._apply(SupplyChanged(allowance={action.template: value}, time=self.now))
            self._dirty()

    def _request_hosts(self, name: str, count: int) -> None:
        provider = self.template_providers[name]
        metrics = self.metrics
        metrics.requests += 1
        metrics.hosts_requested[name] = metrics.hosts_requested.get(name, 0) + count
        fates = [provider.answer(self.rng) for _ in range(count)]
        now, orders = self.now, self._orders[name]
        # Hosts drawn one after the other with the same fate and lead time are one run:
        # those that join, join in one action (actions of one time run in the order
        # scheduled, so this is the order of one action each).
        for (fate, delay), run in groupby(fates):
            hosts = len(list(run))
            if fate == "capacity":
                metrics.hosts_failed[name] = metrics.hosts_failed.get(name, 0) + hosts
                self.failures.extend([name] * hosts)
                self._dirty()
                continue
            self.in_flight[name] += hosts
            order = Order(now, hosts, fate == "join")
            orders.append(order)
            if fate == "join":
                self.loop.at(now + delay, partial(self._hosts_join, name, order))
            else:
                for _ in range(hosts):
                    self.loop.at(now + delay, partial(self._host_fails, name, order))
        self._in_flight_changed(name)
        self._dirty()

    def _in_flight_changed(self, name: str) -> None:
        """Tell the scheduler a template's hosts in flight and when they were requested."""
        requested: list[float] = []
        for order in self._orders[name]:
            requested.extend([order.requested] * order.count)
        self._apply(SupplyChanged(
            in_flight={name: self.in_flight[name]}, requested={name: requested},
            time=self.now,
        ))

    def _arrived(self, name: str, order: Order, count: int) -> None:
        """`count` hosts of an order are no longer in flight (they joined or failed)."""
        order.count -= count
        if not order.count:
            self._orders[name].remove(order)
        self.in_flight[name] -= count
        self._in_flight_changed(name)

    def _cancel_hosts(self, name: str, count: int) -> None:
        """Cancel up to `count` hosts of a template in flight, the latest requested
        first: they will not join (their provider's capacity is free again)."""
        orders = self._orders.get(name, [])  # (each with hosts in flight)
        cancelled = 0
        for order in reversed(orders):
            take = min(count - cancelled, order.count)
            order.count -= take
            cancelled += take
            if not order.joins:
                self._void += take  # (the last `take` of its failures)
            elif not order.count:
                self._void += 1
            if cancelled == count:
                break
        if not cancelled:
            return
        self._orders[name] = [order for order in orders if order.count]
        provider = self.template_providers[name]
        for _ in range(cancelled):
            provider.released()
        metrics = self.metrics
        metrics.hosts_cancelled[name] = metrics.hosts_cancelled.get(name, 0) + cancelled
        self.in_flight[name] -= cancelled
        self._in_flight_changed(name)
        self._dirty()

    def _hosts_join(self, name: str, order: Order) -> None:
        """The hosts of an order still in flight join, one after the other."""
        count = order.count
        if not count:  # all cancelled
            self._void -= 1
            return
        template = self.templates[name]
        now = self.now
        self._arrived(name, order, count)
        slots, type_, model = template.slots, template.type, template.model
        resources = template.resources  # (the scheduler copies what it keeps)
        provider = self.template_providers[name]
        provisioned, open_provisioned = self.provisioned, self._open_provisioned
        for _ in range(count):
            self._host_seq += 1
            host = f"{name}-{self._host_seq}"
            self._apply(
                HostAdded(
                    name=host, slots=slots, type=type_, model=model, resources=resources,
                    template=name, time=now,
                )
            )
            provisioned[host] = (name, now)
            open_provisioned[host] = now
            after = provider.reclaim_after(self.rng)
            if after is not None:
                # A timer, not work: a reclaim due after the host was given back must
                # not keep the run going (nor stretch its sim_seconds).
                self.loop.at(now + after, partial(self._reclaimed, host), TIMER)
        self._capacity(float(slots * count))
        self.metrics.hosts_joined[name] = self.metrics.hosts_joined.get(name, 0) + count
        self.joined.append(name)
        self._dirty()

    def _host_fails(self, name: str, order: Order) -> None:
        """A host of an order never joins (unless the order's hosts were cancelled)."""
        if not order.count:  # cancelled
            self._void -= 1
            return
        self.template_providers[name].released()
        self.metrics.hosts_failed[name] = self.metrics.hosts_failed.get(name, 0) + 1
        self.failures.append(name)
        self._arrived(name, order, 1)
        self._dirty()

    def _reclaimed(self, host: str) -> None:
        """The provider takes a host back (spot-style): its jobs are requeued (or
        exited, as their queue says)."""
        if host not in self.provisioned:
            return
        record = self.state.host_by_name[host]
        for job in sorted(record.running):
            self._run_gen.pop(job, None)
            if job in self._busy:
                self._busy_end(job)
            self._apply(lost_job(self.state, self.state.running[job].spec, self.now,
                                 f"host {host} reclaimed"))
        self._release(host, lost=True)
        self._freed()

    def _release(self, host: str, lost: bool) -> None:
        """Give a provisioned host back (the caller sees to what its capacity freed)."""
        template, joined = self.provisioned[host]
        del self.provisioned[host]
        self.closed.discard(host)
        if host in self._open_provisioned:  # (not pop: compiled, a call by name)
            del self._open_provisioned[host]
        self._apply(HostRemoved(name=host, time=self.now))
        self._capacity(-self._template_slots[template])
        seconds = self.metrics.host_seconds
        seconds[template] = seconds.get(template, 0.0) + self.now - joined
        counter = self.metrics.hosts_lost if lost else self.metrics.hosts_reclaimed
        counter[template] = counter.get(template, 0) + 1
        if host in self.used_hosts:
            self.used_hosts.discard(host)  # (its name is never given again)
        else:
            self.metrics.hosts_never_used += 1
        self.template_providers[template].released()

    def _request_tokens(self, key: str, amount: float) -> None:
        pool = self.pools.get(key)
        if pool is None:
            return
        self.metrics.requests += 1
        self.metrics.tokens_requested += amount
        granted, delay = pool.answer(amount, self.rng)
        self.tokens_in_flight[key] += amount
        in_flight = {key: self.tokens_in_flight[key]}
        self._apply(SupplyChanged(tokens_in_flight=in_flight, time=self.now))
        self.loop.at(self.now + delay, partial(self._tokens_answer, key, amount, granted))
        self._dirty()

    def _tokens_answer(self, key: str, asked: float, granted: float) -> None:
        self._account_tokens()
        self.tokens_in_flight[key] -= asked
        self.borrowed[key] += granted
        self.metrics.tokens_borrowed += granted
        self.metrics.tokens_refused += asked - granted
        self._apply(
            SupplyChanged(
                tokens_in_flight={key: self.tokens_in_flight[key]},
                borrowed={key: self.borrowed[key]}, time=self.now,
            )
        )
        self._dirty()

    def _account_tokens(self) -> None:
        """Integrate borrowed tokens over time (token-hours)."""
        self.metrics.token_seconds += sum(self.borrowed.values()) * (self.now - self._token_clock)
        self._token_clock = self.now

    # ------------------------------------------------------------------ timers
    def _schedule_timer(self) -> None:
        """Wake up when something falls due without any input: the soonest of the
        scheduler's next_due (the last session's: provisioned hosts and tokens reaching
        their idle time) and the policy's (`xce.policy.timers`: demand passing the
        persistence threshold, a back-off ending, a host reaching its maximum
        lifetime). The driver decides none of these itself."""
        now = self.now
        when = self._core_due
        if when <= now:
            when = NEVER  # (past: the session it was for has run)
        if self.templates or self.pools:  # (without supply, no policy: nothing else)
            at = self._scheduler_due(now)
            if at < when:
                when = at
            at = due_at(
                self._demand_since, self._backoff_until, self._persistence,
                self._max_lifetime, self._open_provisioned.values(), now, self._held_until,
            )
            if at < when:
                when = at
        # `when` is worked out anew from everything that can fall due, so an earlier
        # wake-up still pending is stale (what it was for has gone): it fires idle.
        if when == NEVER:
            self._timer_at = None
            return
        if self._timer_at == when:
            return
        self._timer_at = when
        self.loop.at(when, partial(self._timer, when), TIMER)

    def _scheduler_due(self, now: float) -> float:
        """The scheduler's idle thresholds (`xce.sched.idle.idle_due`, the core's rule)
        as the state is now: after the session's dispatches and policy round, and
        after a job finished with no session to follow (`_freed`: its host starts
        idling then, which the last session's `next_due` could not know)."""
        return idle_due(self.state, now)

    def _timer(self, when: float) -> None:
        if self._timer_at == when:
            self._timer_at = None
            self._dirty()

    # ------------------------------------------------------------------ running
    def run(
        self, until: float | None = None, progress: Callable[[float], None] | None = None
    ) -> None:
        """Run until the workload is done (or simulated time `until`).

        The cyclic garbage collector is paused meanwhile: a run makes next to no
        reference cycles, and collections would rescan its many live objects."""
        loop = self.loop
        with collector_paused():
            steps = 0
            while True:
                if until is not None:
                    nxt = loop.next_time()
                    if nxt is None or nxt > until:
                        break
                if loop.work == self._void and self._over():
                    break  # only wake-ups are left and nothing is waiting for them
                if not loop.step():
                    break
                if progress is not None:
                    steps += 1
                    if steps % 4096 == 0:
                        progress(loop.now)
        if until is not None and loop.now < until and loop.next_time() is None:
            loop.now = until

    @property
    def done(self) -> bool:
        """Nothing is left to happen but wake-ups (and hosts cancelled not joining),
        and no job waits or runs and no supply is held or coming: the run is over."""
        if self.loop.work != self._void:
            return False
        return self._over()

    def _over(self) -> bool:
        """No job waits or runs and no supply is held or coming."""
        state = self.state
        return not (
            state.pending or state.held or state.running or self.provisioned
            or any(self.in_flight.values()) or any(self.borrowed.values())
            or any(self.tokens_in_flight.values())
        )

    def step_sessions(self, count: int) -> int:
        """Run until `count` more sessions have run; returns how many did."""
        target = self.metrics.sessions + count
        while self.metrics.sessions < target and not self.done and self.loop.step():
            pass
        return count - (target - self.metrics.sessions)

    def summary(self) -> dict[str, Any]:
        """The simulator summary (FORMATS.md)."""
        end = self.now
        self._account_tokens()
        capacity = self._capacity_seconds + self._capacity_level * max(
            0.0, end - self._capacity_clock
        )
        # Hosts still up and jobs still running on them count until now, without
        # changing what later calls see.
        seconds = dict(self.metrics.host_seconds)
        for template, joined in self.provisioned.values():
            seconds[template] = seconds.get(template, 0.0) + end - joined
        busy = dict(self.metrics.busy_host_seconds)
        for start, shares in self._busy.values():
            for template, share in shares.items():
                busy[template] = busy.get(template, 0.0) + share * (end - start)
        return self.metrics.summary(
            jobs=len(self.workload.jobs), skipped=self.workload.skipped,
            sim_seconds=end - self.first_submit,
            wall_seconds=wallclock.perf_counter() - self.start_wall,
            capacity_slot_seconds=capacity, host_seconds=seconds, busy_host_seconds=busy,
        )
