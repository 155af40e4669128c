"""Scenario tests of the provisioning policy (`xce.policy.decide`), one rule each.

The policy is pure: demand and idle supply (a session's outputs) plus what is known of
requests go in, actions and the memory for the next round come out. Each test builds
the input by hand and states the exact actions the rule gives (FORMATS.md "policy:";
the action types of `xce.policy.actions`). Reason strings are wording, not contract:
actions are compared on their other fields, except where the brief names the wording
("maximum lifetime ...").

The last test, moving demand to the next template, runs the simulator: it needs the
scheduler to see the allowance the policy sets.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from xce.config import load_config_text
from xce.model.causes import Cause
from xce.model.cluster import Catalog, HostTemplate
from xce.model.policy import PolicyConfig
from xce.model.result import Demand, HostDemand, Idle, IdleHost, IdleResource, ResourceDemand
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    PolicyInput,
    PolicyMemory,
    ProvisionedHost,
    decide,
    next_due,
)
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

C5 = "aws.c5"
R5 = "aws.r5"
CATALOG = Catalog(
    idle_time=600,
    templates=(
        HostTemplate(name=C5, provider="aws", slots=16, max=100, rank=10),
        HostTemplate(name=R5, provider="aws", slots=32, max=4, rank=20),
    ),
)


def plain(actions: list[Action]) -> list[tuple[Any, ...]]:
    """Actions without their reason, cause and jobs: (kind, fields...) in order (the
    jobs a request is for: tests/test_policy_knobs.py; causes: the tests that name
    them)."""
    out = []
    for action in actions:
        fields = msgspec.structs.asdict(action)
        fields.pop("reason")
        fields.pop("cause", None)
        fields.pop("jobs", None)
        out.append((type(action).__name__, *fields.values()))
    return out


def hosts_demand(template: str, count: int, jobs: int = 1, in_flight_used: int = 0) -> Demand:
    return Demand(hosts=[HostDemand(template, count, in_flight_used, list(range(1, jobs + 1)))])


def inp(
    now: float,
    demand: Demand | None = None,
    idle: Idle | None = None,
    hosts: list[ProvisionedHost] | None = None,
    in_flight: dict[str, int] | None = None,
    failures: list[str] | None = None,
    joined: list[str] | None = None,
    alive: dict[str, int] | None = None,
) -> PolicyInput:
    """A round's input; `alive` (hosts present per template) defaults to counting
    `hosts`, for tests that list every provisioned host."""
    hosts = hosts or []
    if alive is None:
        alive = {}
        for h in hosts:
            alive[h.template] = alive.get(h.template, 0) + 1
    return PolicyInput(
        now=now,
        demand=demand or Demand(),
        idle=idle or Idle(),
        hosts=hosts,
        in_flight=in_flight or {},
        alive=alive,
        failures=failures or [],
        joined=joined or [],
    )


def host(name: str, template: str = C5, state: str = "ok", joined: float = 0,
         running: int = 0) -> ProvisionedHost:
    return ProvisionedHost(name, template, state, joined, running)


def round_(
    config: PolicyConfig, policy_input: PolicyInput, memory: PolicyMemory | None = None
) -> tuple[list[tuple[Any, ...]], PolicyMemory]:
    actions, new_memory = decide(policy_input, memory or PolicyMemory(), config, CATALOG)
    return plain(actions), new_memory


# --------------------------------------------------------------------------- persistence


def test_persistence_demand_younger_than_threshold_requests_nothing():
    config = PolicyConfig(persistence=60)
    actions, memory = round_(config, inp(1000, hosts_demand(C5, 3, jobs=5)))
    assert actions == [], "demand first seen now has persisted 0 s < 60 s"
    assert memory.demand_since == {C5: 1000}, "the policy remembers when the demand began"
    actions, memory = round_(config, inp(1059, hosts_demand(C5, 3, jobs=5)), memory)
    assert actions == [], "59 s < 60 s"
    assert memory.demand_since == {C5: 1000}


def test_persistence_demand_older_than_threshold_requests_its_count():
    config = PolicyConfig(persistence=60)
    _, memory = round_(config, inp(1000, hosts_demand(C5, 3, jobs=5)))
    actions, memory = round_(config, inp(1060, hosts_demand(C5, 3, jobs=5)), memory)
    assert actions == [("RequestHosts", C5, 3)], "persisted 60 s: request the demand's count"


def test_persistence_restarts_when_demand_goes_away():
    config = PolicyConfig(persistence=60)
    _, memory = round_(config, inp(1000, hosts_demand(C5, 2)))
    actions, memory = round_(config, inp(1030, Demand()), memory)
    assert actions == []
    assert memory.demand_since == {}, "no demand: nothing to remember"
    actions, memory = round_(config, inp(1070, hosts_demand(C5, 2)), memory)
    assert actions == [], "the demand is new again at 1070"
    actions, _ = round_(config, inp(1130, hosts_demand(C5, 2)), memory)
    assert actions == [("RequestHosts", C5, 2)]


def test_persistence_zero_requests_at_once():
    actions, _ = round_(PolicyConfig(persistence=0), inp(5, hosts_demand(R5, 1)))
    assert actions == [("RequestHosts", R5, 1)]


# --------------------------------------------------------------------------- rate limit


def test_rate_limit_caps_hosts_requested_per_template_per_round():
    config = PolicyConfig(persistence=0, max_requests_per_round=5)
    actions, _ = round_(config, inp(0, hosts_demand(C5, 12, jobs=12)))
    assert actions == [("RequestHosts", C5, 5)]


def test_rate_limit_applies_per_template():
    config = PolicyConfig(persistence=0, max_requests_per_round=2)
    demand = Demand(hosts=[HostDemand(C5, 7, 0, [1]), HostDemand(R5, 3, 0, [2])])
    actions, _ = round_(config, inp(0, demand))
    assert actions == [("RequestHosts", C5, 2), ("RequestHosts", R5, 2)]


# --------------------------------------------------------------------------- min / max


def test_min_hosts_requests_up_to_the_minimum_without_demand():
    config = PolicyConfig(min_hosts={C5: 2})
    actions, _ = round_(config, inp(0))
    assert actions == [("RequestHosts", C5, 2)]


def test_min_hosts_counts_alive_and_in_flight_hosts():
    config = PolicyConfig(min_hosts={C5: 3})
    actions, _ = round_(config, inp(0, hosts=[host("c-1")]))
    assert actions == [("RequestHosts", C5, 2)], "1 alive: 2 more"
    actions, _ = round_(config, inp(0, hosts=[host("c-1")], in_flight={C5: 1}))
    assert actions == [("RequestHosts", C5, 1)], "1 alive + 1 in flight: 1 more"
    actions, _ = round_(config, inp(0, hosts=[host("c-1")], in_flight={C5: 2}))
    assert actions == [], "1 alive + 2 in flight: the minimum is met"


def test_min_hosts_counts_hosts_this_round_requests_for_demand():
    config = PolicyConfig(persistence=0, min_hosts={C5: 2})
    actions, _ = round_(config, inp(0, hosts_demand(C5, 3, jobs=3)))
    assert actions == [("RequestHosts", C5, 3)], (
        "the demand's 3 hosts already meet the minimum of 2: no top-up (not one of 0 or -1)"
    )
    actions, _ = round_(config, inp(0, hosts_demand(C5, 2, jobs=2)))
    assert actions == [("RequestHosts", C5, 2)], "exactly the minimum: no top-up"
    actions, _ = round_(PolicyConfig(persistence=0, min_hosts={C5: 3}), inp(0, hosts_demand(C5, 1)))
    assert actions == [("RequestHosts", C5, 1), ("RequestHosts", C5, 2)], (
        "1 for the demand, 2 more to reach the minimum of 3"
    )


def test_max_hosts_caps_requests_given_alive_and_in_flight():
    config = PolicyConfig(persistence=0, max_hosts={C5: 5})
    actions, _ = round_(
        config, inp(0, hosts_demand(C5, 10), hosts=[host("c-1"), host("c-2")], in_flight={C5: 1})
    )
    assert actions == [("RequestHosts", C5, 2)], "max 5 - 2 alive - 1 in flight"
    actions, _ = round_(
        config, inp(0, hosts_demand(C5, 10), hosts=[host(f"c-{i}") for i in range(4)],
                    in_flight={C5: 1})
    )
    assert actions == [], "at max_hosts: no request"


def test_max_hosts_counts_alive_hosts_not_listed_as_candidates():
    """`hosts` need only list the hosts a round may act on; `alive` counts them all."""
    config = PolicyConfig(persistence=0, max_hosts={C5: 5})
    actions, _ = round_(config, inp(0, hosts_demand(C5, 10), alive={C5: 4}))
    assert actions == [("RequestHosts", C5, 1)]
    actions, _ = round_(PolicyConfig(min_hosts={C5: 3}), inp(0, alive={C5: 3}))
    assert actions == []


def test_template_max_caps_requests_given_alive_and_in_flight():
    config = PolicyConfig(persistence=0)  # aws.r5: template max 4, no max_hosts
    actions, _ = round_(
        config, inp(0, hosts_demand(R5, 6), hosts=[host("r-1", R5)], in_flight={R5: 1})
    )
    assert actions == [("RequestHosts", R5, 2)], "template max 4 - 1 alive - 1 in flight"


def test_max_hosts_above_template_max_does_not_raise_the_cap():
    config = PolicyConfig(persistence=0, max_hosts={R5: 50})
    actions, _ = round_(config, inp(0, hosts_demand(R5, 9)))
    assert actions == [("RequestHosts", R5, 4)], "the template's max (4) still applies"


# --------------------------------------------------------------------------- back-off


BACKOFF = PolicyConfig(persistence=0, backoff_initial=60, backoff_max=200)


def test_backoff_failure_sets_allowance_zero_and_stops_requests_until_it_ends():
    actions, memory = round_(BACKOFF, inp(100, hosts_demand(C5, 2), failures=[C5]))
    assert actions == [("SetAllowance", C5, 0)], "a failure: allowance 0, no request"
    assert memory.backoff_until == {C5: 160}
    actions, memory = round_(BACKOFF, inp(159, hosts_demand(C5, 2)), memory)
    assert actions == [], "still backed off at 159"
    actions, memory = round_(BACKOFF, inp(160, hosts_demand(C5, 2)), memory)
    assert actions == [("SetAllowance", C5, None), ("RequestHosts", C5, 2)], (
        "at backoff_until the cap is lifted and the (persistence 0) demand is requested"
    )
    assert memory.backoff_until == {}


def test_backoff_of_one_template_leaves_others_alone():
    demand = Demand(hosts=[HostDemand(C5, 1, 0, [1]), HostDemand(R5, 1, 0, [2])])
    actions, _ = round_(BACKOFF, inp(100, demand, failures=[C5, C5]))
    assert actions == [("SetAllowance", C5, 0), ("RequestHosts", R5, 1)], (
        "two failures of aws.c5 in one round: one back-off; aws.r5 is still requested"
    )


def test_backoff_delay_doubles_per_failure_up_to_max_and_resets_after_a_join():
    memory = PolicyMemory()
    actions, memory = round_(BACKOFF, inp(100, failures=[C5]), memory)
    assert actions == [("SetAllowance", C5, 0)]
    assert memory.backoff_until == {C5: 160}, "first failure: initial 60 s"
    actions, memory = round_(BACKOFF, inp(160), memory)
    assert actions == [("SetAllowance", C5, None)]
    actions, memory = round_(BACKOFF, inp(170, failures=[C5]), memory)
    assert actions == [("SetAllowance", C5, 0)]
    assert memory.backoff_until == {C5: 290}, "second failure: 120 s"
    actions, memory = round_(BACKOFF, inp(290), memory)
    assert actions == [("SetAllowance", C5, None)]
    actions, memory = round_(BACKOFF, inp(300, failures=[C5]), memory)
    assert memory.backoff_until == {C5: 500}, "third failure: 240 s capped at max 200"
    actions, memory = round_(BACKOFF, inp(500), memory)
    actions, memory = round_(BACKOFF, inp(510, failures=[C5]), memory)
    assert memory.backoff_until == {C5: 710}, "fourth failure: still the max"
    actions, memory = round_(BACKOFF, inp(710, joined=[C5]), memory)
    assert actions == [("SetAllowance", C5, None)]
    actions, memory = round_(BACKOFF, inp(720, failures=[C5]), memory)
    assert memory.backoff_until == {C5: 780}, "a host joined since: back to the initial 60 s"


# --------------------------------------------------------------------------- reclaim


def test_idle_reclaim_drains_an_idle_host():
    """Drained empty, an idle host is decommissioned in the same round, right after its
    drain (it has nothing to finish)."""
    idle = Idle(hosts=[IdleHost("c-1", C5, 700)])
    actions, _ = round_(PolicyConfig(), inp(1000, idle=idle, hosts=[host("c-1", joined=100)]))
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")]
    drain, _ = decide(inp(1000, idle=idle, hosts=[host("c-1", joined=100)]), PolicyMemory(),
                      PolicyConfig(), CATALOG)
    assert isinstance(drain[0], DrainHost) and drain[0].cause is Cause.IDLE
    assert drain[1] == DecommissionHost("c-1", "drained and empty"), drain[1]
    assert drain[1].cause is Cause.DRAINED


def test_an_idle_host_is_drained_and_decommissioned_in_the_same_round():
    """No second round is needed to give an idle host back: the round that drains it
    decommissions it, and each DecommissionHost follows its own DrainHost at once."""
    idle = Idle(hosts=[IdleHost("c-1", C5, 700), IdleHost("c-3", C5, 650)])
    hosts = [host("c-1", joined=100), host("c-2", joined=150, running=1),
             host("c-3", joined=200)]
    actions, _ = round_(PolicyConfig(), inp(1000, idle=idle, hosts=hosts))
    assert actions == [
        ("DrainHost", "c-1"), ("DecommissionHost", "c-1"),
        ("DrainHost", "c-3"), ("DecommissionHost", "c-3"),
    ], "c-2 runs a job: neither drained nor decommissioned"


def test_an_idle_reported_host_running_a_job_by_now_is_drained_not_decommissioned():
    """The idle report and the host list are read apart (live: GET /idle, then GET
    /hosts): a job started on c-1 in between. The round still drains it (the report
    says idle) but leaves the decommission to the round that sees it closed and empty,
    rather than ask for one the controller would refuse."""
    idle = Idle(hosts=[IdleHost("c-1", C5, 700)])
    actions, _ = round_(PolicyConfig(), inp(1000, idle=idle, hosts=[host("c-1", running=1)]))
    assert actions == [("DrainHost", "c-1")]


def test_idle_reclaim_leaves_busy_and_not_yet_idle_hosts():
    idle = Idle(hosts=[IdleHost("c-2", C5, 600)])
    hosts = [host("c-1", joined=100, running=2), host("c-2", joined=100), host("c-3", joined=900)]
    actions, _ = round_(PolicyConfig(), inp(1000, idle=idle, hosts=hosts))
    assert actions == [("DrainHost", "c-2"), ("DecommissionHost", "c-2")], (
        "only the host the session reports idle"
    )


def test_idle_reclaim_decommissions_a_closed_empty_host():
    hosts = [host("c-1", state="closed"), host("c-2", state="closed", running=1)]
    actions, _ = round_(PolicyConfig(), inp(1000, hosts=hosts))
    assert actions == [("DecommissionHost", "c-1")], (
        "drained and empty: give it back; a closed host still running waits"
    )


def test_min_hosts_keeps_idle_hosts():
    idle = Idle(hosts=[IdleHost("c-1", C5, 700), IdleHost("c-2", C5, 700)])
    hosts = [host("c-1"), host("c-2")]
    actions, _ = round_(PolicyConfig(min_hosts={C5: 1}), inp(1000, idle=idle, hosts=hosts))
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")], (
        "one of two idle hosts kept for min_hosts 1"
    )
    actions, _ = round_(PolicyConfig(min_hosts={C5: 2}), inp(1000, idle=idle, hosts=hosts))
    assert actions == [], "min_hosts 2: both kept"


def test_min_hosts_does_not_count_a_draining_host_as_kept():
    """A closed host is on its way out (drain, then decommission): keeping min_hosts
    of a template means keeping that many open hosts, so the only open host of a
    template with min_hosts 1 must not be drained."""
    idle = Idle(hosts=[IdleHost("c-2", C5, 700)])
    hosts = [host("c-1", state="closed", running=1), host("c-2")]
    actions, _ = round_(PolicyConfig(min_hosts={C5: 1}), inp(1000, idle=idle, hosts=hosts))
    assert actions == [], "c-2 is the only open aws.c5 host: min_hosts keeps it"


def test_a_draining_host_still_running_may_be_counted_instead_of_listed():
    """A driver may leave a closed host that still runs jobs out of `hosts` and count
    it in `closed_busy` (sim/rounds.py: hundreds of hosts drained at their lifetime):
    the round decides as when it is listed."""
    idle = Idle(hosts=[IdleHost("c-2", C5, 700)])
    config = PolicyConfig(min_hosts={C5: 1})
    counted = msgspec.structs.replace(
        inp(1000, idle=idle, hosts=[host("c-2")], alive={C5: 2}), closed_busy={C5: 1}
    )
    assert round_(config, counted)[0] == [], "c-2 is the only open aws.c5 host"
    two = Idle(hosts=[IdleHost("c-2", C5, 700), IdleHost("c-3", C5, 700)])
    counted = msgspec.structs.replace(
        inp(1000, idle=two, hosts=[host("c-2"), host("c-3")], alive={C5: 3}),
        closed_busy={C5: 1},
    )
    assert round_(config, counted)[0] == [("DrainHost", "c-2"), ("DecommissionHost", "c-2")], (
        "one of two open kept"
    )


# --------------------------------------------------------------------------- lifetime


def test_maximum_lifetime_drains_an_old_host_even_when_busy():
    config = PolicyConfig(max_lifetime=86400)
    hosts = [host("c-1", joined=1000, running=3), host("c-2", joined=1001, running=3)]
    actions, _ = decide(inp(87400, hosts=hosts), PolicyMemory(), config, CATALOG)
    assert plain(actions) == [("DrainHost", "c-1")], "c-1 is 86400 s old, c-2 one second less"
    assert actions[0].reason.startswith("maximum lifetime"), actions[0].reason
    assert isinstance(actions[0], DrainHost) and actions[0].cause is Cause.LIFETIME, \
        "the cause, not the reason's words, says why (the close reason sent)"


def test_a_busy_host_drained_at_its_lifetime_is_decommissioned_once_empty():
    """A host past its lifetime still running jobs is drained, not decommissioned: the
    rounds while it runs give it nothing more, and the first round that sees it closed
    and empty decommissions it. One past its lifetime running nothing is decommissioned
    in the round that drains it."""
    config = PolicyConfig(max_lifetime=1000)
    actions, _ = round_(config, inp(1100, hosts=[host("c-1", joined=100, running=2),
                                                 host("c-2", joined=100)]))
    assert actions == [("DrainHost", "c-1"), ("DrainHost", "c-2"), ("DecommissionHost", "c-2")]
    busy = [host("c-1", state="closed", joined=100, running=1)]
    assert round_(config, inp(1200, hosts=busy))[0] == [], "c-1 still runs a job"
    empty = [host("c-1", state="closed", joined=100, running=0)]
    assert round_(config, inp(1300, hosts=empty))[0] == [("DecommissionHost", "c-1")]


def test_maximum_lifetime_zero_means_no_limit():
    hosts = [host("c-1", joined=0, running=1)]
    actions, _ = round_(PolicyConfig(max_lifetime=0), inp(10_000_000, hosts=hosts))
    assert actions == []


# --------------------------------------------------------------------------- timers
# `next_due` (xce.policy.timers): when a round could decide something new with no new
# input. The simulator wakes up then; tests/test_sim.py checks the runs.


def test_next_due_is_when_demand_will_have_persisted():
    config = PolicyConfig(persistence=60)
    demand = Demand(hosts=[HostDemand(C5, 3, 0, [1])],
                    resources=[ResourceDemand("vcs", 2, 0, [2])])
    _, memory = round_(config, inp(1000, demand))
    assert next_due(memory, config, [], 1000) == 1060
    assert round_(config, inp(1059, demand), memory)[0] == []
    assert round_(config, inp(1060, demand), memory)[0] == [
        ("RequestHosts", C5, 3), ("RequestTokens", "vcs", 2),
    ]
    assert next_due(memory, config, [], 1060) == math.inf, "persisted: nothing more due"
    _, later = round_(config, inp(1030, hosts_demand(R5, 1)), memory)
    assert next_due(later, config, [], 1030) == 1090, "aws.r5 first seen at 1030"


def test_next_due_is_when_a_backoff_ends():
    _, memory = round_(BACKOFF, inp(100, hosts_demand(C5, 2), failures=[C5]))
    assert next_due(memory, BACKOFF, [], 100) == 160
    assert round_(BACKOFF, inp(159, hosts_demand(C5, 2)), memory)[0] == []
    actions, memory = round_(BACKOFF, inp(160, hosts_demand(C5, 2)), memory)
    assert actions == [("SetAllowance", C5, None), ("RequestHosts", C5, 2)]
    assert next_due(memory, BACKOFF, [], 160) == math.inf


def test_next_due_is_when_the_oldest_open_host_reaches_its_lifetime():
    """Join times of the open provisioned hosts, earliest first: the first one not
    past its lifetime yet is the next drained for its age (one past it is drained by
    the round of now)."""
    config = PolicyConfig(max_lifetime=1000)
    hosts = [host("c-1", joined=100, running=1), host("c-2", joined=400, running=1)]
    assert next_due(PolicyMemory(), config, [100.0, 400.0], 500) == 1100
    assert round_(config, inp(1099, hosts=hosts))[0] == []
    assert round_(config, inp(1100, hosts=hosts))[0] == [("DrainHost", "c-1")]
    assert next_due(PolicyMemory(), config, [100.0, 400.0], 1100) == 1400
    assert next_due(PolicyMemory(), config, [400.0], 1100) == 1400
    assert next_due(PolicyMemory(), config, [], 500) == math.inf, "no host"
    no_limit = PolicyConfig(max_lifetime=0)
    assert next_due(PolicyMemory(), no_limit, [100.0], 500) == math.inf, "0: no limit"


def test_next_due_is_the_soonest_rule_after_now():
    memory = PolicyMemory(demand_since={C5: 1000, R5: 900}, backoff_until={C5: 1030})
    config = PolicyConfig(persistence=60, max_lifetime=500)
    assert next_due(memory, config, [560.0], 1000) == 1030, "the back-off ends first"
    assert next_due(memory, config, [510.0], 1000) == 1010, "the lifetime comes first"
    assert next_due(memory, config, [], 1030) == 1060, "aws.r5 (960) is past"
    assert next_due(memory, config, [], 1060) == math.inf
    assert next_due(PolicyMemory(), PolicyConfig(), [], 0) == math.inf


@given(
    st.fixed_dictionaries({
        "demand": st.lists(st.tuples(st.sampled_from([C5, R5]), st.integers(0, 3)),
                           max_size=2, unique_by=lambda d: d[0]),
        "tokens": st.sampled_from([0.0, 2.0]),
        "since": st.dictionaries(st.sampled_from([C5, R5, "tokens:vcs"]),
                                 st.sampled_from([0.0, 500.0, 950.0, 1000.0])),
        "backoff": st.dictionaries(st.sampled_from([C5, R5]),
                                   st.sampled_from([900.0, 1000.0, 1040.0, 3000.0])),
        "joined": st.lists(st.sampled_from([0.0, 200.0, 600.0, 990.0]), max_size=4),
        "persistence": st.sampled_from([0.0, 60.0, 600.0]),
        "lifetime": st.sampled_from([0.0, 100.0, 1000.0]),
        "min_hosts": st.sampled_from([{}, {C5: 2}]),
        "later": st.lists(st.integers(1, 4000), max_size=6),
    })
)
def test_a_round_decides_the_same_until_next_due(drawn: dict[str, Any]) -> None:
    """Whatever the memory and the (unchanging) input, a round run at any time from
    now until before `next_due` decides what the round of now decides (reasons
    aside): nothing that depends on time alone changes earlier."""
    now = 1000.0
    joined = sorted(drawn["joined"])
    hosts = [host(f"c-{k}", joined=t, running=1) for k, t in enumerate(joined)]
    demand = Demand(
        hosts=[HostDemand(t, n, 0, [1]) for t, n in drawn["demand"]],
        resources=[ResourceDemand("vcs", drawn["tokens"], 0, [2])] if drawn["tokens"] else [],
    )
    memory = PolicyMemory(demand_since=drawn["since"], backoff_until=drawn["backoff"])
    config = PolicyConfig(persistence=drawn["persistence"], max_lifetime=drawn["lifetime"],
                          min_hosts=drawn["min_hosts"])
    due = next_due(memory, config, joined, now)
    assert due > now
    first, _ = round_(config, inp(now, demand, hosts=hosts), memory)
    for step in drawn["later"]:
        if now + step < due:
            later, _ = round_(config, inp(now + step, demand, hosts=hosts), memory)
            assert later == first, (now + step, due)


# --------------------------------------------------------------------------- tokens


def test_token_return_gives_back_idle_borrowed_tokens():
    idle = Idle(resources=[IdleResource("vcs", 3), IdleResource("hspice/cloud", 1.5)])
    actions, _ = round_(PolicyConfig(), inp(1000, idle=idle))
    assert actions == [("ReturnTokens", "vcs", 3), ("ReturnTokens", "hspice/cloud", 1.5)]


def test_token_request_after_persistence():
    config = PolicyConfig(persistence=60)
    demand = Demand(resources=[ResourceDemand("vcs", 4, 0, [11, 12])])
    actions, memory = round_(config, inp(0, demand))
    assert actions == []
    actions, _ = round_(config, inp(60, demand), memory)
    assert actions == [("RequestTokens", "vcs", 4)]


def test_decide_is_pure():
    config = PolicyConfig(persistence=10, min_hosts={R5: 1})
    policy_input = inp(50, hosts_demand(C5, 2), failures=[R5])
    memory = PolicyMemory(demand_since={C5: 0})
    first = decide(policy_input, memory, config, CATALOG)
    second = decide(policy_input, memory, config, CATALOG)
    assert first == second
    assert memory == PolicyMemory(demand_since={C5: 0}), "the memory given is not changed"


# --------------------------------------------------------------------------- next template


def test_backoff_moves_demand_to_the_next_template_by_rank(tmp_path: Path):
    """Provider `bad` fails every host of `first` (rank 1): after the failure the
    policy backs `first` off (allowance 0), the scheduler places the jobs on `second`
    (rank 2), whose hosts are requested, join and run them."""
    config = load_config_text(textwrap.dedent("""
        cluster: t
        session_interval: 10
        queues: [{name: normal, priority: 30}]
        catalog:
          idle_time: 300
          templates:
            - {name: first, provider: bad, slots: 4, max: 10, rank: 1}
            - {name: second, provider: good, slots: 4, max: 10, rank: 2}
        policy: {persistence: 0, backoff: {initial: 600, max: 600}}
        simulation:
          providers:
            bad: {lead_time: 30, failure_rate: 1.0}
            good: {lead_time: 60}
    """))
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {ids: \"1-2\", submit: 0, run: 100, n: 4}\n")
    sim = Simulator(config, load_workload(path))
    sim.run()
    summary = sim.summary()
    log = [(t, *row) for t, a in sim.actions_log for row in plain([a])]
    # t=0: both jobs fit on new hosts of `first` (rank 1): 2 requested. They fail at
    # t=30; the round of the session at 30 backs `first` off (600 s); the session at 40
    # sees allowance 0 for `first` and places the jobs on `second`.
    assert log[:3] == [
        (0.0, "RequestHosts", "first", 2),
        (30.0, "SetAllowance", "first", 0),
        (40.0, "RequestHosts", "second", 2),
    ]
    assert sim.metrics.hosts_failed == {"first": 2}
    assert sim.metrics.hosts_joined == {"second": 2}
    assert sim.metrics.started == {1: 100.0, 2: 100.0}, "the second template's hosts join at 100"
    assert summary["finished"] == 2


@given(
    st.lists(
        st.tuples(st.integers(1, 30), st.sampled_from([0.0, 100.0, 200.0]),
                  st.sampled_from(["ok", "closed"]), st.integers(0, 2), st.booleans()),
        max_size=12, unique_by=lambda h: h[0],
    ),
    st.randoms(use_true_random=False),
    st.integers(0, 3),
)
def test_reclaim_takes_hosts_in_join_order_whatever_order_they_come_in(
    specs: list[tuple[int, float, str, int, bool]], rng: Any, keep: int
) -> None:
    """Hosts are drained and decommissioned in order of (join time, name) however the
    driver lists them (a driver may give them in that order; decide sorts them only
    when they are not): shuffled input gives the very same actions, reasons included."""
    hosts = [host(f"c-{n}", joined=joined, state=state, running=running)
             for n, joined, state, running, _idle in specs]
    idle = Idle(hosts=[IdleHost(f"c-{n}", C5, 700) for n, _j, state, running, is_idle in specs
                       if is_idle and state == "ok" and running == 0])
    config = PolicyConfig(min_hosts={C5: keep}, max_lifetime=1000)
    by_join = sorted(hosts, key=lambda h: (h.joined, h.name))
    shuffled = list(hosts)
    rng.shuffle(shuffled)
    expected, _ = decide(inp(1050, idle=idle, hosts=by_join), PolicyMemory(), config, CATALOG)
    got, _ = decide(inp(1050, idle=idle, hosts=shuffled), PolicyMemory(), config, CATALOG)
    assert got == expected
    drained = [a.host for a in expected if isinstance(a, DrainHost)]
    assert drained == [h.name for h in by_join if h.name in drained], "in join order"
