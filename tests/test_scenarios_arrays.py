"""Scenario specifications of job arrays (issue 21 part 2; docs/cli.md, docs/scheduling.md
"Dependencies and job arrays").

An array's elements are jobs alike: its pending elements are twins in one bucket. Its
`%N` limit lets at most N elements run at once: the elements beyond it pend with their
own reason, in no bucket, and never count in demand.
"""

from __future__ import annotations

import textwrap

import pytest

from xce.config import ConfigError
from xce.model.events import JobFinished, JobHeld, JobKilled, JobRequeued, JobStarted
from xce.model.result import SessionResult
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session

REACHED = "The job array has reached its limit of {} running elements"
TAKEN = "The job array's limit of {} running elements is taken by earlier elements"


def state_of(text: str) -> tuple[SchedulerState, float]:
    scenario = load_scenario_text(textwrap.dedent(text), "scenario.yaml")
    return scenario.state(), scenario.now


def reasons(result: SessionResult) -> dict[int, str]:
    return {job: group.reason for group in result.pending for job in group.jobs}


def start(state: SchedulerState, result: SessionResult, now: float) -> list[int]:
    for d in result.dispatch:
        state.apply(JobStarted(d.job, d.hosts, now))
    return [d.job for d in result.dispatch]


def test_an_array_is_its_elements_ids_array_plus_index_alike_in_one_bucket(session):
    s = session("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 4}]}
        jobs:
          - {id: 100, name: sweep, array: "1-6,10"}
    """)
    assert s.dispatch_order == [101, 102, 103, 104], "in index order, as alike jobs"
    slots = "Not enough job slots: 1 needed, 0 free on eligible hosts"
    assert s.reasons == {105: slots, 106: slots, 110: slots}
    assert len(s.result.trace_of(105)) == 1 and s.result.trace_of(105) == s.result.trace_of(
        110
    ), "twins: the elements after the first that failed share its evaluation"


def test_the_limit_lets_at_most_n_elements_run_and_one_more_as_each_ends():
    state, now = state_of("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 16}]}
        jobs:
          - {id: 100, array: "1-20%5"}
          - {id: 200}
    """)
    result = run_session(state, now)
    assert [d.job for d in result.dispatch] == [101, 102, 103, 104, 105, 200], (
        "five elements, and the job after the array, which the limit does not hold back"
    )
    assert reasons(result) == dict.fromkeys(range(106, 121), TAKEN.format(5)), (
        "the first five elements hold the limit while they are dispatched"
    )
    start(state, result, now)
    result = run_session(state, now + 1)
    assert result.dispatch == [] and reasons(result) == dict.fromkeys(
        range(106, 121), REACHED.format(5)
    )
    state.apply(JobFinished(102, now + 5))
    state.apply(JobKilled(104, now + 5))
    result = run_session(state, now + 6)
    assert [d.job for d in result.dispatch] == [106, 107], "two ended: two more may run"


def test_elements_held_at_the_limit_create_no_demand_even_where_a_template_could_hold_them(
    session,
):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 2, max: 100}
        jobs:
          - {id: 100, array: "1-1000%3"}
    """)
    assert s.demand["hosts"] == [
        {"template": "t", "count": 2, "in_flight_used": 0, "jobs": [101, 102, 103]}
    ], "three elements may run at once: two 2-slot hosts for them, none for the other 997"
    assert s.reasons[104] == TAKEN.format(3) and len(s.reasons) == 1000


def test_an_element_held_requeued_or_killed_while_pending_makes_room():
    state, now = state_of("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 2}, {name: n02, slots: 8}]}
        jobs:
          - {id: 100, array: "1-10%3"}
    """)
    assert sorted(state.pending) == [101, 102, 103]
    state.apply(JobHeld(102))
    assert sorted(state.pending) == [101, 103, 104], "held: the next element takes its room"
    state.apply(JobHeld(102, False))
    assert sorted(state.pending) == [101, 103, 104] and 102 in state.waiting, (
        "released, it waits for room like the others (earliest first when room comes)"
    )
    result = run_session(state, now)
    assert start(state, result, now) == [101, 103, 104]
    state.apply(JobRequeued(103, now + 1))
    assert sorted(state.pending) == [103], "requeued, it is pending again within the limit"
    state.apply(JobKilled(103, now + 2))
    assert sorted(state.pending) == [102], "killed: the earliest waiting element comes in"


