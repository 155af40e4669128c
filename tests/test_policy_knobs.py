"""Scenario tests of the policy knobs of issue 18 (`xce.policy.decide`, docs/policy.md):

* `keep_idle_while_demand`: an idle host is not drained for idleness while the round's
  demand asks for new hosts of its template;
* `scale_down_delay_after_add`: for that long after hosts of a template were last
  requested, none of its idle hosts is drained for idleness; the policy's timer
  (`next_due`) reports the end of the delay while it holds hosts back;
* `RequestHosts.jobs`: a request made for demand carries the demand's jobs;
* `cancel_surplus`: in-flight hosts the demand reports as surplus (no pending job needs
  them) are cancelled (`CancelHosts`), and `quiet_memory` agrees with `decide` on it.

Each test builds a round's input by hand and states the exact actions (kind and
fields; reasons only where they are the point). A host drained empty (idle, or past
its lifetime running nothing) is decommissioned in the same round, its
`DecommissionHost` right after its `DrainHost`.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.model.causes import Cause
from xce.model.cluster import Catalog, HostTemplate
from xce.model.policy import PolicyConfig
from xce.model.result import Demand, HostDemand, Idle, IdleHost, SurplusHosts
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    PolicyInput,
    PolicyMemory,
    ProvisionedHost,
    RequestHosts,
    decide,
    next_due,
    quiet_memory,
)
from xce.policy.actions import CancelHosts
from xce.policy.timers import due_at

C5 = "aws.c5"
R5 = "aws.r5"
CATALOG = Catalog(
    idle_time=600,
    templates=(
        HostTemplate(name=C5, provider="aws", slots=16, max=100, rank=10),
        HostTemplate(name=R5, provider="aws", slots=32, max=4, rank=20),
    ),
)
# The knobs alone: no persistence to wait for, no lifetime drains.
KEEP = PolicyConfig(persistence=0, max_lifetime=0)
NO_KEEP = PolicyConfig(persistence=0, max_lifetime=0, keep_idle_while_demand=False)
DELAY = PolicyConfig(
    persistence=0, max_lifetime=0, keep_idle_while_demand=False, scale_down_delay_after_add=600
)


def plain(actions: list[Action]) -> list[tuple[Any, ...]]:
    """Actions without their reason and cause: (kind, fields...) in order (`jobs`
    included; causes: the tests that name them)."""
    out = []
    for action in actions:
        fields = msgspec.structs.asdict(action)
        fields.pop("reason")
        fields.pop("cause", None)
        out.append((type(action).__name__, *fields.values()))
    return out


def demand(*entries: tuple[str, int]) -> Demand:
    return Demand(hosts=[HostDemand(t, n, 0, [10 + k]) for k, (t, n) in enumerate(entries)])


def host(name: str, template: str = C5, joined: float = 0, state: str = "ok",
         running: int = 0) -> ProvisionedHost:
    return ProvisionedHost(name, template, state, joined, running)


def inp(now: float, demand_: Demand | None = None, idle: list[ProvisionedHost] | None = None,
        busy: list[ProvisionedHost] | None = None) -> PolicyInput:
    """A round's input: `idle` hosts (reported idle for 900 s) and `busy` ones; `alive`
    counts them all."""
    idle = idle or []
    hosts = [*idle, *(busy or [])]
    alive: dict[str, int] = {}
    for h in hosts:
        alive[h.template] = alive.get(h.template, 0) + 1
    return PolicyInput(
        now=now, demand=demand_ or Demand(),
        idle=Idle(hosts=[IdleHost(h.name, h.template, 900) for h in idle]),
        hosts=hosts, in_flight={}, alive=alive,
    )


def round_(config: PolicyConfig, policy_input: PolicyInput,
           memory: PolicyMemory | None = None) -> tuple[list[tuple[Any, ...]], PolicyMemory]:
    actions, after = decide(policy_input, memory or PolicyMemory(), config, CATALOG)
    return plain(actions), after


# --------------------------------------------------------------- keep_idle_while_demand


def test_idle_host_is_kept_while_demand_for_its_template_persists() -> None:
    config = PolicyConfig(persistence=60, max_lifetime=0)
    idle = [host("c-1")]
    actions, memory = round_(config, inp(1000, demand((C5, 2)), idle))
    assert actions == [], "demand for aws.c5: its idle host is kept (and 0 s < persistence)"
    actions, memory = round_(config, inp(1030, demand((C5, 2)), idle), memory)
    assert actions == [], "the demand still asks for aws.c5 hosts: still kept"
    actions, memory = round_(config, inp(1060, demand((C5, 2)), idle), memory)
    assert actions == [("RequestHosts", C5, 2, (10,))], "requested; the idle host stays"
    actions, _ = round_(config, inp(1070, None, idle), memory)
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")], (
        "the demand is gone: drained for idleness, and given back"
    )


def test_idle_host_is_drained_when_the_demand_is_for_another_template() -> None:
    actions, _ = round_(KEEP, inp(1000, demand((R5, 1)), [host("c-1")]))
    assert actions == [
        ("RequestHosts", R5, 1, (10,)), ("DrainHost", "c-1"), ("DecommissionHost", "c-1"),
    ]


def test_only_the_demanded_templates_idle_hosts_are_kept() -> None:
    idle = [host("c-1", joined=1), host("r-1", R5, joined=2)]
    actions, _ = round_(KEEP, inp(1000, demand((R5, 1)), idle))
    assert actions == [
        ("RequestHosts", R5, 1, (10,)), ("DrainHost", "c-1"), ("DecommissionHost", "c-1"),
    ]


def test_idle_host_is_drained_when_keep_idle_while_demand_is_false() -> None:
    actions, _ = round_(NO_KEEP, inp(1000, demand((C5, 2)), [host("c-1")]))
    assert actions == [
        ("RequestHosts", C5, 2, (10,)), ("DrainHost", "c-1"), ("DecommissionHost", "c-1"),
    ]
    assert actions[1:] == plain([DrainHost("c-1", ""), DecommissionHost("c-1", "")])


def test_demand_without_new_hosts_does_not_keep_idle_hosts() -> None:
    """count 0 (only in-flight hosts used): no new host is asked for."""
    no_new = Demand(hosts=[HostDemand(C5, 0, 3, [1, 2])])
    actions, _ = round_(KEEP, inp(1000, no_new, [host("c-1")]))
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")]


def test_demand_in_back_off_still_keeps_idle_hosts() -> None:
    """The knob reads the round's demand, requested or not (here: backed off)."""
    memory = PolicyMemory(backoff_until={C5: 5000}, backoff_delay={C5: 60})
    actions, _ = round_(KEEP, inp(1000, demand((C5, 2)), [host("c-1")]), memory)
    assert actions == []


