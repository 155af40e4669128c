"""Scenario specifications of job dependencies (`-w`, issue 21 part 3; docs/cli.md,
docs/scheduling.md "Dependencies and job arrays").

A job whose condition does not hold pends with `Dependency condition not satisfied:
<the part that does not hold>`, is in no bucket, never reaches the catalog pass and
never counts in demand; one whose condition can never hold pends with `Dependency
condition can never be satisfied` (and is ended with `-ti`, or after the cluster's
`orphan_job_term_timeout`).
"""

from __future__ import annotations

import textwrap

import pytest

from xce.config import ConfigError
from xce.model.events import JobFinished, JobHeld, JobKilled, JobRequeued, JobStarted
from xce.model.jobs import JobSpec
from xce.model.result import SessionResult
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session
from xce.sched.ended import CLEAN_PERIOD
from xce.sched.state import SubmitError

NEVER = "Dependency condition can never be satisfied"
HELD = "The job was suspended by the user while pending"


def unmet(part: str) -> str:
    return f"Dependency condition not satisfied: {part}"


def state_of(text: str) -> tuple[SchedulerState, float]:
    scenario = load_scenario_text(textwrap.dedent(text), "scenario.yaml")
    return scenario.state(), scenario.now


def reasons(result: SessionResult) -> dict[int, str]:
    return {job: group.reason for group in result.pending for job in group.jobs}


def drive(state: SchedulerState, now: float, exits: dict[int, int],
          run: float = 10.0) -> list[list[int]]:
    """Sessions until nothing more starts: each session's dispatches start at once and
    end `run` s later with their exit code in `exits` (default 0). The dispatches of
    each session, in order."""
    waves: list[list[int]] = []
    while True:
        result = run_session(state, now)
        started = [d.job for d in result.dispatch]
        if not started:
            return waves
        waves.append(started)
        for d in result.dispatch:
            state.apply(JobStarted(d.job, d.hosts, now))
        now += run
        for job in started:
            state.apply(JobFinished(job, now, exit_code=exits.get(job, 0)))


# --------------------------------------------------------------------------- demand


def test_a_job_waiting_for_its_condition_creates_no_demand_even_where_a_template_could_hold_it(
    session,
):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        jobs:
          - {id: 1, n: 4}
          - {id: 2, n: 4, depend: "done(1)"}
          - {ids: "3-5", n: 4, depend: "ended(1) || started(1)"}
    """)
    assert s.demand["hosts"] == [
        {"template": "t", "count": 1, "in_flight_used": 0, "jobs": [1]}
    ], "only job 1 may run now: one new 4-slot host for it, none for the jobs waiting on it"
    assert s.reasons == {
        1: "Waiting for provisioning: fits on template t (1 new host requested this session)",
        2: unmet("done(1)"),
        **dict.fromkeys(range(3, 6), unmet("ended(1) || started(1)")),
    }
    assert [e.check for e in s.trace(2)] == ["dependency"], (
        "a dependent is not evaluated against any host or template: its only trace "
        "entry is its condition"
    )


# --------------------------------------------------------------------------- conditions


def test_conditions_on_jobs_that_ended_before_the_dependent(session):
    s = session("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 16}]}
        jobs:
          - {id: 10, state: DONE, end: 500}
          - {id: 11, state: EXIT, exit: 3, end: 600}
          - {id: 20, depend: "done(10)"}
          - {id: 21, depend: "done(11)"}
          - {id: 22, depend: "exit(11)"}
          - {id: 23, depend: "exit(11, 3)"}
          - {id: 24, depend: "exit(11, >3)"}
          - {id: 25, depend: "exit(10)"}
          - {id: 26, depend: "ended(10) && ended(11)"}
          - {id: 27, depend: "started(11)"}
          - {id: 28, depend: "post_done(11)"}
          - {id: 29, depend: "post_err(10)"}
          - {id: 30, depend: "!done(11)"}
          - {id: 31, depend: "!ended(10)"}
          - {id: 32, depend: "10 && exit(11, !=0)"}
    """)
    assert s.dispatch_order == [20, 22, 23, 26, 27, 28, 30, 32], (
        "done(DONE), exit(EXIT) with its code passing, ended() and started() of ended "
        "jobs, post_done() of an ended job (XCE has no post-execution: it is done at "
        "once), a bare id (done), and the negation of what can never hold"
    )
    assert s.reasons == dict.fromkeys([21, 24, 25, 29, 31], NEVER), (
        "done() of an EXIT job, exit() of a DONE job or with a code that does not pass, "
        "post_err() of an ended job and the negation of what holds for good never hold"
    )


