"""Static hosts first (`catalog.static_first`, default true; sched/labels.py,
docs/scheduling.md "Static hosts first"): among hosts with as many free slots, a
provisioned host idle since it joined comes first, then static hosts, then provisioned
hosts that have run a job, each group by name.

The common scenario, at 1000: static 4-slot hosts n01 and n02, free; a template
`burst` of 4-slot hosts. burst-1 ran jobs, the last ended at 900; burst-2 joined at
950 and has run nothing. By name alone a job would go to burst-1, keeping a host whose
work is done busy while the static hosts idle, and burst-2 would go back unused.
"""

from __future__ import annotations

import pytest

from xce.config import ConfigError
from xce.model.events import JobFinished, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events

CLUSTER = """
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}, {name: n02, slots: 4}]
  queues: [{name: normal, priority: 30}]
  catalog:
    idle_time: 600
    templates: [{name: burst, provider: cloud, slots: 4, max: 10}]
hosts:
  - {name: burst-1, template: burst, joined: 100, idle_since: 900}
  - {name: burst-2, template: burst, joined: 950}
jobs:
"""


def scenario(*jobs: str, by_name: bool = False) -> str:
    text = CLUSTER.replace("idle_time: 600", "idle_time: 600\n    static_first: false") \
        if by_name else CLUSTER
    return text + "".join(f"  - {job}\n" for job in jobs)


FOUR = ("{id: 1, n: 4, submit: 1}", "{id: 2, n: 4, submit: 2}", "{id: 3, n: 4, submit: 3}")


def test_the_host_that_just_joined_then_static_hosts_then_the_one_that_worked(session):
    s = session(scenario(*FOUR))
    assert s.dispatched == {1: {"burst-2": 4}, 2: {"n01": 4}, 3: {"n02": 4}}
    s = session(scenario(*FOUR, "{id: 4, n: 4, submit: 4}"))
    assert s.dispatched[4] == {"burst-1": 4}, "the worked host only when nothing else is free"


def test_static_first_false_goes_by_name_alone(session):
    s = session(scenario(*FOUR, by_name=True))
    assert s.dispatched == {1: {"burst-1": 4}, 2: {"burst-2": 4}, 3: {"n01": 4}}


def test_a_job_spread_over_hosts_takes_them_in_that_order(session):
    s = session(scenario("{id: 1, n: 10, submit: 1}"))
    assert s.dispatched == {1: {"burst-2": 4, "n01": 4, "n02": 2}}


def test_more_free_slots_still_come_first(session):
    """One-slot jobs alike go one per host, most free first: the preference only
    breaks ties between hosts as free."""
    jobs = [f"{{id: {i}, n: 1, submit: {i}}}" for i in range(1, 6)]
    s = session(scenario(*jobs))
    assert s.dispatched == {
        1: {"burst-2": 1}, 2: {"n01": 1}, 3: {"n02": 1}, 4: {"burst-1": 1}, 5: {"burst-2": 1},
    }


def test_a_host_requested_for_a_job_still_goes_to_that_job(session):
    text = scenario("{id: 1, n: 4, submit: 1}").replace(
        "joined: 950}", "joined: 950, requested_for: [1]}"
    ).replace("{name: burst-1, template: burst, joined: 100, idle_since: 900}",
              "{name: burst-1, template: burst, joined: 980}")
    s = session(text)
    assert s.dispatched == {1: {"burst-2": 4}}, "both just joined: its own first"


def _state(text: str) -> SchedulerState:
    return load_scenario_text(text, "scenario.yaml").state()


def test_a_host_that_ran_its_first_job_comes_after_the_static_hosts():
    state = _state(scenario())
    state.apply(JobSubmitted(JobSpec(id=7, user="u", queue="normal", n=4)))
    state.apply(JobStarted(7, {"burst-2": 4}, 1000))
    state.apply(JobFinished(7, 1010))
    state.apply(JobSubmitted(JobSpec(id=8, user="u", queue="normal", n=4)))
    assert run_session(state, 1020).dispatch[0].hosts == {"n01": 4}
    # What a replay of the facts finds: the same labels, the same decision.
    rebuilt = SchedulerState()
    rebuilt.apply_all(state_events(state))
    assert [rebuilt.labels[i] for i in rebuilt.label_order] == [
        state.labels[i] for i in state.label_order
    ]
    assert run_session(rebuilt, 1020).dispatch == run_session(state, 1020).dispatch


def test_static_first_must_be_a_boolean():
    bad = CLUSTER.replace("idle_time: 600", "idle_time: 600\n    static_first: maybe")
    with pytest.raises(ConfigError) as caught:
        load_scenario_text(bad, "scenario.yaml")
    err = caught.value
    assert (err.file, err.line, err.field) == ("scenario.yaml", 8, "cluster.catalog.static_first")
    assert "boolean" in err.message or "true or false" in err.message, err.message


def test_hosts_numbered_in_label_order_are_known_so():
    """`state.indexed_labels` (sched/labels.py): True only while the label order is the
    order of host indices (placements then sort indices, not labels). Here burst-2,
    idle since it joined, comes before every static host; burst-1, which worked,
    after them."""
    static = _state(CLUSTER.split("\nhosts:\n")[0] + "\njobs:\n")
    assert static.indexed_labels and static.label_order == [0, 1]
    state = _state(scenario())
    order = [state.names[i] for i in state.label_order]
    assert order == ["burst-2", "n01", "n02", "burst-1"]
    assert not state.indexed_labels
    assert state.label_order != sorted(state.label_order)
