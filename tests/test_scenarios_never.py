"""Jobs a configuration change makes impossible (issue 21, part 6): they pend with
`No host or template can ever run this job` and what is missing, are never tried on
the catalog and make no demand; when the configuration changes back they are
scheduled again. Verdicts are made per bucket when what they read changes, not per
session (sched/ever.py)."""

from __future__ import annotations

import textwrap
from typing import Any

import msgspec

from xce.model.events import (
    ConfigLoaded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobStarted,
    JobSubmitted,
    SupplyChanged,
)
from xce.model.jobs import JobSpec
from xce.model.result import SessionResult
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session
from xce.sched.ever import universe
from xce.sched.reasons import NEVER, NEVER_RUNS

SCENARIO = """
now: 1000
cluster:
  resources:
    mem: {type: numeric, consumable: true}
  hosts:
    - {name: n01, slots: 16, resources: {mem: 64000}}
  queues:
    - {name: normal, priority: 30}
    - {name: local, priority: 20, hosts: [n01]}
  catalog:
    templates:
      - {name: aws.r5, provider: aws, slots: 32, resources: {mem: 250000}, max: 4}
jobs:
  - {id: 1, n: 4, res: "select[mem>200000]", submit: 10}
  - {id: 2, n: 16, submit: 20, state: RUN, hosts: {n01: 16}, start: 0}
  - {id: 3, n: 8, queue: local, res: "span[hosts=1]", submit: 30}
"""
BIG = (
    f"{NEVER_RUNS}: No host or template satisfies select[mem>200000] "
    "(largest mem: 64000 on n01)"
)
WAITING = "Waiting for provisioning: fits on template aws.r5 (1 new host requested this session)"


def _state() -> tuple[SchedulerState, float]:
    scenario = load_scenario_text(textwrap.dedent(SCENARIO), "scenario.yaml")
    return scenario.state(), scenario.now


def _reasons(result: SessionResult) -> dict[int, tuple[str, str]]:
    return {job: (g.reason, g.kind) for g in result.pending for job in g.jobs}


def _demand(result: SessionResult) -> Any:
    return msgspec.to_builtins(result.to_json_obj()["demand"])


def test_an_allowance_of_zero_makes_a_job_impossible_and_lifting_it_schedules_it_again(
) -> None:
    state, now = _state()
    first = run_session(state, now)
    assert _reasons(first)[1] == (WAITING, "provisioning")
    assert [h["template"] for h in _demand(first)["hosts"]] == ["aws.r5"]

    state.apply(SupplyChanged(allowance={"aws.r5": 0}, time=now))  # POST /catalog
    closed = run_session(state, now + 1)
    assert _reasons(closed)[1] == (BIG, NEVER)
    assert _demand(closed) == {"hosts": [], "resources": []}, "it creates no demand"
    assert [(e.stage, e.check) for e in closed.trace_of(1)] == [("real", "never")], (
        "never evaluated on hosts nor tried on the catalog"
    )
    assert _reasons(closed)[3][1] != NEVER, "job 3 (queue local) is merely waiting"

    state.apply(SupplyChanged(allowance={"aws.r5": -1}, time=now + 2))  # lifted
    again = run_session(state, now + 3)
    assert _reasons(again)[1] == (WAITING, "provisioning")
    assert [h["jobs"] for h in _demand(again)["hosts"]] == [[1]]


def test_a_new_configuration_without_the_template_and_back() -> None:
    state, now = _state()
    config = state.config
    without = msgspec.structs.replace(
        config, catalog=msgspec.structs.replace(config.catalog, templates=())
    )
    state.apply(ConfigLoaded(config=without))
    result = run_session(state, now)
    assert _reasons(result)[1] == (BIG, NEVER)
    assert _demand(result) == {"hosts": [], "resources": []}
    assert result.stats.pending == 2, "it is still pending (and job 3)"
    state.apply(ConfigLoaded(config=config))
    back = run_session(state, now + 1)
    assert _reasons(back)[1] == (WAITING, "provisioning")


def test_a_static_host_closed_or_removed_does_not_make_a_job_impossible() -> None:
    state, now = _state()
    state.apply(HostStateChanged(name="n01", state="closed", time=now))
    reason, kind = _reasons(run_session(state, now))[3]
    assert kind == "resource" and not reason.startswith(NEVER_RUNS), (
        "job 3 may use only n01, which is closed: it waits"
    )
    state.apply(JobFinished(job=2, time=now + 1))
    state.apply(HostRemoved(name="n01", time=now + 1))
    reason, kind = _reasons(run_session(state, now + 2))[3]
    assert kind == "resource" and not reason.startswith(NEVER_RUNS), (
        "n01 is configured: its agent may come back"
    )


def test_a_joined_host_can_make_a_job_possible_and_its_leaving_impossible_again() -> None:
    state, now = _state()
    state.apply(SupplyChanged(allowance={"aws.r5": 0}, time=now))
    assert _reasons(run_session(state, now))[1] == (BIG, NEVER)
    state.apply(HostAdded(name="big-1", slots=8, resources={"mem": 300000.0},
                          template="aws.r5", time=now))
    placed = run_session(state, now + 1)
    assert {d.job for d in placed.dispatch} == {1}, "a joined host of the template runs it"
    state.apply(JobStarted(job=1, hosts=placed.dispatch[0].hosts, time=now + 1))
    state.apply(JobFinished(job=1, time=now + 2))
    state.apply(HostRemoved(name="big-1", time=now + 2))
    state.apply(JobSubmitted(JobSpec(id=4, n=1, res="select[mem>200000]", submit=now + 2)))
    assert _reasons(run_session(state, now + 3))[4] == (BIG, NEVER)


def test_verdicts_are_made_per_bucket_when_inputs_change_not_per_session() -> None:
    """The verdicts (one per bucket) are kept while what they read stays the same,
    made again once when it changes. (Observed through the kept verdicts, not by
    patching `judge`: the compiled core calls it directly.)"""
    state, now = _state()
    for step in range(3):
        run_session(state, now + step)
    kept = universe(state).verdicts
    assert len(kept) == 2, "one verdict per bucket (jobs 1 and 3)"
    run_session(state, now + 3)
    assert universe(state).verdicts is kept, "no new verdicts while nothing changed"
    state.apply(SupplyChanged(allowance={"aws.r5": 0}, time=now + 10))
    for step in range(3):
        run_session(state, now + 11 + step)
    again = universe(state).verdicts
    assert again is not kept and len(again) == 2, "the catalog changed: judged once more"
    state.apply(SupplyChanged(in_flight={"aws.r5": 0}, time=now + 20))
    run_session(state, now + 21)
    assert universe(state).verdicts is again, "what they read did not change"