def test_an_array_waits_for_its_condition_then_runs_within_its_limit():
    state, now = state_of("""
        now: 0
        cluster: {hosts: [{name: n01, slots: 16}]}
        jobs:
          - {id: 1, name: prep, state: RUN, hosts: {n01: 1}}
          - {id: 100, name: sweep, array: "1-8%2", depend: "done(prep)"}
          - {id: 200, name: post, array: "1-8", depend: "done(sweep[*])"}
          - {id: 300, depend: "ended(sweep) && done(post[1-4])"}
    """)
    result = run_session(state, now)
    assert result.dispatch == []
    assert reasons(result) == {
        **dict.fromkeys(range(101, 109), "Dependency condition not satisfied: done(prep)"),
        **dict.fromkeys(range(201, 209), "Dependency condition not satisfied: done(sweep[*])"),
        300: "Dependency condition not satisfied: ended(sweep)",
    }, "the array's limit is not reached by elements that wait for their condition"
    state.apply(JobFinished(1, 10))
    result = run_session(state, 10)
    assert start(state, result, 10) == [101, 102]
    state.apply(JobFinished(101, 20))
    result = run_session(state, 20)
    assert start(state, result, 20) == [103, 201], (
        "element 1 of post runs once element 1 of sweep is done (one to one)"
    )


@pytest.mark.parametrize(("entry", "message"), [
    ('{id: 100, array: "1-2001"}',
     "scenario.yaml:5: jobs[0]: job array 100: index 2001 exceeds max_job_array_size 2000"),
    ('{id: 100, array: "1-5%0"}', "scenario.yaml:5: jobs[0].array: job array error at "
     "column 5: the limit of elements running at once must be at least 1"),
    ('{ids: "1-3", array: "1-5"}', "scenario.yaml:5: jobs[0].array: an array entry gives "
     "the array's id (id), not ids"),
])
def test_array_entries_beyond_the_cluster_size_or_malformed_are_refused(entry, message):
    text = f"""\
now: 0
cluster: {{hosts: [{{name: n01, slots: 8}}], max_job_array_size: 2000}}
jobs:
  - {{id: 1}}
  - {entry}
""".replace("jobs[0]", "jobs[1]")
    with pytest.raises(ConfigError) as caught:
        load_scenario_text(text, "scenario.yaml")
    assert str(caught.value) == message.replace("jobs[0]", "jobs[1]")


def test_an_array_id_is_no_job_s_and_elements_cannot_reuse_ids():
    text = """\
now: 0
cluster: {hosts: [{name: n01, slots: 8}]}
jobs:
  - {id: 100, array: "1-3"}
  - {id: 102}
"""
    with pytest.raises(ConfigError, match=r"scenario.yaml:5: jobs\[1\]: job 102 already exists"):
        load_scenario_text(text, "scenario.yaml")
    with pytest.raises(ConfigError, match="job 100 already exists"):
        load_scenario_text(text.replace("{id: 102}", "{id: 100}"), "scenario.yaml")


def test_an_element_whose_condition_a_start_of_the_same_session_ends_keeps_its_place():
    state, now = state_of("""
        now: 0
        cluster: {hosts: [{name: n01, slots: 8}]}
        jobs:
          - {id: 10, array: "1-3%2"}
          - {id: 20, array: "1-3%2", depend: "!started(10[*])"}
    """)
    result = run_session(state, now)
    assert start(state, result, now) == [11, 12, 21, 22], (
        "the session saw every condition hold: its dispatches start together, even "
        "those whose condition a start of the same session ends (!started(10[1]))"
    )
    assert 23 in state.waiting, (
        "element 3 of array 20 stays out: elements 1 and 2 keep the limit of 2 while "
        "their conditions, ended by the starts before theirs, took them out of the queue"
    )
    result = run_session(state, 10)
    assert result.dispatch == [] and reasons(result)[23] == REACHED.format(2)
    state.apply(JobFinished(21, 20))
    result = run_session(state, 20)
    assert [d.job for d in result.dispatch] == [23], "never more than 2 elements of 20"
    record = state.waits.arrays[20]
    assert (record.running, record.queued, record.reserved) == (1, 1, set())
