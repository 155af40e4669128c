"""Hosts requested for a job go to that job (ARCHITECTURE.md 2a, "Elastic";
sched/requested.py): a provisioned host joins with the jobs its request was made for,
and when one of them starts now it takes those hosts before others as free.

The common scenario, at 1000: a static 4-slot host n01, busy; a template `burst` of
4-slot hosts. burst-1 and burst-2 ran jobs that ended a moment ago (idle since 995);
burst-3 and burst-4 have just joined, requested for job 10. Without the rule, the
default preference (most free slots, then name) would put job 10 on burst-1 and
burst-2, and the hosts obtained for it would sit idle until given back unused.

The rule is shown alone here: `catalog.static_first: false`, so hosts as free go by
name. With static hosts first (the default), the hosts that just joined come first for
every job: tests/test_scenarios_static_first.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from xce.config import ConfigError
from xce.config.loader import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.store import SqliteStore
from xce.model.api import RegisterRequest, SubmitRequest
from xce.model.events import HostAdded, HostRemoved, JobKilled, JobStarted
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events

CLUSTER = """
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}]
  queues: [{name: normal, priority: 30}]
  catalog:
    idle_time: 600
    static_first: false
    templates: [{name: burst, provider: cloud, slots: 4, max: 10}]
hosts:
  - {name: burst-1, template: burst, joined: 100, idle_since: 995}
  - {name: burst-2, template: burst, joined: 100, idle_since: 995}
  - {name: burst-3, template: burst, joined: 1000, requested_for: [10]}
  - {name: burst-4, template: burst, joined: 1000, requested_for: [10, 11]}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0}
