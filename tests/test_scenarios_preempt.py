"""Scenario specifications of preemption (docs/scheduling.md, "Preemption"): which
running jobs a pending job of a preempting queue takes slots from, what each action
does to the state, the delay, non-preemptable queues, preempt-or-buy, and the
simulator carrying preemptions out. Every expectation is worked out by hand.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import run_scenario
from test_sim import cluster, log_of, simulate, workload

from xce.config import ConfigError, load_config_text
from xce.model.events import (
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobKilled,
    JobPreempted,
    JobRequeued,
    JobResumed,
    JobStarted,
    JobSubmitted,
)
from xce.model.jobs import JobSpec
from xce.model.recording import Recorder, read_recording
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session
from xce.sched.errors import SchedulerInputError

# h1 and h2, 4 slots each, all busy with jobs of `low` (priority 10) and `batch`
# (priority 20); `urgent` (70) preempts both.
BUSY = """
    now: 1000
    cluster:
      hosts:
        - {{name: h1, slots: 4}}
        - {{name: h2, slots: 4}}
      queues:
        - {{name: low, priority: 10{low}}}
        - {{name: batch, priority: 20}}
        - {{name: urgent, priority: 70, preempt: [low, batch]{urgent}}}
    jobs:
      - {{id: 1, queue: low, n: 2, state: RUN, hosts: {{h1: 2}}, start: 0}}
      - {{id: 2, queue: low, n: 2, state: RUN, hosts: {{h1: 2}}, start: 100}}
      - {{id: 3, queue: batch, n: 2, state: RUN, hosts: {{h2: 2}}, start: 200}}
      - {{id: 4, queue: batch, n: 2, state: RUN, hosts: {{h2: 2}}, start: 300, priority: 5}}
{pending}
"""


def busy(pending: str, low: str = "", urgent: str = "") -> str:
    return BUSY.format(pending=textwrap.indent(textwrap.dedent(pending), "      "),
                       low=low, urgent=urgent)


def preemptions(json: dict) -> list[tuple[int, int, str]]:
    return [(p["job"], p["by"], p["action"]) for p in json.get("preemptions", [])]


def test_victims_lowest_queue_priority_first_then_the_most_recently_started():
    s = run_scenario(busy("""
        - {id: 10, queue: urgent, n: 2, submit: 900}
        - {id: 11, queue: urgent, n: 2, submit: 901}
        - {id: 12, queue: urgent, n: 2, submit: 902}
    """))
    assert preemptions(s.json) == [
        (2, 10, "requeue"),  # low before batch; of low, job 2 started last (100 > 0)
        (1, 11, "requeue"),
        (3, 12, "requeue"),  # of batch, job 3 has the lower job priority (0 < 5)
    ]
    assert s.dispatched == {}, "the victims still hold their slots: nothing starts now"
    assert s.reasons == {
        10: "Preempting job(s) 2 (requeue)",
        11: "Preempting job(s) 1 (requeue)",
        12: "Preempting job(s) 3 (requeue)",
    }


def test_victims_are_added_until_the_job_fits():
    # A 3-slot job on one host: job 2 (low, started last) frees 2 of h1's 4, job 1
    # the other 2: both are needed. A 2-slot job: job 2 alone.
    s = run_scenario(busy("""
        - {id: 10, queue: urgent, n: 3, res: "span[hosts=1]", submit: 900}
    """))
    assert preemptions(s.json) == [(2, 10, "requeue"), (1, 10, "requeue")]
    s = run_scenario(busy("- {id: 10, queue: urgent, n: 2, submit: 900}"))
    assert preemptions(s.json) == [(2, 10, "requeue")]


def test_a_victim_taken_first_but_not_needed_after_all_keeps_running():
    # h1: job 5 (normal, not preemptable by urgent) and job 1 (low, 1 slot, started
    # last: the first victim); h2: job 2 (low, 2 slots). A 2-slot job on one host:
    # job 1 frees one slot of h1 (not enough), job 2 frees h2 (fits); without job 1
    # it still fits on h2, so job 1 keeps running.
    text = """
        now: 1000
        cluster:
          hosts: [{name: h1, slots: 2}, {name: h2, slots: 2}]
          queues:
            - {name: normal, priority: 30}
            - {name: low, priority: 10}
            - {name: urgent, priority: 70, preempt: [low]}
        jobs:
          - {id: 5, queue: normal, n: 1, state: RUN, hosts: {h1: 1}, start: 0}
          - {id: 1, queue: low, n: 1, state: RUN, hosts: {h1: 1}, start: 500}
          - {id: 2, queue: low, n: 2, state: RUN, hosts: {h2: 2}, start: 100}
          - {id: 10, queue: urgent, n: 2, res: "span[hosts=1]", submit: 900}
    """
    s = run_scenario(text)
    assert preemptions(s.json) == [(2, 10, "requeue")]
    assert [e.detail for e in s.trace(10)] == ["Preempting job(s) 2 (requeue)"]


@pytest.mark.parametrize("action", ["requeue", "suspend", "kill"])
def test_the_preempting_queues_action_is_in_the_result(action):
    s = run_scenario(busy("- {id: 10, queue: urgent, n: 2, submit: 900}",
                          urgent=f", preempt_action: {action}"))
    assert preemptions(s.json) == [(2, 10, action)]
    assert s.reasons == {10: f"Preempting job(s) 2 ({action})"}


def state_of(text: str) -> tuple[SchedulerState, float]:
    scenario = load_scenario_text(textwrap.dedent(text), "scenario.yaml")
    return scenario.state(), scenario.now


def test_suspend_hands_the_slots_over_and_resumes_when_the_preemptor_ends():
    state, now = state_of(busy("- {id: 10, queue: urgent, n: 2, submit: 900}",
                               urgent=", preempt_action: suspend"))
    state.apply(JobPreempted(job=2, by=10, action="suspend", time=now))
    assert 2 in state.running, "a suspended job is still running (stopped)"
    after = run_session(state, now)
    assert [(d.job, d.hosts) for d in after.dispatch] == [(10, {"h1": 2})]
    assert after.preemptions == [] and after.resumes == []
    state.apply(JobStarted(job=10, hosts={"h1": 2}, time=now))
    assert run_session(state, now + 10).resumes == [], "its preemptor still runs"
    state.apply(JobFinished(job=10, time=now + 50))
    again = run_session(state, now + 50)
    assert again.resumes == [2], "its preemptor ended and h1 has its 2 slots free"
    state.apply(JobResumed(job=2, time=now + 50))
    assert state.free_slots[state.host_by_name["h1"].index] == 0


@pytest.mark.parametrize(("host_state", "resumes"), [("closed", [2]), ("unreach", [])])
def test_a_suspended_job_resumes_on_a_drained_host_not_on_an_unreachable_one(
    host_state: str, resumes: list[int],
) -> None:
    """h1 is drained (closed) while job 2 is suspended there: a closed host keeps the
    jobs on it, so job 2 resumes there once its preemptor has ended; h1 cannot go
    meanwhile. An unreachable h1 cannot continue it: it waits."""
    state, now = state_of(busy("- {id: 10, queue: urgent, n: 2, submit: 900}",
                               urgent=", preempt_action: suspend"))
    state.apply(JobPreempted(job=2, by=10, action="suspend", time=now))
    state.apply(JobStarted(job=10, hosts={"h1": 2}, time=now))
    state.apply(HostStateChanged(name="h1", state=host_state, time=now + 10))
    with pytest.raises(SchedulerInputError, match=r"host 'h1' still runs jobs \[1, 2, 10\]"):
        state.apply(HostRemoved(name="h1", time=now + 10))
    state.apply(JobFinished(job=10, time=now + 50))
    assert run_session(state, now + 50).resumes == resumes
    with pytest.raises(SchedulerInputError, match=r"host 'h1' still runs jobs \[1, 2\]"):
        state.apply(HostRemoved(name="h1", time=now + 50))


def test_a_preemption_whose_preemptor_can_no_longer_use_the_slots_is_void():
    """Job 10 suspends job 2 on h1, and h1 is drained before job 10 starts: job 10
    could never start there, and job 2 would wait for it for ever. The next session
    resumes job 2 (on the drained host: it keeps the jobs on it) and job 10 preempts
    again where it can (job 3 on h2, batch, started first of the two there). Found by
    tests/test_properties_elastic_sim.py: a host drained at its max_lifetime in the
    round of the session that preempted."""
    state, now = state_of(busy("- {id: 10, queue: urgent, n: 2, submit: 900}",
                               urgent=", preempt_action: suspend"))
    first = run_session(state, now)
    assert [(p.job, p.by, p.action) for p in first.preemptions] == [(2, 10, "suspend")]
    state.apply(JobPreempted(job=2, by=10, action="suspend", time=now))
    state.apply(HostStateChanged(name="h1", state="closed", time=now))
    again = run_session(state, now + 1)
    assert again.resumes == [2]
    assert [(p.job, p.by, p.action) for p in again.preemptions] == [(3, 10, "suspend")]
    assert again.dispatch == []


def test_a_host_a_suspended_job_leaves_is_idle_from_then_not_from_the_suspension():
    """Job 1 runs on n01 and cloud-1 from 10; urgent job 2 suspends it at 100 (its
    slots handed over: no host lists it as running) and it is killed at 500, still
    suspended. cloud-1 was not idle while job 1 was there: it is idle supply 300 s
    (its idle time) after the kill, at 800, not at 400. Found by
    tests/test_properties_elastic_sim.py (a suspended job requeued with another host
    its provider took back)."""
    config = load_config_text(textwrap.dedent("""
        hosts: [{name: n01, slots: 2}]
        queues:
          - {name: low, priority: 10}
          - {name: urgent, priority: 70, preempt: [low], preempt_action: suspend}
        catalog:
          idle_time: 300
          templates: [{name: cloud, provider: sim, slots: 2, max: 2}]
    """), "cluster.yaml")
    state = SchedulerState(config)
    state.apply(HostAdded(name="cloud-1", slots=2, template="cloud", time=0))
    state.apply(JobSubmitted(job=JobSpec(id=1, queue="low", n=4, submit=0)))
    state.apply(JobStarted(job=1, hosts={"n01": 2, "cloud-1": 2}, time=10))
    state.apply(JobSubmitted(job=JobSpec(id=2, queue="urgent", n=2, submit=100)))
    state.apply(JobPreempted(job=1, by=2, action="suspend", time=100))
    state.apply(JobKilled(job=1, time=500))
    assert [h.host for h in run_session(state, 799).idle.hosts] == []
    assert [h.host for h in run_session(state, 800).idle.hosts] == ["cloud-1"]


def test_a_victim_being_requeued_is_not_preempted_twice_and_its_preemptor_waits():
    state, now = state_of(busy("- {id: 10, queue: urgent, n: 2, submit: 900}"))
    state.apply(JobPreempted(job=2, by=10, action="requeue", time=now))
    s = run_session(state, now + 1)
    assert s.preemptions == [], "the preemptor waits for its victim; no second victim"
    assert s.reason_of(10) == "Waiting for preempted job(s) 2 to stop"
    state.apply(JobRequeued(job=2, time=now + 2, reason="preempted by job 10"))
    s = run_session(state, now + 2)
    assert [(d.job, d.hosts) for d in s.dispatch] == [(10, {"h1": 2})]
    state.apply(JobPreempted(job=1, by=10, action="kill", time=now))
    with pytest.raises(SchedulerInputError, match="job 1 is already being preempted"):
        state.apply(JobPreempted(job=1, by=10, action="kill", time=now))


def test_preempt_delay_protects_a_job_preempted_lately():
    text = busy("- {id: 10, queue: urgent, n: 2, submit: 900}", low=", preempt_delay: 600")
    state, now = state_of(text)
    # job 2 was preempted at 500 and started again at 600 (events of its past)
    state.apply(JobPreempted(job=2, by=99, action="requeue", time=500))
    state.apply(JobRequeued(job=2, time=510))
    state.apply(JobStarted(job=2, hosts={"h1": 2}, time=600))
    s = run_session(state, now)  # 1000 - 500 < 600: job 2 is spared, job 1 goes
    assert [(p.job, p.by) for p in s.preemptions] == [(1, 10)]
    s = run_session(state, 1100)  # 600 s later, job 2 (started last) goes first again
    assert [(p.job, p.by) for p in s.preemptions] == [(2, 10)]


def test_a_non_preemptable_queue_is_never_a_victim():
    text = """
        now: 100
        cluster:
          hosts: [{name: h1, slots: 2}]
          queues:
            - {name: low, priority: 10, preemptable: false}
            - {name: mid, priority: 20}
            - {name: urgent, priority: 70, preempt: [mid]}
        jobs:
          - {id: 1, queue: low, n: 2, state: RUN, hosts: {h1: 2}, start: 90}
          - {id: 10, queue: urgent, n: 1, submit: 95}
    """
    s = run_scenario(text)
    assert preemptions(s.json) == []
    assert s.reasons == {10: "Not enough job slots: 1 needed, 0 free on eligible hosts"}


# ------------------------------------------------------------- preempt or buy

ELASTIC = """
    now: 1000
    cluster:
      {before}
      hosts: [{{name: h1, slots: 2}}]
      queues:
        - {{name: low, priority: 10}}
        - {{name: urgent, priority: 70, preempt: [low]}}
      catalog:
        templates:
          - {{name: aws.c5, provider: aws, slots: 2, max: 5}}
    jobs:
      - {{id: 1, queue: low, n: 2, state: RUN, hosts: {{h1: 2}}, start: 0}}
      - {{id: 10, queue: urgent, n: 2, submit: 900}}
