"""One policy round: demand and idle supply in, actions out.

Pure: the clock and everything known about requests arrive in `PolicyInput`; what the
policy remembers between rounds is `PolicyMemory`, returned anew each round.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from xce.model.cluster import Catalog
from xce.model.policy import PolicyConfig
from xce.model.result import Demand, Idle
from xce.policy.actions import (
    Action,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)


def seconds(value: float) -> str:
    """`f"{value:g}"`: whole seconds below a million (most reasons) without format(),
    which compiled is a slow generic call made for every reclaimed host."""
    if 0 < value < 1_000_000:
        whole = int(value)
        if whole == value:
            return str(whole)
    return f"{value:g}"


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
    others out); `alive` counts all hosts present per template."""

    now: float
    demand: Demand
    idle: Idle
    hosts: list[ProvisionedHost]
    in_flight: dict[str, int]  # template -> hosts requested, not yet joined
    alive: dict[str, int] = {}  # template -> provisioned hosts present
    tokens_in_flight: dict[str, float] = {}
    failures: list[str] = []  # templates whose requests failed since the last round
    joined: list[str] = []  # templates that had a host join since the last round


class PolicyMemory(msgspec.Struct, frozen=True):
    demand_since: dict[str, float] = {}  # template or resource -> demand seen since
    backoff_until: dict[str, float] = {}  # template -> no requests before
    backoff_delay: dict[str, float] = {}  # template -> the last back-off delay


def decide(
    inp: PolicyInput, memory: PolicyMemory, config: PolicyConfig, catalog: Catalog
) -> tuple[list[Action], PolicyMemory]:
    """The actions of one round and the memory for the next."""
    now = inp.now
    actions: list[Action] = []
    backoff_until = dict(memory.backoff_until)
    backoff_delay = dict(memory.backoff_delay)
    # Back-off: after a failure, no requests for a while, doubling per failure; the
    # template's allowance is set to 0 so the scheduler moves its demand to the next
    # template by rank.
    for template in sorted(set(inp.failures)) if inp.failures else ():
        delay = backoff_delay.get(template, 0.0)
        delay = config.backoff_initial if delay == 0 else min(config.backoff_max, 2 * delay)
        backoff_delay[template] = delay
        backoff_until[template] = now + delay
        reason = f"provider failure: back-off {delay:g} s until {now + delay:g}"
        actions.append(SetAllowance(template, 0, reason))
    for template in inp.joined:
        backoff_delay.pop(template, None)  # a success resets the doubling
    for template, until in sorted(backoff_until.items()) if backoff_until else ():
        if until <= now:
            del backoff_until[template]
            actions.append(SetAllowance(template, None, "back-off over"))

    alive = dict(inp.alive)
    demand_since: dict[str, float] = {}

    for entry in inp.demand.hosts:
        name = entry.template
        if entry.count <= 0 or name in backoff_until:
            continue
        since = memory.demand_since.get(name, now)
        demand_since[name] = since
        if now - since < config.persistence:
            continue
        room = _room(name, _template_max(catalog, name), config, alive, inp.in_flight)
        count = min(entry.count, config.max_requests_per_round, room)
        if count > 0:
            actions.append(
                RequestHosts(
                    name, count,
                    f"demand of {entry.count} hosts for {len(entry.jobs)} jobs persisted "
                    f"{seconds(now - since)} s",
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
                    f"short {res.amount:g} for {len(res.jobs)} jobs for {now - since:g} s",
                )
            )

    actions.extend(_reclaim(inp, config, alive))
    for res_idle in inp.idle.resources:
        actions.append(
            ReturnTokens(res_idle.resource, res_idle.amount, "borrowed tokens idle")
        )
    return actions, PolicyMemory(demand_since, backoff_until, backoff_delay)


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
    for res in demand.resources:
        if res.amount > 0:
            return None
    for name, minimum in policy.min_hosts.items():
        if alive.get(name, 0) + in_flight.get(name, 0) < minimum:
            return None
    delay = memory.backoff_delay
    if joined and any(template in delay for template in joined):
        delay = {t: d for t, d in delay.items() if t not in joined}
    elif not memory.demand_since:
        return memory
    return PolicyMemory({}, {}, dict(delay))


def _template_max(catalog: Catalog, name: str) -> int:
    for template in catalog.templates:
        if template.name == name:
            return template.max
    raise KeyError(name)


def _room(
    name: str,
    template_max: int,
    config: PolicyConfig,
    alive: dict[str, int],
    in_flight: dict[str, int],
) -> int:
    """How many more hosts of a template the policy allows."""
    cap = min(template_max, config.max_hosts.get(name, template_max))
    return max(0, cap - alive.get(name, 0) - in_flight.get(name, 0))


def _reclaim(inp: PolicyInput, config: PolicyConfig, alive: dict[str, int]) -> list[Action]:
    """Drain idle hosts and hosts past their lifetime; decommission drained empty hosts."""
    actions: list[Action] = []
    if not inp.hosts:
        return actions
    keep = config.min_hosts
    lifetime, now = config.max_lifetime, inp.now
    open_count = dict(alive)
    for host in inp.hosts:
        if host.state != "ok":
            open_count[host.template] = open_count.get(host.template, 0) - 1
    idle = {h.host: h.idle_for for h in inp.idle.hosts}
    # In join order (names are unique: no two entries tie)
    for host in _in_join_order(inp.hosts):
        state, template = host.state, host.template
        if state == "closed" and host.running == 0:
            actions.append(DecommissionHost(host.name, "drained and empty"))
            continue
        if state != "ok":
            continue
        if lifetime > 0 and now - host.joined >= lifetime:
            actions.append(DrainHost(host.name, f"maximum lifetime ({seconds(lifetime)} s)"))
            open_count[template] -= 1
        elif host.name in idle and open_count[template] > keep.get(template, 0):
            reason = f"idle reclaim (idle {seconds(idle[host.name])} s)"
            actions.append(DrainHost(host.name, reason))
            open_count[template] -= 1
    return actions


def _in_join_order(hosts: list[ProvisionedHost]) -> list[ProvisionedHost]:
    """`hosts` by (joined, name): as given when they are (a driver may give them so)."""
    for k in range(1, len(hosts)):
        before, after = hosts[k - 1], hosts[k]
        if after.joined < before.joined or (
            after.joined == before.joined and after.name < before.name
        ):
            return [h for _joined, _name, h in sorted([(h.joined, h.name, h) for h in hosts])]
    return hosts