"""


def scenario(*jobs: str) -> str:
    return CLUSTER + "".join(f"  - {job}\n" for job in jobs)


def test_a_job_starts_on_the_hosts_requested_for_it(session):
    s = session(scenario("{id: 10, n: 8, submit: 10}"))
    assert s.dispatched == {10: {"burst-3": 4, "burst-4": 4}}
    assert [h["host"] for h in s.idle["hosts"]] == [], "burst-1/2 idle 5 s only"


def test_other_jobs_keep_the_default_preference(session):
    s = session(scenario("{id: 9, n: 4, submit: 5}", "{id: 10, n: 8, submit: 10}"))
    assert s.dispatched == {9: {"burst-1": 4}, 10: {"burst-3": 4, "burst-4": 4}}, (
        "job 9 (nothing requested for it) goes by name; job 10 still gets its own"
    )


def test_a_one_slot_job_takes_a_host_requested_for_it(session):
    s = session(scenario("{id: 11, n: 1, submit: 10}", "{id: 12, n: 1, submit: 11}"))
    assert s.dispatched == {11: {"burst-4": 1}, 12: {"burst-1": 1}}, (
        "jobs alike (one bucket): only job 11 had a host requested for it"
    )


def test_more_free_slots_still_come_first(session):
    """The requested hosts break ties: they never outrank a host with more free
    slots (the usual preference comes first)."""
    s = session(scenario(
        "{id: 2, n: 1, state: RUN, hosts: {burst-3: 1}, start: 1000}",
        "{id: 10, n: 4, submit: 10}",
    ))
    assert s.dispatched == {10: {"burst-4": 4}}
    s = session(scenario(
        "{id: 2, n: 1, state: RUN, hosts: {burst-3: 1}, start: 1000}",
        "{id: 3, n: 1, state: RUN, hosts: {burst-4: 1}, start: 1000}",
        "{id: 10, n: 4, submit: 10}",
    ))
    assert s.dispatched == {10: {"burst-1": 4}}, "its hosts have 3 free slots, burst-1 has 4"


def test_a_higher_job_may_take_them(session):
    s = session(scenario("{id: 8, n: 8, submit: 1, priority: 10}",
                         "{id: 10, n: 8, submit: 10}"))
    assert s.dispatched == {8: {"burst-1": 4, "burst-2": 4}, 10: {"burst-3": 4, "burst-4": 4}}
    s = session(scenario("{id: 8, n: 12, submit: 1}", "{id: 10, n: 8, submit: 10}"))
    assert s.dispatched == {8: {"burst-1": 4, "burst-2": 4, "burst-3": 4}}, (
        "job 8 comes first and needs three hosts: it takes one of job 10's"
    )


def test_an_order_clause_comes_before_the_requested_hosts(session):
    s = session(scenario("{id: 10, n: 4, submit: 10, res: 'order[-slots]'}",
                         "{id: 2, n: 2, state: RUN, hosts: {burst-1: 2}, start: 990}"))
    assert s.dispatched == {10: {"burst-1": 2, "burst-3": 2}}, (
        "order[-slots] puts the fullest host first (burst-1, 2 free); among the hosts "
        "with 4 free, the requested burst-3 comes before burst-2 (by name it would not)"
    )


def _state(text: str) -> SchedulerState:
    return load_scenario_text(text, "scenario.yaml").state()


def test_the_state_forgets_a_request_when_its_job_starts_or_its_host_leaves():
    state = _state(scenario("{id: 10, n: 8, submit: 10}", "{id: 11, n: 1, submit: 10}"))
    index = {h.name: h.index for h in state.live_hosts()}
    assert state.requested_for == {10: [index["burst-3"], index["burst-4"]],
                                   11: [index["burst-4"]]}
    state.apply(JobStarted(10, {"burst-3": 4, "burst-4": 4}, 1000))
    assert state.requested_for == {11: [index["burst-4"]]}
    assert state.host_by_name["burst-4"].requested_for == (11,)
    state.apply(JobKilled(10, 1001))
    state.apply(HostRemoved("burst-4", 1002))
    assert state.requested_for == {}
    state.apply(JobKilled(11, 1003))
    assert state.requested_for == {}


def test_a_rebuilt_state_keeps_what_its_hosts_were_requested_for():
    state = _state(scenario("{id: 10, n: 8, submit: 10}"))
    rebuilt = SchedulerState()
    rebuilt.apply_all(state_events(state))
    assert rebuilt.requested_for == state.requested_for
    assert run_session(rebuilt, 1000).dispatch == run_session(state, 1000).dispatch


def test_requested_for_must_list_job_ids():
    bad = CLUSTER.replace("requested_for: [10]", "requested_for: [ten]")
    with pytest.raises(ConfigError) as caught:
        load_scenario_text(bad, "scenario.yaml")
    err = caught.value
    assert (err.file, err.line, err.field, err.message) == (
        "scenario.yaml", 13, "hosts[2].requested_for[0]",
        "expected an integer, got a string ('ten')")


CONFIG = """\
cluster: t
hosts: [{name: n1, slots: 2}]
queues: [{name: normal, priority: 30}]
catalog:
  templates: [{name: c5, provider: aws, slots: 2, max: 4}]
"""
ADMIN = Identity("root", "admin")


def test_a_host_joins_with_the_jobs_its_request_was_for(tmp_path: Path) -> None:
    """Live: the controller's join fact carries the request's first `count` jobs, and
    a restarted controller knows them."""

    async def test() -> None:
        ctl = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"))
        await ctl.start()
        jobs = [(await ctl.submit(ADMIN, SubmitRequest(["true"], n=2)))[0] for _ in range(3)]
        made = await ctl.request_hosts(ADMIN, "c5", "", "r1", 2, 600, jobs)
        name = made[0][0].name
        await ctl.register(name, RegisterRequest(slots=2))
        added = [f.event for f in ctl.store.read() if isinstance(f.event, HostAdded)]
        assert [(e.name, e.requested_for) for e in added] == [(name, tuple(jobs[:2]))]
        await ctl.close()
        ctl.store.close()
        again = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"))
        await again.start()
        assert again.state.host_by_name[name].requested_for == tuple(jobs[:2])
        await again.close()
        again.store.close()

    asyncio.run(test())
