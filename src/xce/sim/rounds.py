"""The simulator's provisioning policy: a round of `xce.policy.decide` after each
session on its demand and idle supply (skipped when `quiet_memory` shows it would
decide nothing), its actions carried out on the simulated supply and kept in a
bounded log, its memory between rounds, and when it falls due with no new input
(`xce.policy.timers.due_at`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from xce.model.cluster import Catalog
from xce.model.policy import PolicyConfig
from xce.model.result import SessionResult
from xce.policy import Action, PolicyInput, PolicyMemory, ProvisionedHost
from xce.policy.decide import decide, quiet_memory  # (functions; also a module `decide`)
from xce.policy.timers import due_at
from xce.sched.suspended import jobs_on
from xce.sim.supply import Supply

if TYPE_CHECKING:
    from xce.sim.driver import Simulator

# The policy actions kept in `PolicyRounds.actions_log`: at least the latest this many
# (older ones are dropped in batches, so that a run going on for ever stays bounded).
ACTIONS_KEPT: Final = 10_000

# A policy round's function: `xce.policy.decide.decide`, or an observer wrapping it.
Decide = Callable[
    [PolicyInput, PolicyMemory, PolicyConfig, Catalog], tuple[list[Action], PolicyMemory]
]


class PolicyRounds:
    """The policy rounds of one simulation run."""

    def __init__(self, sim: Simulator, supply: Supply, policy: PolicyConfig) -> None:
        self.sim, self.supply, self.state = sim, supply, sim.state
        self.catalog: Catalog = sim.config.catalog
        self.policy = policy  # (a property: see its setter)
        # The round (observers may wrap it: a compiled module's globals cannot be
        # patched).
        self.decide: Decide = decide
        self.memory = PolicyMemory()
        self.actions_log: list[tuple[float, Action]] = []  # the latest (ACTIONS_KEPT)

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

    def next_due(self, now: float) -> float:
        """When a round could decide something new with no new input (inf: never):
        demand passing the persistence threshold, a back-off ending, a host reaching
        its maximum lifetime, idle hosts held back no longer."""
        return due_at(
            self._demand_since, self._backoff_until, self._persistence,
            self._max_lifetime, self.supply.open_provisioned.values(), now, self._held_until,
        )

    def round(self, result: SessionResult) -> None:
        """The round after a session (none without elastic supply)."""
        supply = self.supply
        if not supply.templates and not supply.pools:
            return
        if not supply.failures and not result.idle.hosts and self._nothing_to_reclaim():
            quiet = quiet_memory(
                result.demand, result.idle, self.memory, self.policy, supply.in_flight,
                self.state.alive, supply.joined,
            )
            if quiet is not None:  # the round would decide nothing: no need to run it
                self.memory = quiet
                supply.joined = []
                return
        candidates, closed_busy = self._reclaim_candidates(result)
        inp = PolicyInput(
            now=result.now, demand=result.demand, idle=result.idle,
            hosts=candidates, in_flight=dict(supply.in_flight),
            alive=dict(self.state.alive), tokens_in_flight=dict(supply.tokens_in_flight),
            failures=supply.failures, joined=supply.joined, closed_busy=closed_busy,
        )
        supply.failures, supply.joined = [], []
        actions, self.memory = self.decide(inp, self.memory, self.policy, self.catalog)
        log = self.actions_log
        for action in actions:
            log.append((result.now, action))
            supply.act(action)
        if len(log) > 2 * ACTIONS_KEPT:
            del log[:-ACTIONS_KEPT]

    def _nothing_to_reclaim(self) -> bool:
        """Whether no closed host nor host past its maximum lifetime is one a policy
        round could act on: each is drained already and still runs jobs (with no idle
        host, a round then drains and decommissions nothing).

        Provisioned hosts change state only here (drained: closed), so a host not in
        `closed` is open."""
        supply = self.supply
        if supply.drained_empty():
            return False
        lifetime = self._max_lifetime
        if lifetime <= 0:
            return True
        # The open host that joined first: past its lifetime, it would be drained.
        for joined in supply.open_provisioned.values():
            return joined + lifetime > self.sim.loop.now
        return True

    def _reclaim_candidates(
        self, result: SessionResult
    ) -> tuple[list[ProvisionedHost], dict[str, int]]:
        """The provisioned hosts a policy round may act on (drained ones that run
        nothing, idle ones, open ones past their maximum lifetime) by join time and
        name, and per template the drained hosts still running jobs, which a round
        can do nothing with: counted, not listed (on RICC-2010-2 hundreds of hosts
        drained at their lifetime run long jobs for days, and every round met them)."""
        supply = self.supply
        lifetime = self._max_lifetime
        now = self.sim.loop.now
        empty = supply.closed_empty() if supply.closed else []
        names = set(empty)
        for idle in result.idle.hosts:
            names.add(idle.host)
        if lifetime > 0:  # (open hosts in join order: those past it are a prefix)
            for name, joined in supply.open_provisioned.items():
                if joined + lifetime > now:
                    break
                names.add(name)
        if not names:
            return [], {}  # (a round with no host to act on reads no count)
        provisioned = supply.provisioned
        closed_busy = dict(supply.closed_count)
        for name in empty:
            closed_busy[provisioned[name][0]] -= 1
        state = self.state
        by_name = state.host_by_name
        hosts = []
        for name in names:
            host = by_name.get(name)
            if host is not None and host.template is not None:
                hosts.append(ProvisionedHost(  # (its jobs, suspended ones too)
                    name, host.template, host.state, provisioned[name][1],
                    len(jobs_on(state, host)),
                ))
        hosts.sort(key=_join_order)
        return hosts, closed_busy


def _join_order(host: ProvisionedHost) -> tuple[float, str]:
    return host.joined, host.name