def test_lifetime_drains_and_decommissions_ignore_keep_idle_while_demand() -> None:
    """c-1, past its lifetime and empty, is drained and decommissioned in this round;
    c-2, seen closed and empty, is decommissioned; c-3, past its lifetime but busy, is
    drained only (decommissioned by a later round, once empty)."""
    config = PolicyConfig(persistence=60, max_lifetime=1000)
    old = host("c-1", joined=0)
    closed = host("c-2", joined=500, state="closed")
    busy = host("c-3", joined=0, running=1)
    actions, _ = round_(config, inp(1000, demand((C5, 2)), [old], [closed, busy]))
    assert actions == [
        ("DrainHost", "c-1"), ("DecommissionHost", "c-1"), ("DrainHost", "c-3"),
        ("DecommissionHost", "c-2"),
    ]
    drain, _ = decide(inp(1000, demand((C5, 2)), [old], [closed]), PolicyMemory(), config,
                      CATALOG)
    assert drain[0] == DrainHost("c-1", "maximum lifetime (1000 s)", Cause.LIFETIME), \
        "its reason as before, its cause the lifetime"


# --------------------------------------------------------- scale_down_delay_after_add


def test_delay_after_add_holds_back_idle_drains_for_exactly_the_delay() -> None:
    idle = [host("c-1")]
    actions, memory = round_(DELAY, inp(1000, demand((C5, 3)), idle))
    assert actions == [("RequestHosts", C5, 3, (10,))], "requested now: c-1 is held back"
    assert memory.added_at == {C5: 1000}
    assert memory.held_until == {C5: 1600}
    actions, memory = round_(DELAY, inp(1300, None, idle), memory)
    assert actions == []
    actions, memory = round_(DELAY, inp(1599.5, None, idle), memory)
    assert actions == [], "599.5 s after the request < 600 s"
    assert memory.held_until == {C5: 1600} and memory.added_at == {C5: 1000}
    drained, after = decide(inp(1600, None, idle), memory, DELAY, CATALOG)
    assert drained == [
        DrainHost("c-1", "idle reclaim (idle 900 s)"),
        DecommissionHost("c-1", "drained and empty"),
    ], "== delay: drained, and given back in the same round"
    assert after.held_until == {} and after.added_at == {C5: 1000}