def test_the_pend_reason_quotes_the_first_part_that_does_not_hold(session):
    s = session("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 1}]}
        jobs:
          - {id: 12, state: DONE}
          - {id: 13, state: RUN, hosts: {n01: 1}, start: 900}
          - {id: 14, hold: true}
          - {id: 20, depend: "done(12) && (exit(13) || ended(14))"}
          - {id: 21, depend: "(exit(13) || ended(14)) && done(12)"}
          - {id: 22, depend: "done(13) && done(14)"}
          - {id: 23, depend: "!started(13)"}
    """)
    assert s.reasons == {
        14: HELD,
        20: unmet("exit(13) || ended(14)"),
        21: unmet("exit(13) || ended(14)"),
        22: unmet("done(13)"),
        23: unmet("!started(13)"),
    }


def test_a_chain_starts_in_order_as_the_jobs_it_names_end():
    state, now = state_of("""
        now: 0
        cluster: {hosts: [{name: n01, slots: 8}]}
        jobs:
          - {id: 1, name: first}
          - {id: 2, depend: "done(first)"}
          - {id: 3, depend: "done(2)"}
          - {id: 4, depend: "exit(3)"}
          - {id: 5, depend: "ended(3) && done(1)"}
          - {id: 6, depend: "exit(2, 7) || done(5)"}
    """)
    assert drive(state, now, {}) == [[1], [2], [3], [5], [6]], (
        "each job starts in the session after the one it names ended"
    )
    result = run_session(state, 100)
    assert reasons(result) == {4: NEVER}, "exit(3) never holds once job 3 is DONE"


def test_names_are_the_users_own_most_recent_job_of_that_name(session):
    s = session("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 8}]}
        jobs:
          - {id: 1, user: alice, name: prep, state: DONE}
          - {id: 2, user: alice, name: prep, state: EXIT}
          - {id: 3, user: bob, name: prep, state: DONE}
          - {id: 4, user: alice, name: step1, state: DONE}
          - {id: 5, user: alice, name: step2, hold: true}
          - {id: 10, user: alice, depend: "done(prep)"}
          - {id: 11, user: bob, depend: "done(prep)"}
          - {id: 12, user: alice, depend: "done(step*)"}
          - {id: 13, user: alice, depend: "done(step1) && exit(prep)"}
          - {id: 14, user: alice, depend: 'done("step1")'}
    """)
    assert s.dispatch_order == [11, 13, 14], (
        "bob's prep is his own DONE job; alice's most recent prep (job 2) exited"
    )
    assert s.reasons == {5: HELD, 10: NEVER, 12: unmet("done(step*)")}, (
        "a wildcard names the most recent job of each matching name: step1 is done, "
        "step2 is not"
    )


def test_a_killed_pending_job_has_exited_without_an_exit_code(session):
    s = session(
        """
        now: 1000
        cluster: {hosts: [{name: n01, slots: 8}]}
        jobs:
          - {id: 1, hold: true}
          - {id: 2, depend: "exit(1)"}
          - {id: 3, depend: "exit(1, ==0)"}
          - {id: 4, depend: "started(1)"}
          - {id: 5, depend: "done(1)"}
        """,
        [JobKilled(1, 500)],
    )
    assert s.dispatch_order == [2, 4], "killed while pending: EXIT, and started() holds"
    assert s.reasons == {3: NEVER, 5: NEVER}, "no exit code to compare, never DONE"


