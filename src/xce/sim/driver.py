"""The simulator: the scheduler core driven by a workload and simulated providers.

It feeds the scheduler exactly the events the live controller does (`xce.model.events`),
runs a session at the next session tick after any input changed or a timer fell due
(sessions where nothing changed are not run at all: they could not decide anything
new), applies the session's dispatches (each job ends after its recorded run time, or
at its run limit when `simulation.enforce_run_limits` says so), and runs the
provisioning policy (`xce.policy.decide`) on the session's demand and idle supply.

`Simulator` wires the event loop, the sessions and the timers; its collaborators
handle the jobs (`xce.sim.jobs`), the elastic supply (`xce.sim.supply`) and the
policy rounds (`xce.sim.rounds`).

Timers are not decided here: the session result's `next_due` (the scheduler's) and
`xce.policy.timers.next_due` (the policy's) say when the next wake-up is due.
"""

from __future__ import annotations

import math
import random
import time as wallclock
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from xce.model.cluster import ClusterConfig, HostTemplate
from xce.model.cost import template_prices
from xce.model.events import ConfigLoaded, SchedulerEvent
from xce.model.policy import PolicyConfig
from xce.model.recording import Recorder
from xce.model.result import SessionResult
from xce.policy import Action, PolicyMemory
from xce.sched import SchedulerState, run_session
from xce.sched.idle import idle_due
from xce.sched.queries import SchedulerQueries
from xce.sched.rebuild import state_events
from xce.sim.jobs import JobLifecycle
from xce.sim.loop import SESSION, TIMER, EventLoop
from xce.sim.metrics import Metrics
from xce.sim.providers import HostProvider, TokenPool
from xce.sim.rounds import Decide, PolicyRounds
from xce.sim.supply import Supply
from xce.sim.workload import Workload
from xce.tuning import collector_paused