def test_delay_after_add_counts_from_the_last_request() -> None:
    _, memory = round_(DELAY, inp(1000, demand((C5, 1))))
    _, memory = round_(DELAY, inp(1400, demand((C5, 1))), memory)
    assert memory.added_at == {C5: 1400}
    actions, memory = round_(DELAY, inp(1700, None, [host("c-1")]), memory)
    assert actions == [], "300 s after the second request"
    assert memory.held_until == {C5: 2000}
    actions, _ = round_(DELAY, inp(2000, None, [host("c-1")]), memory)
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")]


def test_delay_after_add_is_per_template() -> None:
    _, memory = round_(DELAY, inp(1000, demand((C5, 1))))
    idle = [host("c-1", joined=1), host("r-1", R5, joined=2)]
    actions, memory = round_(DELAY, inp(1100, None, idle), memory)
    assert actions == [("DrainHost", "r-1"), ("DecommissionHost", "r-1")], (
        "no aws.r5 hosts were requested"
    )
    assert memory.held_until == {C5: 1600}


def test_min_hosts_top_ups_start_the_delay_too() -> None:
    config = PolicyConfig(persistence=0, max_lifetime=0, min_hosts={C5: 2},
                          scale_down_delay_after_add=100)
    busy = host("c-0", running=1)
    actions, memory = round_(config, inp(1000, None, None, [busy]))
    assert actions == [("RequestHosts", C5, 1, ())], "a top-up carries no jobs"
    assert memory.added_at == {C5: 1000}
    idle = [host("c-1", joined=1), host("c-2", joined=2)]
    actions, memory = round_(config, inp(1050, None, idle, [busy]), memory)
    assert actions == []
    actions, _ = round_(config, inp(1100, None, idle, [busy]), memory)
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")], (
        "then down to min_hosts (2 open)"
    )


def test_zero_delay_is_off() -> None:
    config = PolicyConfig(persistence=0, max_lifetime=0, keep_idle_while_demand=False)
    assert config.scale_down_delay_after_add == 0, "the default"
    actions, memory = round_(config, inp(1000, demand((C5, 1)), [host("c-1")]))
    assert actions == [
        ("RequestHosts", C5, 1, (10,)), ("DrainHost", "c-1"), ("DecommissionHost", "c-1"),
    ]
    assert memory.added_at == {C5: 1000} and memory.held_until == {}


def test_both_knobs_hold_and_the_delay_outlasts_the_demand() -> None:
    config = PolicyConfig(persistence=0, max_lifetime=0, scale_down_delay_after_add=600)
    idle = [host("c-1")]
    actions, memory = round_(config, inp(1000, demand((C5, 1)), idle))
    assert actions == [("RequestHosts", C5, 1, (10,))]
    actions, memory = round_(config, inp(1100, None, idle), memory)
    assert actions == [], "no more demand, but within the delay"
    actions, _ = round_(config, inp(1600, None, idle), memory)
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")]