def test_a_condition_that_stops_holding_takes_its_job_out_of_the_queue_again():
    state, now = state_of("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 2}]}
        jobs:
          - {id: 5, n: 2, state: RUN, hosts: {n01: 2}, start: 900}
          - {id: 6, depend: "started(5)"}
          - {id: 7, depend: "!done(5)"}
    """)
    result = run_session(state, now)
    assert reasons(result) == {
        6: "Not enough job slots: 1 needed, 0 free on eligible hosts",
        7: "Not enough job slots: 1 needed, 0 free on eligible hosts",
    }, "both conditions hold while job 5 runs: the jobs wait for slots"
    state.apply(JobRequeued(5, 950))
    result = run_session(state, now)
    assert [d.job for d in result.dispatch] == [5]
    assert reasons(result) == {
        6: unmet("started(5)"),
        7: "Not enough job slots: 1 needed, 0 free on eligible hosts",
    }, (
        "job 5 requeued has not started any more: job 6 waits again, never before "
        "its condition holds; job 7 still may run but job 5 took the slots"
    )
    state.apply(JobStarted(5, {"n01": 2}, now))
    state.apply(JobFinished(5, now + 10))
    result = run_session(state, now + 10)
    assert [d.job for d in result.dispatch] == [6]
    assert reasons(result) == {7: NEVER}, "!done(5) never holds again once 5 is DONE"


def test_a_held_dependent_stays_held_whatever_its_condition(session):
    s = session("""
        now: 1000
        cluster: {hosts: [{name: n01, slots: 8}]}
        jobs:
          - {id: 1, state: DONE}
          - {id: 4}
          - {id: 2, depend: "done(1)", hold: true}
          - {id: 3, depend: "done(4)", hold: true}
    """, [JobHeld(2, False), JobHeld(3, False)])
    assert s.dispatch_order == [2, 4], "released, job 2's condition holds; job 3's not yet"
    assert s.reasons == {3: unmet("done(4)")}


# --------------------------------------------------------------------------- orphans


def test_a_condition_that_can_never_hold_ends_its_job_with_ti_or_after_the_timeout():
    text = """
        now: 1000
        cluster:
          hosts: [{name: n01, slots: 8}]
          orphan_job_term_timeout: 300
        jobs:
          - {id: 1, state: EXIT, exit: 1, end: 800}
          - {id: 5, hold: true}
          - {id: 2, depend: "done(1)", end_orphan: true, submit: 900}
          - {id: 3, depend: "done(1)", submit: 900}
          - {id: 4, depend: "done(5)", submit: 900}
    """
    state, now = state_of(text)
    result = run_session(state, now)
    assert result.orphans == [2], "-ti: ended at once"
    assert result.next_due == 1200, "job 3 is an orphan since its submission at 900"
    assert run_session(state, 1200).orphans == [2, 3]
    state.apply(JobFinished(2, 1200, exit_code=-1, reason="dependency condition can never "
                            "be satisfied"))
    state.apply(JobKilled(5, 1300))
    result = run_session(state, 1300)
    assert result.orphans == [3], "job 4 is an orphan since job 5 was killed, at 1300"
    assert result.next_due == 1600
    without = textwrap.dedent(text).replace("  orphan_job_term_timeout: 300\n", "")
    state, now = state_of(without)
    result = run_session(state, 5000)
    assert (result.orphans, result.next_due) == ([2], float("inf")), (
        "without the cluster setting only -ti ends an orphan"
    )


# --------------------------------------------------------------------------- checks


@pytest.mark.parametrize(("job", "message"), [
    ('{id: 2, depend: "done(99)"}', "dependency error at column 6: job 99 is not found"),
    ('{id: 2, depend: "done(1[2])"}', "dependency error at column 6: job 1 is not a job array"),
    ('{id: 2, depend: "done(1) && ended(100[9])"}',
     "dependency error at column 18: job array 100 has no element 9"),
    ('{id: 2, depend: "done(x*)"}',
     "dependency error at column 6: no job of nobody has a name starting with 'x'"),
    ('{id: 2, user: carol, depend: "done(arr)"}',
     "dependency error at column 6: no job of carol is named 'arr'"),
    ('{id: 200, array: "1-3", name: own, depend: "ended(own)"}',
     "dependency error at column 7: a job array cannot depend on its own elements"),
    ('{id: 200, array: "1-3", depend: "ended(100) && done(200[1])"}',
     "dependency error at column 20: a job array cannot depend on its own elements"),
    ('{id: 2, depend: "done(100[*])"}',
     "dependency error at column 6: [*] names the element of the dependent's own index: "
     "only the elements of a job array may use it"),
    ('{id: 2, depend: "done(1"}',
     "dependency error at column 7: expected ')' to close done(, not end of input"),
])
def test_a_condition_naming_what_is_not_there_is_refused_at_its_line_and_column(job, message):
    text = f"""\
now: 0
cluster: {{hosts: [{{name: n01, slots: 8}}]}}
jobs:
  - {{id: 1}}
  - {{id: 100, name: arr, array: "1-3"}}
  - {job}
"""
    with pytest.raises(ConfigError) as caught:
        load_scenario_text(text, "scenario.yaml")
    assert str(caught.value) == f"scenario.yaml:6: jobs[2]: {message}"


# --------------------------------------------------------------------------- incremental


def test_only_the_conditions_that_name_a_job_are_indexed_and_the_index_empties():
    state, now = state_of("""
        now: 0
        cluster: {hosts: [{name: n01, slots: 8}]}
        jobs:
          - {id: 1}
          - {id: 2}
          - {id: 100, name: arr, array: "1-3"}
          - {id: 10, depend: "done(1) || started(arr[2-3])"}
          - {id: 11, depend: "done(1)"}
    """)
    watch = state.waits.watch
    assert {job: len(leaves) for job, leaves in watch.items()} == {1: 2, 102: 1, 103: 1}, (
        "job 2 and element 1 are named by no condition: their ends evaluate nothing"
    )
    drive(state, now, {})
    assert not watch and not state.waits.dependencies, (
        "once their dependents started, no condition and no index entry is left"
    )


def test_ended_jobs_are_remembered_an_hour_and_longer_while_a_condition_names_them():
    state = SchedulerState()
    state.apply_all(load_scenario_text(textwrap.dedent("""
        now: 0
        cluster: {hosts: [{name: n01, slots: 1}]}
        jobs:
          - {id: 1}
          - {id: 2}
          - {id: 3, state: RUN, hosts: {n01: 1}}
          - {id: 4, depend: "exit(2) || done(3)"}
    """), "s.yaml").events)
    state.apply(JobKilled(1, 0))
    state.apply(JobKilled(2, 10))
    late = CLEAN_PERIOD + 100
    state.apply(JobFinished(3, late, exit_code=1))
    memory = state.waits.memory.ended
    assert sorted(memory) == [2, 3], "job 1 forgotten after an hour; job 2 is still named"
    with pytest.raises(SubmitError, match="job 1 is not found"):
        state.resolve(JobSpec(id=5, depend="done(1)", submit=late))
    assert reasons(run_session(state, late)) == {}, "job 4 may run: exit(2) holds"
    state.apply(JobStarted(4, {"n01": 1}, late))
    assert sorted(memory) == [3], "no condition names job 2 any more: forgotten too"
