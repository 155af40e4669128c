"""One policy round: demand and idle supply in, actions out.

Pure: the clock and everything known about requests arrive in `PolicyInput`; what the
policy remembers between rounds is `PolicyMemory`, returned anew each round.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from xce.model.causes import Cause
from xce.model.cluster import Catalog
from xce.model.durations import seconds_figure
from xce.model.lifecycle import HostState
from xce.model.policy import PolicyConfig
from xce.model.result import Demand, Idle
from xce.policy.actions import (
    Action,
    CancelHosts,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)
from xce.sched.room import template_room


class ProvisionedHost:
    """A host that came from a template, as the provisioning side sees it. (A plain
    class: compiled, it is made and its fields are read directly; a round reads many.
    Treat it as immutable.)"""

    __slots__ = ("joined", "name", "running", "state", "template")

    def __init__(self, name: str, template: str, state: str, joined: float, running: int) -> None:
        self.name = name
        self.template = template
        self.state = state  # ok, closed, unreach, ...
        self.joined = joined
        self.running = running  # jobs running on it

    def __repr__(self) -> str:
        return (
            f"ProvisionedHost({self.name!r}, {self.template!r}, {self.state!r}, "
            f"{self.joined!r}, {self.running!r})"
        )


class PolicyInput(msgspec.Struct, frozen=True):
    """What a round knows. `hosts` must hold every provisioned host the round may act
    on: closed ones, idle ones and those past `max_lifetime` (a driver may leave the
    others out); `alive` counts all hosts present per template. A closed host that
    still runs jobs may be left out of `hosts` and counted in `closed_busy` instead
    (a round can do nothing with it until it is empty)."""

    now: float
    demand: Demand
    idle: Idle
    hosts: list[ProvisionedHost]
    in_flight: dict[str, int]  # template -> hosts requested, not yet joined
    alive: dict[str, int] = {}  # template -> provisioned hosts present
    tokens_in_flight: dict[str, float] = {}
    failures: list[str] = []  # templates whose requests failed since the last round
    joined: list[str] = []  # templates that had a host join since the last round
    closed_busy: dict[str, int] = {}  # template -> closed hosts running jobs, not in hosts


class PolicyMemory(msgspec.Struct, frozen=True):
    demand_since: dict[str, float] = {}  # template or resource -> demand seen since
    backoff_until: dict[str, float] = {}  # template -> no requests before
    backoff_delay: dict[str, float] = {}  # template -> the last back-off delay
    added_at: dict[str, float] = {}  # template -> when this policy last requested hosts of it
    # template -> when the scale-down delay that held back idle hosts of it in the last
    # round ends (the policy's timer: `xce.policy.timers`)
    held_until: dict[str, float] = {}


def decide(
    inp: PolicyInput, memory: PolicyMemory, config: PolicyConfig, catalog: Catalog
) -> tuple[list[Action], PolicyMemory]:
    """The actions of one round and the memory for the next."""
    now = inp.now
    actions: list[Action] = []
    backoff_until, backoff_delay = _backoffs(inp, memory, config, actions)
    demand_since: dict[str, float] = {}
    _request_hosts(inp, memory, config, catalog, backoff_until, demand_since, actions)
    if config.cancel_surplus:
        _cancel_surplus(inp, config, actions)
    added_at = memory.added_at
    for action in actions:
        if isinstance(action, RequestHosts):
            if added_at is memory.added_at:
                added_at = dict(added_at)  # (the memory given is not changed)
            added_at[action.template] = now

    for res in inp.demand.resources:
        if res.amount <= 0:
            continue
        key = f"tokens:{res.resource}"
        since = memory.demand_since.get(key, now)
        demand_since[key] = since
        if now - since >= config.persistence:
            actions.append(
                RequestTokens(
                    res.resource, res.amount,
                    f"short {res.amount:g} for {len(res.jobs)} jobs for "
                    f"{seconds_figure(now - since)} s",
                )
            )

    held_until: dict[str, float] = {}
    actions.extend(_reclaim(inp, config, added_at, held_until))
    for res_idle in inp.idle.resources:
        actions.append(
            ReturnTokens(res_idle.resource, res_idle.amount, "borrowed tokens idle")
        )
    return actions, PolicyMemory(
        demand_since, backoff_until, backoff_delay, added_at, held_until
    )


def _backoffs(
    inp: PolicyInput, memory: PolicyMemory, config: PolicyConfig, actions: list[Action]
) -> tuple[dict[str, float], dict[str, float]]:
    """Back-off: after a failure, no requests for a while, doubling per failure; the
    template's allowance is set to 0 (appended to `actions`) so the scheduler moves its
    demand to the next template by rank. The back-offs and their delays after it."""
    now = inp.now
    backoff_until = dict(memory.backoff_until)
    backoff_delay = dict(memory.backoff_delay)
    for template in sorted(set(inp.failures)) if inp.failures else ():
        delay = backoff_delay.get(template, 0.0)
        delay = config.backoff_initial if delay == 0 else min(config.backoff_max, 2 * delay)
        backoff_delay[template] = delay
        backoff_until[template] = now + delay
        reason = (f"provider failure: back-off {seconds_figure(delay)} s until "
                  f"{seconds_figure(now + delay)}")
        actions.append(SetAllowance(template, 0, reason))
    for template in inp.joined:
        backoff_delay.pop(template, None)  # a success resets the doubling
    for template, until in sorted(backoff_until.items()) if backoff_until else ():
        if until <= now:
            del backoff_until[template]
            actions.append(SetAllowance(template, None, "back-off over"))
    return backoff_until, backoff_delay


def _request_hosts(
    inp: PolicyInput,
    memory: PolicyMemory,
    config: PolicyConfig,
    catalog: Catalog,
    backoff_until: dict[str, float],
    demand_since: dict[str, float],
    actions: list[Action],
) -> None:
    """Host requests for demand that persisted (each with the demand's jobs), then
    `min_hosts` top-ups, appended to `actions`; `demand_since` gets each template's."""
    now, alive = inp.now, inp.alive
    for entry in inp.demand.hosts:
        name = entry.template
        if entry.count <= 0 or name in backoff_until:
            continue
        since = memory.demand_since.get(name, now)
        demand_since[name] = since
        if now - since < config.persistence:
            continue
        # (the policy's own cap, `max_hosts`, lowers the template's `max`)
        template_max = _template_max(catalog, name)
        room = template_room(
            min(template_max, config.max_hosts.get(name, template_max)),
            alive.get(name, 0), inp.in_flight.get(name, 0),
        )
        count = min(entry.count, config.max_requests_per_round, room)
        if count > 0:
            actions.append(
                RequestHosts(
                    name, count,
                    f"demand of {entry.count} hosts for {len(entry.jobs)} jobs persisted "
                    f"{seconds_figure(now - since)} s",
                    tuple(entry.jobs),
                )
            )
    for name, minimum in sorted(config.min_hosts.items()):
        have = alive.get(name, 0) + inp.in_flight.get(name, 0)
        requested = sum(
            a.count for a in actions if isinstance(a, RequestHosts) and a.template == name
        )
        if have + requested < minimum and name not in backoff_until:
            missing = minimum - have - requested
            actions.append(RequestHosts(name, missing, f"keep at least {minimum}"))


def _cancel_surplus(inp: PolicyInput, config: PolicyConfig, actions: list[Action]) -> None:
    """Cancel in-flight hosts no pending job needs (appended to `actions`), never below
    a template's `min_hosts` (hosts present and in flight: the scheduler, which knows
    no minimum, reports a top-up in flight as surplus)."""
    for surplus in inp.demand.surplus_hosts:
        name = surplus.template
        have = inp.alive.get(name, 0) + inp.in_flight.get(name, 0)
        count = min(surplus.count, have - config.min_hosts.get(name, 0))
        if count > 0:
            actions.append(
                CancelHosts(name, count, f"{count} hosts in flight that no pending job needs")
            )


def quiet_memory(
    demand: Demand,
    idle: Idle,
    memory: PolicyMemory,
    policy: PolicyConfig,
    in_flight: Mapping[str, int],
    alive: Mapping[str, int],
    joined: list[str],
) -> PolicyMemory | None:
    """When a round could decide nothing, the memory `decide` would return; else None
    (run the round). A driver may skip such rounds: the simulator does, for speed.

    Precondition (the caller's): no failures, no idle host, and every provisioned
    host the round is given is not open (`ok`) and not closed with nothing running,
    so that none is drained or decommissioned. Then the round decides nothing when
    there is no demand to count, no back-off to end, no minimum to keep and no idle
    tokens.

    `decide` on the same input returns no action and this memory
    (tests/test_perf_sim.py checks it against `decide`)."""
    if memory.backoff_until or idle.resources:
        return None
    for entry in demand.hosts:
        if entry.count > 0:
            return None
    if policy.cancel_surplus:
        for surplus in demand.surplus_hosts:
            if surplus.count > 0:
                return None
    for res in demand.resources:
        if res.amount > 0:
            return None
    for name, minimum in policy.min_hosts.items():
        if alive.get(name, 0) + in_flight.get(name, 0) < minimum:
            return None
    delay = memory.backoff_delay
    if joined and any(template in delay for template in joined):
        delay = {t: d for t, d in delay.items() if t not in joined}
    elif not memory.demand_since and not memory.held_until:
        return memory
    # (no host requested: `added_at` as it was; no idle host: none held back)
    return PolicyMemory({}, {}, dict(delay), memory.added_at, {})


def _template_max(catalog: Catalog, name: str) -> int:
    for template in catalog.templates:
        if template.name == name:
            return template.max
    raise KeyError(name)


def _reclaim(
    inp: PolicyInput,
    config: PolicyConfig,
    added_at: dict[str, float],
    held_until: dict[str, float],
) -> list[Action]:
    """Drain idle hosts and hosts past their lifetime; decommission drained empty hosts.

    A host drained empty (an idle one, or one past its lifetime running nothing) is
    decommissioned in the same round, as Cluster Autoscaler deletes an empty node at
    once: it has nothing to finish, and kept closed until the next round it would be
    paid for and make a session due for nothing (docs/policy.md). Should a job have
    started there after the idle report this round read, the controller refuses the
    decommission (409) and the host goes back once its jobs end, as any drained host.

    An idle host is not drained while this round's demand asks for new hosts of its
    template (`keep_idle_while_demand`), nor within `scale_down_delay_after_add` of
    the last request for its template; such a delay's end goes to `held_until`."""
    actions: list[Action] = []
    if not inp.hosts:
        return actions
    keep = config.min_hosts
    lifetime, now = config.max_lifetime, inp.now
    # (the states read once: compiled, each `HostState.X` is a slow generic lookup
    # through the enum's metaclass, and this loop is hot in elastic simulations)
    ok, closed = HostState.OK, HostState.CLOSED
    open_count = dict(inp.alive)
    for template, closed_count in inp.closed_busy.items():
        open_count[template] = open_count.get(template, 0) - closed_count
    for host in inp.hosts:
        if host.state != ok:
            open_count[host.template] = open_count.get(host.template, 0) - 1
    idle = {h.host: h.idle_for for h in inp.idle.hosts}
    wanted = _wanted(inp, config) if idle else set()
    delayed = _delayed(added_at, config.scale_down_delay_after_add, now) if idle else {}
    # In join order (names are unique: no two entries tie)
    for host in _in_join_order(inp.hosts):
        state, template = host.state, host.template
        if state == closed and host.running == 0:
            actions.append(DecommissionHost(host.name, "drained and empty"))
            continue
        if state != ok:
            continue
        if lifetime > 0 and now - host.joined >= lifetime:
            actions.append(DrainHost(host.name, f"maximum lifetime ({seconds_figure(lifetime)} s)",
                                     Cause.LIFETIME))
        elif host.name in idle and open_count[template] > keep.get(template, 0):
            if template in wanted:
                continue  # the scheduler wants more of these: keep it
            if template in delayed:
                held_until[template] = delayed[template]  # hosts were added lately
                continue
            reason = f"idle reclaim (idle {seconds_figure(idle[host.name])} s)"
            actions.append(DrainHost(host.name, reason))
        else:
            continue
        open_count[template] -= 1
        if host.running == 0:  # drained empty (a job may have started on an idle one)
            actions.append(DecommissionHost(host.name, "drained and empty"))
    return actions


def _wanted(inp: PolicyInput, config: PolicyConfig) -> set[str]:
    """The templates whose idle hosts are kept for this round's demand of new hosts."""
    if not config.keep_idle_while_demand:
        return set()
    return {entry.template for entry in inp.demand.hosts if entry.count > 0}


def _delayed(added_at: dict[str, float], delay: float, now: float) -> dict[str, float]:
    """Template -> end of its scale-down delay, for those still in it: hosts of it were
    requested less than `delay` s ago (`now < added + delay`; at the end it drains)."""
    delayed: dict[str, float] = {}
    if delay > 0:
        for template, added in added_at.items():
            until = added + delay
            if now < until:
                delayed[template] = until
    return delayed


def _in_join_order(hosts: list[ProvisionedHost]) -> list[ProvisionedHost]:
    """`hosts` by (joined, name): as given when they are (a driver may give them so)."""
    for k in range(1, len(hosts)):
        before, after = hosts[k - 1], hosts[k]
        if after.joined < before.joined or (
            after.joined == before.joined and after.name < before.name
        ):
            return [h for _joined, _name, h in sorted([(h.joined, h.name, h) for h in hosts])]
    return hosts