def test_delay_does_not_hold_lifetime_drains() -> None:
    config = PolicyConfig(persistence=0, max_lifetime=1000, scale_down_delay_after_add=600)
    memory = PolicyMemory(added_at={C5: 990})
    actions, after = round_(config, inp(1000, None, [host("c-1", joined=0)]), memory)
    assert actions == [("DrainHost", "c-1"), ("DecommissionHost", "c-1")], (
        "past its lifetime and empty: drained and given back in this round"
    )
    assert after.held_until == {}, "nothing held back"


def test_decide_leaves_the_memory_given_unchanged() -> None:
    memory = PolicyMemory(added_at={R5: 10.0})
    _, after = round_(DELAY, inp(1000, demand((C5, 1))), memory)
    assert memory.added_at == {R5: 10.0}
    assert after.added_at == {R5: 10.0, C5: 1000}


# ----------------------------------------------------------------------- the timer


def test_next_due_is_the_end_of_a_delay_holding_idle_hosts_back() -> None:
    _, memory = round_(DELAY, inp(1000, demand((C5, 1)), [host("c-1")]))
    assert next_due(memory, DELAY, [], 1000) == 1600
    assert due_at({}, {}, 0, 0, [], 1000, memory.held_until) == 1600
    assert due_at({}, {}, 0, 0, [], 1000) == math.inf, "without it (the old call)"
    _, drained = round_(DELAY, inp(1600, None, [host("c-1")]), memory)
    assert next_due(drained, DELAY, [], 1600) == math.inf


def test_next_due_ignores_a_delay_that_holds_nothing_back() -> None:
    _, memory = round_(DELAY, inp(1000, demand((C5, 1))))
    assert memory.added_at == {C5: 1000}
    assert next_due(memory, DELAY, [], 1000) == math.inf, "no idle host: nothing to wake for"


@settings(max_examples=200, deadline=None)
@given(
    added=st.sampled_from([400.0, 900.0, 1000.0]),
    delay=st.sampled_from([0.0, 100.0, 600.0]),
    later=st.lists(st.integers(1, 2000), max_size=6),
)
def test_a_round_decides_the_same_until_next_due(
    added: float, delay: float, later: list[int]
) -> None:
    config = PolicyConfig(persistence=0, max_lifetime=0, scale_down_delay_after_add=delay)
    memory = PolicyMemory(added_at={C5: added})
    now = 1000.0
    idle = [host("c-1", joined=1), host("r-1", R5, joined=2)]
    first, after = round_(config, inp(now, None, idle), memory)
    due = next_due(after, config, [], now)
    assert due > now
    both = [("DrainHost", "c-1"), ("DecommissionHost", "c-1"),
            ("DrainHost", "r-1"), ("DecommissionHost", "r-1")]
    if delay and now < added + delay:
        assert due == added + delay
        assert first == [("DrainHost", "r-1"), ("DecommissionHost", "r-1")]
    else:
        assert first == both
    for step in later:
        if now + step < due:
            assert round_(config, inp(now + step, None, idle), memory)[0] == first
        else:
            assert round_(config, inp(now + step, None, idle), memory)[0] == both


# -------------------------------------------------------------------- quiet_memory