NEVER: Final = math.inf


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
        series: bool = True,
    ) -> None:
        self.config = config
        self.workload = workload
        self.seed = config.simulation.seed if seed is None else seed
        self.rng = random.Random(self.seed)
        self.recorder = recorder
        self.timer = timer
        # Whether sessions build their pend groups (why each job waits): a run nobody
        # asks that of (`xce sim run` without --record) leaves them out, same decisions.
        self.reasons = reasons or recorder is not None
        # Whether each session is sampled into `metrics.series` (what a report draws): a
        # run without a report (`xce sim run` without --report, a sweep's cell) leaves
        # it out, same decisions and summary.
        self._series = series
        self._interval: float = config.session_interval
        self.loop = EventLoop()
        self._core = SchedulerState()  # changed only by `apply` and sessions
        self.metrics = Metrics()
        if any(q.preempt or q.fairshare is not None for q in config.queues):
            self.metrics.queue_of = {}  # (the summary's preemptions and waits per queue)
        self.last_result: SessionResult | None = None
        self._session_at: float | None = None
        self._last_session = -math.inf
        self._timer_at: float | None = None
        self._core_due = NEVER  # the last session's next_due (the scheduler's timers)
        self.first_submit = workload.jobs[0].submit if workload.jobs else 0.0
        self.supply = Supply(self, config, host_providers)
        self.rounds = PolicyRounds(self, self.supply, policy or config.policy)
        self.apply(ConfigLoaded(config=config))
        self.supply.tell_lead_times(config)
        self._static_hosts = len(config.hosts)
        # Wide jobs use at least a quarter of the machine: the static hosts' slots, or
        # without static hosts the most the catalog could provide.
        machine = self.supply.static_slots or sum(
            t.max * t.slots for t in config.catalog.templates
        )
        self.metrics.wide_slots = machine / 4
        self.jobs = JobLifecycle(self, self.supply, workload)
        self.start_wall = wallclock.perf_counter()

    # ------------------------------------------------------------------ plumbing
    @property
    def now(self) -> float:
        return self.loop.now

    @property
    def state(self) -> SchedulerQueries:
        """The scheduler state as the simulator's parts read it (xce.sched.queries)."""
        return self._core

    def state_events(self) -> list[SchedulerEvent]:
        """Events that rebuild the scheduler state as it is now (a recording's start)."""
        return state_events(self._core)

    def apply(self, event: SchedulerEvent) -> None:
        """Tell the scheduler an event (recorded first when recording)."""
        if self.recorder is not None:
            self.recorder.event(self.now, event)
        self._core.apply(event)

    def dirty(self) -> None:
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

    def freed(self) -> None:
        """Capacity was freed: it matters to jobs waiting for it, and to a drained host
        its last job left (the next policy round gives it back, as the live
        provisioner does after the next session). Else a session could decide nothing
        (no dispatch, no demand; idle supply falls due on its own timer), so none is
        run; the timer covers the idle host."""
        if self._core.pending or self._core.preemptions.suspended or self.supply.drained_empty():
            self.dirty()  # (a job suspended by a preemption may go on)
        else:
            self._schedule_timer()

    # ------------------------------------------------------------------ observed
    # (the supply and the policy as the REPL, the report and tests read them)
    @property
    def templates(self) -> dict[str, HostTemplate]:
        return self.supply.templates

    @property
    def template_providers(self) -> dict[str, HostProvider]:
        return self.supply.template_providers

    @property
    def pools(self) -> dict[str, TokenPool]:
        return self.supply.pools

    @property
    def in_flight(self) -> dict[str, int]:
        return self.supply.in_flight

    @property
    def tokens_in_flight(self) -> dict[str, float]:
        return self.supply.tokens_in_flight

    @property
    def borrowed(self) -> dict[str, float]:
        return self.supply.borrowed

    @property
    def provisioned(self) -> dict[str, tuple[str, float]]:
        return self.supply.provisioned

    @property
    def used_hosts(self) -> set[str]:
        return self.supply.used_hosts

    @property
    def policy(self) -> PolicyConfig:
        return self.rounds.policy

    @policy.setter
    def policy(self, policy: PolicyConfig) -> None:
        self.rounds.policy = policy

    @property
    def memory(self) -> PolicyMemory:
        return self.rounds.memory

    @property
    def decide(self) -> Decide:
        return self.rounds.decide

    @decide.setter
    def decide(self, decide: Decide) -> None:
        self.rounds.decide = decide

    @property
    def actions_log(self) -> list[tuple[float, Action]]:
        return self.rounds.actions_log

    # ------------------------------------------------------------------ sessions
    def _session(self, tick: float) -> None:
        assert self._session_at == tick  # (one session is due at a time: see dirty)
        self._session_at = None
        self._last_session = tick
        result = run_session(self._core, tick, self.timer, self.reasons)
        self.metrics.sessions += 1
        self.last_result = result
        self._core_due = result.next_due
        if self.recorder is not None:
            self.recorder.session(tick, result)
        if result.resumes:
            self.jobs.resume(result.resumes, tick)
        if result.dispatch:
            self.jobs.start(result.dispatch, tick)
        if result.preemptions:
            self.jobs.preempt(result.preemptions, tick)
        if result.orphans:
            self.jobs.end_orphans(result.orphans, tick)
        if result.backfilled:
            self.metrics.backfilled.update(result.backfilled)
        self.rounds.round(result)
        if self._series:
            self._sample(result)
        self._schedule_timer()

    def _sample(self, result: SessionResult) -> None:
        state, supply = self._core, self.supply
        closed = len(supply.closed)
        # (loops, not sum(): compiled, each builtin sum() is a slow generic call;
        # once per session in bench_easy.py)
        in_flight = demanded = 0
        for count in supply.in_flight.values():
            in_flight += count
        for entry in result.demand.hosts:
            demanded += entry.count
        borrowed = used = 0.0
        for amount in supply.borrowed.values():
            borrowed += amount
        for pool in state.countable_pools:
            used += pool.used
        # provisioned hosts open and running nothing: the idle ones less the drained
        idle = len(state.idle_provisioned)
        if closed:
            idle -= len(supply.closed_empty())
        self.metrics.series.add_row(
            result.now, len(state.pending) + len(state.held) + len(state.waiting),
            len(state.running),
            float(state.busy_slots), self._static_hosts, len(state.provisioned) - closed,
            closed, in_flight, demanded, borrowed, used, idle, supply.cost.to(result.now),
        )

    # ------------------------------------------------------------------ timers
    def _schedule_timer(self) -> None:
        """Wake up when something falls due without any input: the soonest of the
        scheduler's next_due (the last session's: provisioned hosts and tokens reaching
        their idle time) and the policy's (`PolicyRounds.next_due`). The driver decides
        none of these itself."""
        now = self.now
        when = self._core_due
        if when <= now:
            when = NEVER  # (past: the session it was for has run)
        if self.supply.templates or self.supply.pools:  # (without supply, no policy)
            at = self._scheduler_due(now)
            if at < when:
                when = at
            at = self.rounds.next_due(now)
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
        after a job finished with no session to follow (`freed`: its host starts
        idling then, which the last session's `next_due` could not know; a host
        reaching its idle time at that very instant is due now, unless a session ran
        then)."""
        return idle_due(self._core, now, unseen_now=self._last_session < now)

    def _timer(self, when: float) -> None:
        if self._timer_at == when:
            self._timer_at = None
            self.dirty()

    # ------------------------------------------------------------------ running
    def run(
        self, until: float | None = None, progress: Callable[[float], None] | None = None
    ) -> None:
        """Run until the workload is done (or simulated time `until`).

        The cyclic garbage collector is paused meanwhile: a run makes next to no
        reference cycles, and collections would rescan its many live objects."""
        loop, supply = self.loop, self.supply
        with collector_paused():
            steps = 0
            while True:
                if until is not None:
                    nxt = loop.next_time()
                    if nxt is None or nxt > until:
                        break
                if loop.work == supply.void_actions and self._over():
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
        if self.loop.work != self.supply.void_actions:
            return False
        return self._over()

    def _over(self) -> bool:
        """No job waits or runs and no supply is held or coming."""
        state, supply = self._core, self.supply
        return not (
            state.pending or state.held or state.running or supply.provisioned
            or any(supply.in_flight.values()) or any(supply.borrowed.values())
            or any(supply.tokens_in_flight.values())
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
        self.supply.account_tokens()
        capacity, seconds, busy = self.supply.seconds_to(end)
        return self.metrics.summary(
            jobs=len(self.workload.jobs), skipped=self.workload.skipped,
            sim_seconds=end - self.first_submit,
            wall_seconds=wallclock.perf_counter() - self.start_wall,
            capacity_slot_seconds=capacity, host_seconds=seconds, busy_host_seconds=busy,
            prices=template_prices(self.config.catalog.templates),
        )