"""


def test_by_default_a_job_a_template_can_host_buys_and_preempts_nothing():
    s = run_scenario(ELASTIC.format(before=""))
    assert preemptions(s.json) == []
    assert s.demand["hosts"] == [
        {"template": "aws.c5", "count": 1, "in_flight_used": 0, "jobs": [10]}
    ]


def test_preempt_before_burst_preempts_and_demands_only_for_the_requeued_victim():
    s = run_scenario(ELASTIC.format(before="preempt_before_burst: true"))
    assert preemptions(s.json) == [(1, 10, "requeue")]
    # Nothing for job 10, which preemption serves; one host for job 1, requeued for it,
    # in this very session (not in the one after its requeue)
    assert s.demand["hosts"] == [
        {"template": "aws.c5", "count": 1, "in_flight_used": 0, "jobs": [1]}
    ], "demand never counts a job preemption serves; its victim's own demand is there"
    assert 1 not in s.reasons, "the victim still runs: it has no pend reason yet"


def test_without_a_template_that_fits_preemption_is_the_fallback():
    text = ELASTIC.format(before="").replace("slots: 2, max: 5", "slots: 1, max: 5")
    s = run_scenario(text.replace("n: 2, submit: 900", "n: 2, res: \"span[hosts=1]\", submit: 900"))
    assert preemptions(s.json) == [(1, 10, "requeue")]
    # Job 10 (span[hosts=1]) fits no 1-slot host; its victim (2 slots, any hosts) fits two
    assert s.demand["hosts"] == [
        {"template": "aws.c5", "count": 2, "in_flight_used": 0, "jobs": [1]}
    ]


@pytest.mark.parametrize(("action", "jobs"), [("requeue", [1]), ("kill", []), ("suspend", [])])
def test_a_victim_being_stopped_keeps_its_own_demand_until_it_pends(action, jobs):
    """The session after the preemption, while the victim stops: a requeued one's demand
    is still there (it does not come and go), a killed or suspended one has none."""
    state, now = state_of(ELASTIC.format(before="preempt_before_burst: true").replace(
        "preempt: [low]", f"preempt: [low], preempt_action: {action}"))
    first = run_session(state, now)
    assert [(p.job, p.by, p.action) for p in first.preemptions] == [(1, 10, action)]
    state.apply(JobPreempted(job=1, by=10, action=action, time=now))
    after = run_session(state, now + 1)
    assert [job for d in after.demand.hosts for job in d.jobs] == jobs
    assert after.reason_of(1) is None
    if action != "requeue":
        return
    state.apply(JobRequeued(job=1, time=now + 2))
    pending = run_session(state, now + 3)
    assert [(d.template, d.count, d.jobs) for d in pending.demand.hosts] == [
        ("aws.c5", 1, [1])
    ], "the same demand once it pends"


# ------------------------------------------------------------- bad input


def error_of(queues: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config_text("hosts: [{name: n01, slots: 4}]\nqueues:\n" + queues, "cluster.yaml")
    return str(caught.value)


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ("  - {name: a, preempt: [a]}\n",
         "cluster.yaml:3: queues[0].preempt[0]: queue 'a' cannot preempt itself"),
        ("  - {name: a, preempt: [b]}\n",
         "cluster.yaml:3: queues[0].preempt[0]: unknown queue 'b'"),
        ("  - {name: a, preempt: [b]}\n  - {name: b, preempt: [c]}\n  - {name: c, preempt: [a]}\n",
         "cluster.yaml:5: queues[2].preempt[0]: preemption cycle: a -> b -> c -> a"),
        ("  - {name: a, preempt: [b]}\n  - {name: b, preemptable: false}\n",
         "cluster.yaml:3: queues[0].preempt[0]: queue 'b' is not preemptable (preemptable: false)"),
        ("  - {name: a, preempt: [b], preempt_action: stop}\n  - {name: b}\n",
         "cluster.yaml:3: queues[0].preempt_action: preempt_action must be requeue, suspend, "
         "kill, got 'stop'"),
        ("  - {name: a, preempt: b}\n  - {name: b}\n",
         "cluster.yaml:3: queues[0].preempt: expected a list, got a string ('b')"),
        ("  - {name: a, preempt_delay: -1}\n",
         "cluster.yaml:3: queues[0].preempt_delay: preempt_delay must be >= 0"),
    ],
)
def test_bad_preemption_is_one_clear_error(queues, message):
    assert error_of(queues) == message


# ------------------------------------------------------------- the simulator


@pytest.mark.parametrize(
    ("action", "ends"),
    [
        # job 1 (low, 2 slots, 100 s) from 0; job 2 (urgent, 20 s) arrives at 10: the
        # session at 10 preempts job 1, the one at 11 starts job 2 (ends 31); then
        ("requeue", {2: 31, 1: 131}),  # job 1 starts again at 31, runs 100 s
        ("suspend", {2: 31, 1: 121}),  # job 1 resumes at 31 with 90 s left
        ("kill", {1: 10, 2: 31}),  # job 1 ends at 10
    ],
)
def test_the_simulator_carries_preemptions_out(tmp_path: Path, action, ends):
    config = cluster(f"""
        session_interval: 1
        hosts: [{{name: h1, slots: 2}}]
        queues:
          - {{name: low, priority: 10}}
          - {{name: urgent, priority: 70, preempt: [low], preempt_action: {action}}}
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, queue: low, n: 2, submit: 0, run: 100}
          - {id: 2, queue: urgent, n: 2, submit: 10, run: 20}
    """)
    recorder = Recorder(tmp_path / "run.jsonl")
    _sim, summary = simulate(config, jobs, recorder=recorder)
    recorder.close()
    found = {
        item.job: item.time for _line, _t, item in read_recording(tmp_path / "run.jsonl")
        if isinstance(item, JobFinished | JobKilled)
    }
    assert found == ends
    assert summary["preemptions"] == {action: 1}
    assert summary["queues"] == {
        "low": {"finished": 1, "wait_mean": 0.0, "wait_max": 0.0},
        "urgent": {"finished": 1, "wait_mean": 1.0, "wait_max": 1.0},
    }
    assert summary["finished"] == 2


@pytest.mark.parametrize(
    ("urgent", "ends", "given_back"),
    [
        # Job 2 starts at 210 and ends at 500, when cloud-2 has been free for its idle
        # time (300 s): the session at 500 resumes job 1 on both hosts.
        ("{id: 2, submit: 200, run: 290, n: 2, queue: urgent}", {2: 500, 1: 1420}, 1720),
        # Job 2 runs from 310 to 1210: cloud-2 is free for 900 s while job 1 waits
        # suspended on it (given back, job 1 could never resume).
        ("{id: 2, submit: 300, run: 900, n: 2, queue: urgent}", {2: 1210, 1: 2030}, 2330),
    ],
)
def test_a_provisioned_host_a_suspended_job_waits_on_is_not_reclaimed(
    tmp_path: Path, urgent: str, ends: dict[int, int], given_back: int
):
    """Job 1 (4 slots, 1000 s) runs on two new 2-slot hosts from 120; urgent job 2
    suspends it and takes cloud-1, so cloud-2's slots are free. A host a suspended job
    is on is not idle supply: job 1 is still there and resumes there when job 2 ends
    (its time run before the suspension counted), and only then, once both hosts have
    been idle for 300 s, are they drained and decommissioned, in one round. (Before,
    cloud-2 was reported idle: drained under the resumed job, or given back while job
    1 waited, which then never resumed.)"""
    config = cluster("""
        session_interval: 10
        preempt_before_burst: true
        hosts: []
        queues:
          - {name: low, priority: 10}
          - {name: urgent, priority: 70, preempt: [low], preempt_action: suspend}
        catalog:
          idle_time: 300
          templates:
            - {name: cloud, provider: sim, slots: 2, max: 2}
        policy: {persistence: 0}
        simulation:
          providers: {sim: {lead_time: 120}}
    """)
    jobs = workload(tmp_path, f"""
        jobs:
          - {{id: 1, submit: 0, run: 1000, n: 4, queue: low}}
          - {urgent}
    """)
    recorder = Recorder(tmp_path / "run.jsonl")
    sim, summary = simulate(config, jobs, recorder=recorder)
    recorder.close()
    items = [item for _line, _t, item in read_recording(tmp_path / "run.jsonl")]
    assert {i.job: i.time for i in items if isinstance(i, JobFinished)} == ends
    assert [(i.job, i.time) for i in items if isinstance(i, JobResumed)] == [(1, ends[2])]
    assert log_of(sim) == [
        (0, "RequestHosts", "cloud", 2),
        (given_back, "DrainHost", "cloud-1", None),
        (given_back, "DecommissionHost", "cloud-1", None),
        (given_back, "DrainHost", "cloud-2", None),
        (given_back, "DecommissionHost", "cloud-2", None),
    ]
    assert summary["host_hours"] == {"cloud": round(2 * (given_back - 120) / 3600, 3)}
    assert summary["preemptions"] == {"suspend": 1} and summary["finished"] == 2


def test_the_preemption_keys_are_read():
    config = load_config_text(
        "queues:\n  - {name: low}\n  - {name: hi, priority: 9, preempt: [low], "
        "preempt_action: kill, preempt_delay: 60}\n", "c.yaml")
    hi = config.queues[1]
    assert (hi.preempt, hi.preempt_action, hi.preemptable, hi.preempt_delay) == (
        ("low",), "kill", True, 60.0
    )


def test_a_rebuilt_state_keeps_the_preemptions_under_way():
    from xce.sched.rebuild import state_events

    state, now = state_of(busy("""
        - {id: 10, queue: urgent, n: 2, submit: 900}
        - {id: 11, queue: urgent, n: 2, submit: 901}
    """))
    state.apply(JobPreempted(job=2, by=10, action="suspend", time=now))
    state.apply(JobPreempted(job=1, by=11, action="kill", time=now))
    rebuilt = SchedulerState()
    rebuilt.apply_all(state_events(state))
    assert rebuilt.preemptions.suspended == {2: (10, now)}
    assert rebuilt.preemptions.stopping == {1: (11, "kill")}
    assert rebuilt.free_slots == state.free_slots
    one, other = run_session(state, now + 1), run_session(rebuilt, now + 1)
    assert [(d.job, d.hosts) for d in one.dispatch] == [(d.job, d.hosts) for d in other.dispatch]
    assert [(d.job, d.hosts) for d in one.dispatch] == [(10, {"h1": 2})]
    assert other.reason_of(11) == "Waiting for preempted job(s) 1 to stop"


def test_the_bundled_example_preempts_as_docs_scheduling_md_says():
    from xce.cli.sched_cmd import example_path
    from xce.scenario import load_scenario

    scenario = load_scenario(example_path("preempt"))
    result = run_session(scenario.state(), scenario.now)
    assert [(p.job, p.by, p.action) for p in result.preemptions] == [
        (2, 10, "requeue"), (3, 11, "requeue"), (4, 11, "requeue")
    ]
    assert result.reason_of(11) == "Preempting job(s) 3 4 (requeue)"


def test_queue_mix_assigns_trace_jobs_by_a_hash_of_their_id(tmp_path: Path):
    config = cluster("""
        hosts: [{name: h1, slots: 1}]
        queues:
          - {name: urgent, priority: 70, preempt: [low]}
          - {name: normal, priority: 30}
          - {name: low, priority: 10}
        simulation: {queue_mix: {urgent: 5, normal: 70, low: 25}}
    """)
    jobs = workload(tmp_path, 'jobs:\n  - {ids: "1-2000", submit: 0, run: 1}\n')
    sim, summary = simulate(config, jobs)
    finished = {queue: row["finished"] for queue, row in summary["queues"].items()}
    assert sum(finished.values()) == 2000
    expected = {"urgent": 0, "normal": 0, "low": 0}
    for job in range(1, 2001):  # the documented rule, written out
        point = (job * 2654435761 % 2**32) / 2**32
        expected["urgent" if point < 0.05 else "normal" if point < 0.05 + 0.7 else "low"] += 1
    assert finished == expected
    assert 0.04 < expected["urgent"] / 2000 < 0.06
    del sim


def test_only_a_job_short_of_capacity_preempts():
    # h1: 3 of 4 slots busy with low jobs; job 8 (normal, not preempting) reserves the
    # whole host for when they end. Job 10 (urgent) fits the free slot now but would
    # delay that reservation, and job 12 asks for hosts nothing matches: freeing
    # slots serves neither, so neither preempts.
    s = run_scenario("""
        now: 1000
        cluster:
          reserve_depth: 1
          hosts: [{name: h1, slots: 4}]
          queues:
            - {name: low, priority: 10}
            - {name: normal, priority: 80}
            - {name: urgent, priority: 70, preempt: [low]}
        jobs:
          - {id: 1, queue: low, n: 2, state: RUN, hosts: {h1: 2}, start: 0, run_limit: 2000}
          - {id: 2, queue: low, n: 1, state: RUN, hosts: {h1: 1}, start: 10, run_limit: 5000}
          - {id: 8, queue: normal, n: 4, submit: 100, run_limit: 100}
          - {id: 10, queue: urgent, n: 1, submit: 200}
          - {id: 12, queue: urgent, n: 1, res: "select[type==ARM]", submit: 300}
    """)
    assert preemptions(s.json) == []
    assert s.reason(10).startswith("Would delay the reservation of job 8"), s.reason(10)
    assert s.reason(12).startswith("No host"), s.reason(12)


def test_queues_l_and_the_api_show_who_preempts_whom():
    from xce.cli.queue_long import queue_long
    from xce.controller.queue_info import queue_infos

    config = load_config_text(
        "hosts:\n  - {name: n01, slots: 4}\n"
        "queues:\n"
        "  - {name: urgent, priority: 70, preempt: [batch, short], preempt_action: suspend,"
        " preemptable: false}\n"
        "  - {name: batch, priority: 20, preempt_delay: 600}\n"
        "  - {name: short, priority: 30}\n",
        "cluster.yaml",
    )
    urgent, batch, _short = queue_infos(config, [], lambda _job: False)
    assert (urgent.preempt, urgent.preempt_action, urgent.preemptable) == (
        ["batch", "short"], "suspend", False
    )
    assert (batch.preempt, batch.preemptable, batch.preempt_delay) == ([], True, 600.0)
    shown = "\n".join(queue_long(urgent))
    assert "SCHEDULING POLICIES:  PREEMPTIVE  NO_PREEMPTABLE\n" in shown, shown
    assert "PREEMPTION:  PREEMPTIVE[batch short] (PREEMPT_ACTION: suspend)\n" in shown, shown
    assert "PREEMPT_DELAY:  10.0 min" in "\n".join(queue_long(batch))