@st.composite
def quiet_rounds(draw: st.DrawFn) -> tuple[PolicyInput, PolicyMemory, PolicyConfig]:
    """The simulator's precondition for quiet_memory (no failures, no idle host, no
    host a round would drain), with remembered requests and held-back delays."""
    times = st.sampled_from([0.0, 500.0, 1000.0])
    names = st.lists(st.sampled_from([C5, R5]), max_size=2, unique=True)
    demand_ = Demand(hosts=[HostDemand(t, draw(st.integers(0, 1)), 0, [1])
                            for t in draw(names)],
                     surplus_hosts=[SurplusHosts(t, draw(st.integers(0, 2)))
                                    for t in draw(names)])
    hosts = [host("c-9", draw(st.sampled_from([C5, R5])), state="closed", running=1)
             for _ in range(draw(st.integers(0, 1)))]
    policy_input = PolicyInput(
        now=1000.0, demand=demand_, idle=Idle(), hosts=hosts,
        in_flight={C5: draw(st.integers(0, 1))}, alive={R5: draw(st.integers(0, 1))},
        joined=draw(st.lists(st.sampled_from([C5, R5]), max_size=1)),
    )
    memory = PolicyMemory(
        demand_since={t: draw(times) for t in draw(names)},
        backoff_delay={t: 60.0 for t in draw(names)},
        added_at={t: draw(times) for t in draw(names)},
        held_until={t: draw(times) + 600 for t in draw(names)},
    )
    config = PolicyConfig(
        persistence=draw(st.sampled_from([0.0, 60.0])),
        min_hosts=draw(st.sampled_from([{}, {R5: 1}])), max_lifetime=0,
        keep_idle_while_demand=draw(st.booleans()),
        scale_down_delay_after_add=draw(st.sampled_from([0.0, 600.0])),
        cancel_surplus=draw(st.booleans()),
    )
    return policy_input, memory, config


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(quiet_rounds())
def test_quiet_memory_carries_the_knobs_memory_as_decide_does(
    drawn: tuple[PolicyInput, PolicyMemory, PolicyConfig],
) -> None:
    policy_input, memory, config = drawn
    quiet = quiet_memory(policy_input.demand, policy_input.idle, memory, config,
                         policy_input.in_flight, policy_input.alive,
                         list(policy_input.joined))
    if quiet is None:
        return
    actions, after = decide(policy_input, memory, config, CATALOG)
    assert actions == []
    assert after == quiet


def test_quiet_memory_keeps_added_at_and_drops_held_until() -> None:
    memory = PolicyMemory(added_at={C5: 900.0}, held_until={C5: 1500.0})
    quiet = quiet_memory(Demand(), Idle(), memory, DELAY, {}, {}, [])
    assert quiet == PolicyMemory(added_at={C5: 900.0})
    assert decide(inp(1000), memory, DELAY, CATALOG) == ([], quiet)
    unchanged = PolicyMemory(added_at={C5: 900.0})
    assert quiet_memory(Demand(), Idle(), unchanged, DELAY, {}, {}, []) is unchanged


# ------------------------------------------------------------------ RequestHosts.jobs


def test_requests_for_demand_carry_its_jobs_in_scheduling_order() -> None:
    jobs = Demand(hosts=[HostDemand(C5, 2, 0, [7, 3, 9]), HostDemand(R5, 1, 0, [4])])
    actions, _ = decide(inp(1000, jobs), PolicyMemory(), KEEP, CATALOG)
    assert actions == [
        RequestHosts(C5, 2, "demand of 2 hosts for 3 jobs persisted 0 s", (7, 3, 9)),
        RequestHosts(R5, 1, "demand of 1 hosts for 1 jobs persisted 0 s", (4,)),
    ]


def test_a_capped_request_still_carries_all_the_demands_jobs() -> None:
    config = PolicyConfig(persistence=0, max_requests_per_round=1)
    jobs = Demand(hosts=[HostDemand(C5, 3, 0, [5, 6, 8])])
    actions, _ = round_(config, inp(1000, jobs))
    assert actions == [("RequestHosts", C5, 1, (5, 6, 8))]


# -------------------------------------------------------------------- cancel_surplus

CANCEL = PolicyConfig(persistence=0, max_lifetime=0)
NO_CANCEL = PolicyConfig(persistence=0, max_lifetime=0, cancel_surplus=False)


def surplus(*entries: tuple[str, int], hosts: list[HostDemand] | None = None) -> Demand:
    return Demand(hosts=hosts or [], surplus_hosts=[SurplusHosts(t, n) for t, n in entries])


def in_flight_input(now: float, demand_: Demand, in_flight: dict[str, int]) -> PolicyInput:
    return PolicyInput(now=now, demand=demand_, idle=Idle(), hosts=[], in_flight=in_flight,
                       alive={})


def test_surplus_in_flight_hosts_are_cancelled_by_default() -> None:
    assert PolicyConfig().cancel_surplus is True, "the default"
    actions, after = decide(in_flight_input(1000, surplus((C5, 2)), {C5: 3}),
                            PolicyMemory(), CANCEL, CATALOG)
    assert actions == [CancelHosts(C5, 2, "2 hosts in flight that no pending job needs")]
    assert after == PolicyMemory(), "a cancellation starts no delay, remembers nothing"


def test_each_templates_surplus_is_cancelled_in_the_demands_order() -> None:
    actions, _ = round_(CANCEL, in_flight_input(1000, surplus((R5, 1), (C5, 4)),
                                                {C5: 4, R5: 1}))
    assert actions == [("CancelHosts", R5, 1), ("CancelHosts", C5, 4)]


def test_no_cancellation_when_cancel_surplus_is_false() -> None:
    actions, after = decide(in_flight_input(1000, surplus((C5, 2)), {C5: 2}),
                            PolicyMemory(), NO_CANCEL, CATALOG)
    assert actions == []
    assert after == PolicyMemory()


def test_no_cancellation_for_a_surplus_of_zero() -> None:
    actions, _ = round_(CANCEL, in_flight_input(1000, surplus((C5, 0), (R5, 0)), {C5: 2}))
    assert actions == []


def test_a_cancellation_beside_a_request_for_another_template() -> None:
    """aws.r5's in-flight host is not needed (the demand moved to aws.c5): it is
    cancelled and aws.c5 hosts are requested, in one round; only the request starts
    the scale-down delay."""
    wanted = [HostDemand(C5, 1, 0, [7])]
    actions, after = round_(DELAY, in_flight_input(1000, surplus((R5, 1), hosts=wanted),
                                                   {R5: 1}))
    assert actions == [("RequestHosts", C5, 1, (7,)), ("CancelHosts", R5, 1)]
    assert after.added_at == {C5: 1000}


def test_quiet_memory_is_none_while_there_is_surplus_to_cancel() -> None:
    memory = PolicyMemory()
    demand_ = surplus((C5, 1))
    assert quiet_memory(demand_, Idle(), memory, CANCEL, {C5: 1}, {}, []) is None, (
        "decide would cancel: the round may not be skipped")
    assert decide(in_flight_input(1000, demand_, {C5: 1}), memory, CANCEL, CATALOG)[0]
    # cancel_surplus false: nothing to do, and quiet_memory says so as decide does
    quiet = quiet_memory(demand_, Idle(), memory, NO_CANCEL, {C5: 1}, {}, [])
    assert quiet is memory
    assert decide(in_flight_input(1000, demand_, {C5: 1}), memory, NO_CANCEL, CATALOG) == (
        [], quiet)
    # a surplus of 0 is no surplus
    assert quiet_memory(surplus((C5, 0)), Idle(), memory, CANCEL, {C5: 1}, {}, []) is memory


def test_min_hosts_top_ups_in_flight_are_not_cancelled() -> None:
    config = PolicyConfig(persistence=0, max_lifetime=0, min_hosts={C5: 2})
    actions, memory = round_(config, in_flight_input(1000, Demand(), {}))
    assert actions == [("RequestHosts", C5, 2, ())]
    actions, _ = round_(config, in_flight_input(1010, surplus((C5, 2)), {C5: 2}), memory)
    assert actions == [], "the minimum is what they are for: kept"
