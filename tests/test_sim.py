"""End-to-end simulator runs on small YAML workloads with exact, hand-worked results,
the shared SWF traces, and `xce sim run` (FORMATS.md "Workloads for the simulator",
"Simulator summary"; docs/scheduling.md for what each session decides).

Timing rules used below: a session runs at the next multiple of `session_interval` at
or after an input changed (a job submitted or finished, a host joined, a policy action
taken), after the inputs of that instant; a timer (idle time, persistence, back-off)
due at T makes a session at T.
"""

from __future__ import annotations

import functools
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from xce.cli.main import main
from xce.config import load_config_text
from xce.model.cluster import ClusterConfig
from xce.model.events import JobFinished, JobRequeued
from xce.model.recording import Recorder, read_recording
from xce.policy import DecommissionHost, DrainHost, RequestHosts, SetAllowance
from xce.sim.driver import Simulator
from xce.sim.jobs import with_memory
from xce.sim.sizing import sized_cluster
from xce.sim.workload import Workload, load_workload, transform

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
TRACE_FILES = sorted(TRACES.glob("*.swf.gz")) if TRACES.is_dir() else []

SUMMARY_KEYS = {
    "jobs", "skipped", "sim_seconds", "wall_seconds", "sessions", "wait_mean", "wait_p50",
    "wait_p95", "bsld_mean", "utilization", "hosts_requested", "hosts_joined",
    "hosts_reclaimed", "host_hours", "hosts_never_used", "tokens_borrowed", "token_hours",
    "wait_max", "wait_p99", "wide_wait_max", "jobs_backfilled", "jobs_killed_at_limit",
}


def cluster(text: str) -> ClusterConfig:
    return load_config_text(textwrap.dedent(text), "cluster.yaml")


def workload(tmp_path: Path, text: str, name: str = "jobs.yaml") -> Workload:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_workload(path)


def simulate(config: ClusterConfig, jobs: Workload, **kwargs: Any) -> tuple[Simulator, dict]:
    sim = Simulator(config, jobs, **kwargs)
    sim.run()
    return sim, sim.summary()


def log_of(sim: Simulator) -> list[tuple[float, str, str, Any]]:
    """(time, action, template or host, count/allowance) of the policy's actions."""
    rows = []
    for t, action in sim.actions_log:
        match action:
            case RequestHosts(template=name, count=count):
                rows.append((t, "RequestHosts", name, count))
            case SetAllowance(template=name, allowance=allowance):
                rows.append((t, "SetAllowance", name, allowance))
            case DrainHost(host=name):
                rows.append((t, "DrainHost", name, None))
            case DecommissionHost(host=name):
                rows.append((t, "DecommissionHost", name, None))
            case _:
                rows.append((t, type(action).__name__, getattr(action, "resource", ""),
                             getattr(action, "amount", None)))
    return rows


# --------------------------------------------------------------------------- static


STATIC = """
    cluster: static
    session_interval: 10
    hosts:
      - {name: "n[01-02]", slots: 4}
    queues: [{name: normal, priority: 30}]
"""


STATIC_JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 100, n: 4}
      - {id: 2, submit: 3, run: 50, n: 4}
      - {id: 3, submit: 5, run: 30, n: 4}
      - {id: 4, submit: 12, run: 20, n: 2}
"""


def test_static_run_exact_waits(tmp_path):
    """2 hosts x 4 slots, sessions at 10 s ticks.

    t=0   job 1 (4 slots, 100 s) submitted; session 0 starts it (wait 0), ends 100.
    t=3   job 2 (4, 50 s); t=5 job 3 (4, 30 s): session 10 starts job 2 on the other
          host (wait 7, ends 60); job 3 pends (no free slot).
    t=12  job 4 (2, 20 s): session 20, nothing free.
    t=60  job 2 ends: session 60 starts job 3 (earlier submit than job 4; wait 55,
          ends 90); job 4 pends.
    t=90  job 3 ends: session 90 starts job 4 (wait 78, ends 110).
    t=100 job 1 ends, t=110 job 4 ends: no job waits, so no session (it could decide
          nothing). 5 sessions; the run ends at 110.
    """
    jobs = workload(tmp_path, STATIC_JOBS)
    sim, summary = simulate(cluster(STATIC), jobs)
    assert sim.metrics.started == {1: 0, 2: 10, 3: 60, 4: 90}
    assert summary["jobs"] == 4
    assert summary["finished"] == 4
    assert summary["skipped"] == 0
    assert summary["too_large"] == 0
    assert summary["sessions"] == 5
    assert summary["sim_seconds"] == 110
    assert summary["wait_mean"] == pytest.approx((0 + 7 + 55 + 78) / 4)
    assert summary["wait_p50"] == 7, "nearest rank: 2nd of [0, 7, 55, 78]"
    assert summary["wait_p95"] == 78
    assert summary["wait_p99"] == 78 and summary["wait_max"] == 78
    assert summary["wide_wait_max"] == 78, "a quarter of 8 slots: every job is wide"
    assert summary["jobs_killed_at_limit"] == 0, "no job has a run limit"
    bslds = [100 / 100, (7 + 50) / 50, (55 + 30) / 30, (78 + 20) / 20]
    assert summary["bsld_mean"] == pytest.approx(sum(bslds) / 4)
    busy = 4 * 100 + 4 * 50 + 4 * 30 + 2 * 20
    assert summary["utilization"] == pytest.approx(busy / (8 * 110))
    assert summary["hosts_requested"] == 0
    assert summary["host_hours"] == {}
    assert summary["tokens_borrowed"] == 0


def test_bounded_slowdown_uses_tau_10_seconds(tmp_path):
    """Short jobs: bsld = max(1, (wait + run) / max(run, 10))."""
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 2, n: 8}
          - {id: 2, submit: 1, run: 5, n: 8}
    """)
    sim, summary = simulate(cluster(STATIC), jobs)
    # job 1: session 0, ends 2; job 2 submitted at 1, session 10 (ticks: the session
    # at 0 already ran, the next is 10), wait 9.
    assert sim.metrics.started == {1: 0, 2: 10}
    assert summary["bsld_mean"] == pytest.approx((1.0 + (9 + 5) / 10) / 2)


def test_job_larger_than_the_machine_is_counted_not_dropped(tmp_path):
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 10, n: 4}
          - {id: 2, submit: 0, run: 10, n: 9}
          - {id: 3, submit: 0, run: 10, n: 8}
    """)
    _, summary = simulate(cluster(STATIC), jobs)
    assert summary["jobs"] == 3
    assert summary["too_large"] == 1, "9 slots on an 8-slot machine"
    assert summary["finished"] == 2


# --------------------------------------------------------------------------- run limits


LIMITED_JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 100, n: 8, run_limit: 60}
      - {id: 2, submit: 0, run: 50, n: 8, run_limit: 80}
"""


def test_a_job_past_its_run_limit_is_ended_there_and_counted(tmp_path):
    """Both jobs take the whole machine (8 slots). Job 1 would run 100 s but its limit
    is 60: it is ended at 60 (reason "run limit reached"), so job 2 starts at the
    session of 60 and runs its 50 s (within its limit of 80) until 110."""
    jobs = workload(tmp_path, LIMITED_JOBS)
    recording = tmp_path / "run.jsonl"
    recorder = Recorder(recording)
    sim, summary = simulate(cluster(STATIC), jobs, recorder=recorder)
    recorder.close()
    assert sim.metrics.started == {1: 0, 2: 60}
    assert summary["jobs_killed_at_limit"] == 1
    assert summary["finished"] == 2
    assert summary["sim_seconds"] == 110
    assert summary["wait_max"] == 60
    assert summary["utilization"] == pytest.approx((8 * 60 + 8 * 50) / (8 * 110))
    ends = [(item.job, item.time, item.reason) for _line, _t, item in read_recording(recording)
            if isinstance(item, JobFinished)]
    assert ends == [(1, 60, "run limit reached"), (2, 110, "")]


def test_without_enforcement_recorded_run_times_are_replayed(tmp_path):
    """`simulation: {enforce_run_limits: false}`: job 1 runs its recorded 100 s."""
    jobs = workload(tmp_path, LIMITED_JOBS)
    config = cluster(STATIC + "    simulation: {enforce_run_limits: false}\n")
    assert not config.simulation.enforce_run_limits
    sim, summary = simulate(config, jobs)
    assert sim.metrics.started == {1: 0, 2: 100}
    assert summary["jobs_killed_at_limit"] == 0
    assert summary["sim_seconds"] == 150


def test_the_queue_run_limit_is_the_default_limit(tmp_path):
    """A job without a limit of its own gets its queue's `run_limit` (effective limit,
    `xce.sched.runlimit.run_limit`); its own limit wins over the queue's."""
    config = cluster("""
        cluster: limits
        session_interval: 10
        hosts:
          - {name: n01, slots: 4}
        queues:
          - {name: normal, priority: 30, run_limit: 40}
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 100, n: 4}
          - {id: 2, submit: 0, run: 100, n: 4, run_limit: 70}
          - {id: 3, submit: 0, run: 30, n: 4}
    """)
    sim, summary = simulate(config, jobs)
    # job 1 ended at 40 (the queue's limit), job 2 at 40 + 70, job 3 ran its 30 s
    assert sim.metrics.started == {1: 0, 2: 40, 3: 110}
    assert summary["jobs_killed_at_limit"] == 2
    assert summary["sim_seconds"] == 140


def test_an_swf_requested_time_is_the_run_limit(tmp_path):
    """SWF field 9 (requested time) is the job's limit: job 1 ran 100 s of 60
    requested and is ended at 60; job 2 (requested -1: none) runs its 50 s."""
    path = tmp_path / "t.swf"
    path.write_text(
        "; MaxProcs: 4\n"
        "1 0 0 100 4 -1 -1 4 60 -1 1 1 1 -1 1 -1 -1 -1\n"
        "2 5 0 50 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1\n"
    )
    jobs = load_workload(path)
    sim, summary = simulate(sized_cluster(jobs), jobs)
    assert sim.metrics.started == {1: 0, 2: 60}
    assert summary["jobs_killed_at_limit"] == 1


# --------------------------------------------------------------------------- waits


def test_longest_waits_and_the_longest_wait_of_wide_jobs(tmp_path):
    """2 hosts x 64 slots (128): wide jobs use at least 32. Jobs 1-100 (1 slot, 10 s)
    start at 0; job 101 (128 slots) waits for them, starts at 10 (wait 10) and runs
    until 110; job 102 (1 slot, submitted at 5) comes after it and starts at 110
    (wait 105). Waits: 100 x 0, 10, 105.

    wait_p99 is the nearest rank ceil(0.99 x 102) = 101st: 10; wait_max 105;
    wide_wait_max 10 (job 102 is not wide)."""
    config = cluster("""
        cluster: wide
        session_interval: 10
        hosts:
          - {name: "n[01-02]", slots: 64}
        queues: [{name: normal, priority: 30}]
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {ids: "1-100", submit: 0, run: 10, n: 1}
          - {id: 101, submit: 0, run: 100, n: 128}
          - {id: 102, submit: 5, run: 10, n: 1}
    """)
    sim, summary = simulate(config, jobs)
    assert sim.metrics.started[101] == 10 and sim.metrics.started[102] == 110
    assert summary["wait_p95"] == 0
    assert summary["wait_p99"] == 10
    assert summary["wait_max"] == 105
    assert summary["wide_wait_max"] == 10
    assert summary["jobs_backfilled"] == 0


def test_wide_jobs_without_static_hosts_are_a_quarter_of_the_catalog(tmp_path):
    """No static hosts: the machine is the most the catalog could provide (4 hosts x 4
    slots): a job of 4 slots or more is wide."""
    config = cluster(ELASTIC.replace("    hosts:\n      - {name: n01, slots: 4}\n", ""))
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 100, n: 2}
          - {id: 2, submit: 0, run: 100, n: 4}
    """)
    sim, summary = simulate(config, jobs)
    assert sim.metrics.wide_slots == 4
    assert sim.metrics.started == {1: 140, 2: 140}, "both on cloud hosts joined at 140"
    assert summary["wide_wait_max"] == 140 and summary["wait_max"] == 140


def test_jobs_backfilled_counts_the_jobs_started_ahead_of_a_reservation(tmp_path):
    """One 4-slot host, sessions every second, EASY (reserve_depth 1, backfill).

    t=0  job 1 (2 slots, limit 100) starts; 2 slots stay free.
    t=1  job 2 (4 slots) cannot start: reserved at 100, when job 1 is planned to end.
    t=2  jobs 3 and 4 (2 slots, limit 50) arrive: job 3 ends by 52 < 100, so it is
         backfilled into the free slots; job 4, its twin, finds them taken.
    t=52 job 3 ends; job 4 (until 102) would delay job 2: it waits.
    t=100 job 1 ends; job 2 starts (wait 99), then job 4 at 200 (wait 198).
    jobs_backfilled counts job 3 once, though later sessions run while it does."""
    config = cluster("""
        cluster: easy
        session_interval: 1
        reserve_depth: 1
        hosts:
          - {name: n01, slots: 4}
        queues: [{name: normal, priority: 30, backfill: true}]
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 100, n: 2, run_limit: 100}
          - {id: 2, submit: 1, run: 100, n: 4, run_limit: 100}
          - {id: 3, submit: 2, run: 50, n: 2, run_limit: 50}
          - {id: 4, submit: 2, run: 50, n: 2, run_limit: 50}
    """)
    sim, summary = simulate(config, jobs)
    assert sim.metrics.started == {1: 0, 2: 100, 3: 2, 4: 200}, (
        "job 3 fills the hole before job 2's reservation; job 4 would delay it"
    )
    assert summary["jobs_backfilled"] == 1


# --------------------------------------------------------------------------- elastic


ELASTIC = """
    cluster: elastic
    session_interval: 10
    hosts:
      - {name: n01, slots: 4}
    queues: [{name: normal, priority: 30}]
    catalog:
      idle_time: 300
      templates:
        - {name: cloud, provider: sim, slots: 4, max: 4}
    policy: {persistence: 20}
    simulation:
      providers: {sim: {lead_time: 120}}
"""

# Job 1 fills n01; jobs 2 and 3 each need a new cloud host.
ELASTIC_JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 1000, n: 4}
      - {ids: "2-3", submit: 0, run: 200, n: 4}
"""


def test_a_template_idle_time_of_zero_reclaims_at_once(tmp_path):
    """The template's own idle time (0 here, the catalog's is 300) decides both what the
    session reports idle and when the simulator wakes for it: jobs 2 and 3 end at 340
    with nothing else waiting, the hosts are due at once: the session at that tick
    (340) drains each and, empty, decommissions it in the same round; they are paid
    for 140..340."""
    jobs = workload(tmp_path, ELASTIC_JOBS)
    config = ELASTIC.replace(
        "- {name: cloud, provider: sim, slots: 4, max: 4}",
        "- {name: cloud, provider: sim, slots: 4, max: 4, idle_time: 0}",
    )
    sim, summary = simulate(cluster(config), jobs)
    assert log_of(sim) == [
        (20, "RequestHosts", "cloud", 2),
        (340, "DrainHost", "cloud-1", None),
        (340, "DecommissionHost", "cloud-1", None),
        (340, "DrainHost", "cloud-2", None),
        (340, "DecommissionHost", "cloud-2", None),
    ]
    assert summary["host_hours"] == {"cloud": round(2 * 200 / 3600, 3)}


def test_a_host_drained_while_busy_is_given_back_when_its_last_job_ends(tmp_path):
    """Maximum lifetime 100 s: the cloud hosts joined at 140 are drained at 240 while
    jobs 2 and 3 still run there. Those end at 340 with nothing waiting: the session
    at that tick gives both hosts back, as the live provisioner would after the next
    session (they do not linger until the next job arrives or, here, the run ends at
    1000 when job 1 does)."""
    jobs = workload(tmp_path, ELASTIC_JOBS)
    config = ELASTIC.replace("policy: {persistence: 20}",
                             "policy: {persistence: 20, max_lifetime: 100}")
    sim, summary = simulate(cluster(config), jobs)
    assert log_of(sim) == [
        (20, "RequestHosts", "cloud", 2),
        (240, "DrainHost", "cloud-1", None),
        (240, "DrainHost", "cloud-2", None),
        (340, "DecommissionHost", "cloud-1", None),
        (340, "DecommissionHost", "cloud-2", None),
    ]
    assert summary["host_hours"] == {"cloud": round(2 * 200 / 3600, 3)}
    assert summary["sim_seconds"] == 1000


def test_elastic_run_requests_joins_runs_and_reclaims(tmp_path):
    """n01 (4 slots) takes job 1 (1000 s); jobs 2 and 3 (4 slots, 200 s) each need a
    new 4-slot cloud host.

    t=0   demand 2 hosts, persisted 0 s < 20 s: nothing requested.
    t=20  (persistence timer) demand persisted 20 s: RequestHosts(cloud, 2).
    t=140 both join (lead time 120); jobs 2 and 3 start there (wait 140), end 340.
    t=640 idle 300 s (idle_time): each drained and, empty, decommissioned in the same
          round.
    t=1000 job 1 ends: the last event. host-hours 2 x (640 - 140) s.
    """
    jobs = workload(tmp_path, ELASTIC_JOBS)
    sim, summary = simulate(cluster(ELASTIC), jobs)
    assert log_of(sim) == [
        (20, "RequestHosts", "cloud", 2),
        (640, "DrainHost", "cloud-1", None),
        (640, "DecommissionHost", "cloud-1", None),
        (640, "DrainHost", "cloud-2", None),
        (640, "DecommissionHost", "cloud-2", None),
    ]
    assert sim.metrics.started == {1: 0, 2: 140, 3: 140}
    assert summary["finished"] == 3
    assert summary["hosts_requested"] == 2
    assert summary["hosts_joined"] == 2
    assert summary["hosts_reclaimed"] == 2
    assert summary["hosts_never_used"] == 0
    assert summary["host_hours"] == {"cloud": round(2 * 500 / 3600, 3)}
    assert summary["wait_mean"] == pytest.approx(280 / 3)
    # The run ends with the workload: job 1 finishing at t=1000.
    assert summary["sim_seconds"] == 1000
    busy = 4 * 1000 + 2 * 4 * 200
    capacity = 4 * 1000 + 2 * 4 * 500
    assert summary["utilization"] == pytest.approx(busy / capacity)


def test_priced_templates_give_cost_per_template_and_in_total(tmp_path):
    """The run of the test above with prices: cloud 0.75 an hour, spare 2.0 (never
    used). `cost` is each template's host-hours times its price (cloud 2 hosts x 500 s
    = 0.278 h, 0.208; spare 0) and `cost_total` their sum; a run without any price
    has neither key (FORMATS.md, "Simulator summary")."""
    jobs = workload(tmp_path, ELASTIC_JOBS)
    priced = ELASTIC.replace(
        "- {name: cloud, provider: sim, slots: 4, max: 4}",
        "- {name: cloud, provider: sim, slots: 4, max: 4, price: 0.75}\n"
        "        - {name: spare, provider: sim, slots: 4, max: 4, rank: 9, price: 2.0}",
    )
    _sim, summary = simulate(cluster(priced), jobs)
    assert summary["host_hours"] == {"cloud": round(2 * 500 / 3600, 3)}
    assert summary["cost"] == {"cloud": round(2 * 500 / 3600 * 0.75, 3)}, (
        "cost per template that had hosts: host-hours x price"
    )
    assert summary["cost_total"] == round(2 * 500 / 3600 * 0.75, 3)
    _sim, unpriced = simulate(cluster(ELASTIC), jobs)
    assert "cost" not in unpriced and "cost_total" not in unpriced, "no price: no cost keys"


def test_reclaimed_hosts_lose_jobs_that_are_requeued_and_still_finish(tmp_path):
    config = cluster("""
        cluster: spot
        session_interval: 10
        queues: [{name: normal, priority: 30}]
        catalog:
          idle_time: 60
          templates:
            - {name: spot, provider: sim, slots: 4, max: 10}
        policy: {persistence: 0}
        simulation:
          seed: 7
          providers: {sim: {lead_time: 30, reclaim_rate: 20}}
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {ids: "1-6", submit: 0, run: 300, n: 4}
    """)
    recording = tmp_path / "spot.jsonl"
    recorder = Recorder(recording)
    _, summary = simulate(config, jobs, recorder=recorder)
    recorder.close()
    requeued = set()
    finished: list[int] = []
    for _line, _t, item in read_recording(recording):
        if isinstance(item, JobRequeued):
            requeued.add(item.job)
        elif isinstance(item, JobFinished):
            finished.append(item.job)
    assert summary["hosts_lost"] >= 1, "reclaim_rate 20/host-hour, 300 s jobs: some loss"
    assert requeued, "jobs on a lost host are requeued"
    assert sorted(finished) == [1, 2, 3, 4, 5, 6], "every job finishes exactly once"
    assert summary["finished"] == 6


def test_provider_capacity_cap_fails_hosts_and_backs_off(tmp_path):
    """Provider capacity 1: of 3 hosts requested at t=0 one is accepted (joins at 50),
    two fail at once (insufficient capacity).

    t=0   RequestHosts(cloud, 3): 1 in flight, 2 failed.
    t=10  the failures: SetAllowance(cloud, 0), back-off 60 s until 70.
    t=50  cloud-1 joins, job 1 starts (a join resets the doubling).
    t=70  back-off over: SetAllowance(cloud, None); t=80 demand 2 hosts: requested,
          both fail (capacity still used by cloud-1); t=90 back-off 60 s (reset by the
          join) until 150.
    t=150 job 1 ends: job 2 starts on cloud-1; back-off over; t=160 demand 1 host:
          requested, fails; t=170 back-off 120 s (doubled) until 290.
    t=250 job 2 ends, job 3 starts on cloud-1; t=290 back-off over; t=350 job 3 ends.
    """
    config = cluster("""
        cluster: cap
        session_interval: 10
        queues: [{name: normal, priority: 30}]
        catalog:
          idle_time: 600
          templates:
            - {name: cloud, provider: sim, slots: 4, max: 3}
        policy: {persistence: 0, backoff: {initial: 60, max: 1800}}
        simulation:
          providers: {sim: {lead_time: 50, capacity: 1}}
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {ids: "1-3", submit: 0, run: 100, n: 4}
    """)
    sim, summary = simulate(config, jobs)
    provisioning = [row for row in log_of(sim) if row[1] in ("RequestHosts", "SetAllowance")]
    assert provisioning == [
        (0, "RequestHosts", "cloud", 3),
        (10, "SetAllowance", "cloud", 0),
        (70, "SetAllowance", "cloud", None),
        (80, "RequestHosts", "cloud", 2),
        (90, "SetAllowance", "cloud", 0),
        (150, "SetAllowance", "cloud", None),
        (160, "RequestHosts", "cloud", 1),
        (170, "SetAllowance", "cloud", 0),
        (290, "SetAllowance", "cloud", None),
    ]
    assert sim.metrics.started == {1: 50, 2: 150, 3: 250}
    assert summary["hosts_requested"] == 6
    assert summary["hosts_failed"] == 5
    assert summary["hosts_joined"] == 1
    assert summary["finished"] == 3


def test_a_host_is_drained_at_its_maximum_lifetime_after_an_older_one_was(tmp_path):
    """Maximum lifetime 500 s: cloud-1 (joined 140) is drained at 640 and cloud-2
    (joined 440) at 940, each while busy, with no other input at either time: the
    policy's timer (`xce.policy.timers.next_due`) counts from the oldest host not yet
    drained. Each is given back when its job ends (2140, 2440).

    t=0   job 1 fills n01 (until 1000); job 2 needs a cloud host: requested at 20
          (persistence), joins at 140, runs until 2140.
    t=300 job 3 likewise: requested at 320, joins at 440, runs until 2440."""
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 1000, n: 4}
          - {id: 2, submit: 0, run: 2000, n: 4}
          - {id: 3, submit: 300, run: 2000, n: 4}
    """)
    config = ELASTIC.replace("policy: {persistence: 20}",
                             "policy: {persistence: 20, max_lifetime: 500}")
    sim, _summary = simulate(cluster(config), jobs)
    assert sim.metrics.started == {1: 0, 2: 140, 3: 440}
    assert log_of(sim) == [
        (20, "RequestHosts", "cloud", 1),
        (320, "RequestHosts", "cloud", 1),
        (640, "DrainHost", "cloud-1", None),
        (940, "DrainHost", "cloud-2", None),
        (2140, "DecommissionHost", "cloud-1", None),
        (2440, "DecommissionHost", "cloud-2", None),
    ]


# --------------------------------------------------------------------------- tokens


TOKENS = """
    cluster: licenses
    session_interval: 10
    resources:
      vcs: {type: numeric, consumable: true, shared: true}
    hosts:
      - {name: n01, slots: 4}
    shared:
      vcs: {total: 1}
    queues: [{name: normal, priority: 30}]
    catalog:
      countables:
        - {resource: vcs, max_borrow: 2, idle_time: 100}
    policy: {persistence: 0}
    simulation:
      countables: {vcs: {grant_delay: 30}}
"""


def check_token_run(sim: Simulator, summary: dict) -> None:
    """Three 1-slot jobs each needing one vcs token, one token in the pool.

    t=0   job 1 takes the only token; jobs 2 and 3 are short 2 (headroom 2):
          RequestTokens(vcs, 2); granted at 30 (grant_delay).
    t=30  jobs 2 and 3 start (wait 30), end 130; job 1 ends at 100.
    t=230 the borrowed 2 have been unallocated for idle_time 100 s: ReturnTokens(vcs, 2).
    token-hours: 2 tokens x (230 - 30) s.
    """
    assert log_of(sim) == [
        (0, "RequestTokens", "vcs", 2),
        (230, "ReturnTokens", "vcs", 2),
    ]
    assert sim.metrics.started == {1: 0, 2: 30, 3: 30}
    assert summary["finished"] == 3
    assert summary["tokens_borrowed"] == 2
    assert summary["token_hours"] == round(2 * 200 / 3600, 3)
    assert summary["wait_mean"] == pytest.approx(20)


def test_token_borrowing_for_license_bound_yaml_jobs(tmp_path):
    """A YAML workload's jobs carry their requirement string (`res`, as in a scenario's
    `jobs:`, FORMATS.md): license-bound jobs wait, tokens are borrowed, jobs start,
    tokens go back after their idle time."""
    jobs = workload(tmp_path, """
        jobs:
          - {ids: "1-3", submit: 0, run: 100, n: 1, res: "rusage[vcs=1]"}
    """)
    sim, summary = simulate(cluster(TOKENS), jobs)
    check_token_run(sim, summary)


def test_token_borrowing_driver_path(tmp_path):
    """Every job of the workload given `rusage[vcs=1]` after reading it: the driver's
    token path on its own, whatever the workload reader accepts."""
    jobs = workload(tmp_path, """
        jobs:
          - {ids: "1-3", submit: 0, run: 100, n: 1}
    """)
    jobs.jobs = [msgspec.structs.replace(job, res="rusage[vcs=1]") for job in jobs.jobs]
    sim = Simulator(cluster(TOKENS), jobs)
    sim.run()
    check_token_run(sim, sim.summary())


# --------------------------------------------------------------------------- seeds


RANDOM = """
    cluster: dice
    session_interval: 10
    hosts:
      - {name: n01, slots: 4}
    queues: [{name: normal, priority: 30}]
    catalog:
      idle_time: 120
      templates:
        - {name: cloud, provider: sim, slots: 4, max: 6}
    policy: {persistence: 0, backoff: {initial: 20, max: 40}}
    simulation:
      seed: 3
      providers:
        sim: {lead_time: {dist: uniform, low: 30, high: 90}, failure_rate: 0.5}
"""

RANDOM_JOBS = """
    jobs:
      - {ids: "1-8", submit: 0, run: 200, n: 4}
      - {ids: "9-14", submit: 400, run: 100, n: 2}
      - {ids: "15-20", submit: 900, run: 50, n: 4}
"""


def test_same_seed_gives_identical_runs(tmp_path):
    jobs = workload(tmp_path, RANDOM_JOBS)
    first, a = simulate(cluster(RANDOM), jobs, seed=11)
    second, b = simulate(cluster(RANDOM), jobs, seed=11)
    a.pop("wall_seconds")
    b.pop("wall_seconds")
    assert a == b
    assert first.actions_log == second.actions_log
    assert first.metrics.started == second.metrics.started


def test_runs_without_pend_reasons_decide_the_same(tmp_path):
    """`xce sim run` leaves pend reasons and the trace out of its sessions: every
    dispatch, action and figure is the same as with them; only the reasons are gone."""
    jobs = workload(tmp_path, RANDOM_JOBS)
    with_reasons, a = simulate(cluster(RANDOM), jobs, seed=5)
    without, b = simulate(cluster(RANDOM), jobs, seed=5, reasons=False)
    a.pop("wall_seconds")
    b.pop("wall_seconds")
    assert a == b
    assert with_reasons.actions_log == without.actions_log
    assert with_reasons.metrics.started == without.metrics.started
    assert with_reasons.metrics.series.columns == without.metrics.series.columns
    last, bare = with_reasons.last_result, without.last_result
    assert last is not None and bare is not None
    assert bare.pending == [] and bare.trace == []
    assert last.dispatch == bare.dispatch and last.demand == bare.demand
    assert a["sessions"] > 10 and a["hosts_requested"]


def test_seed_from_config_is_the_default(tmp_path):
    jobs = workload(tmp_path, RANDOM_JOBS)
    _, a = simulate(cluster(RANDOM), jobs)
    _, b = simulate(cluster(RANDOM), jobs, seed=3)
    a.pop("wall_seconds")
    b.pop("wall_seconds")
    assert a == b


def test_different_seeds_change_only_provider_outcomes(tmp_path):
    jobs = workload(tmp_path, RANDOM_JOBS)
    summaries = [simulate(cluster(RANDOM), jobs, seed=seed)[1] for seed in (1, 2, 3, 4, 5)]
    for summary in summaries:
        assert summary["jobs"] == 20
        assert summary["finished"] == 20, "failures delay jobs, never lose them"
        assert summary["skipped"] == 0
        assert summary["too_large"] == 0
    assert len({s["hosts_failed"] for s in summaries}) > 1, (
        "failure_rate 0.5: the seed decides which requests fail"
    )


# --------------------------------------------------------------------------- traces


@functools.cache
def trace(path: Path) -> Workload:
    return transform(load_workload(path), first=2000)


@pytest.mark.skipif(not TRACE_FILES, reason="no shared traces")
@pytest.mark.parametrize("elastic", [0.0, 0.5], ids=["static", "elastic"])
@pytest.mark.parametrize("path", TRACE_FILES, ids=[p.name.split(".swf")[0] for p in TRACE_FILES])
def test_every_shared_trace_runs_and_finishes_every_job(path, elastic):
    jobs = trace(path)
    config = sized_cluster(jobs, elastic=elastic)
    sim, summary = simulate(config, jobs)
    assert summary["jobs"] == len(jobs.jobs)
    # (elastic: half the machine static, the other half the template's max; a job
    # wider than either runs on both, sched/holds_wide.py)
    assert sim.metrics.too_large == [], "the static cluster is the traced machine"
    unfinished = sorted(set(sim.metrics.submitted) - set(sim.metrics.started))[:5]
    assert summary["finished"] + summary["too_large"] == summary["jobs"], (
        f"{summary['jobs'] - summary['finished']} jobs never finished, e.g. "
        f"{[(j, sim.last_result.reason_of(j)) for j in unfinished]}"
    )
    if elastic:
        assert summary["hosts_joined"] == summary["hosts_reclaimed"] + summary["hosts_lost"] + (
            len(sim.provisioned)
        )


# --------------------------------------------------------------------------- CLI


def test_cli_sim_run_json_prints_the_summary(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent("""
        jobs:
          - {id: 1, submit: 0, run: 100, n: 4}
          - {id: 2, submit: 3, run: 50, n: 4}
    """))
    result = CliRunner().invoke(main, ["sim", "run", "--workload", str(path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert set(summary) >= SUMMARY_KEYS, SUMMARY_KEYS - set(summary)
    assert summary["jobs"] == 2
    assert summary["finished"] == 2
    # No cluster file: one host per processor of the largest job (4 x 1 slot); job 2
    # waits for job 1.
    assert summary["wait_p95"] == 97
    assert not math.isnan(summary["utilization"])


def test_cli_sim_run_with_cluster_file_elastic(tmp_path):
    (tmp_path / "cluster.yaml").write_text(textwrap.dedent(ELASTIC))
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(ELASTIC_JOBS))
    result = CliRunner().invoke(
        main, ["sim", "run", str(tmp_path / "cluster.yaml"), "--workload", str(path), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert set(summary) >= SUMMARY_KEYS
    assert summary["hosts_requested"] == 2
    assert summary["hosts_joined"] == 2
    assert summary["hosts_reclaimed"] == 2
    assert summary["host_hours"] == {"cloud": round(2 * 500 / 3600, 3)}


def test_cli_sim_cluster_prints_a_loadable_cluster(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {id: 1, submit: 0, run: 10, n: 6}\n")
    result = CliRunner().invoke(
        main, ["sim", "cluster", "--workload", str(path), "--elastic", "0.5"]
    )
    assert result.exit_code == 0, result.output
    config = load_config_text(result.output, "printed.yaml")
    assert sum(h.slots for h in config.hosts) == 3
    assert [(t.name, t.max, t.slots) for t in config.catalog.templates] == [("cloud", 3, 1)]


def test_cli_sim_run_enforces_run_limits_unless_told_not_to(tmp_path):
    (tmp_path / "cluster.yaml").write_text(textwrap.dedent(STATIC))
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(LIMITED_JOBS))
    args = ["sim", "run", str(tmp_path / "cluster.yaml"), "--workload", str(path), "--json"]
    killed = {}
    for extra in ([], ["--no-enforce-limits"], ["--enforce-limits"]):
        result = CliRunner().invoke(main, [*args, *extra])
        assert result.exit_code == 0, result.output
        killed[" ".join(extra)] = json.loads(result.output)["jobs_killed_at_limit"]
    assert killed == {"": 1, "--no-enforce-limits": 0, "--enforce-limits": 1}


def test_cli_sim_run_plan_options_change_the_cluster(tmp_path, monkeypatch):
    """`--reserve-depth N`, `--backfill` (every queue) and `--no-enforce-limits` try
    a policy without editing the cluster file: the simulator gets the cluster so
    changed (and without them, the file's)."""
    from xce.sim import single_run

    seen: list[ClusterConfig] = []

    def watched(config: ClusterConfig, *args: Any, **kwargs: Any) -> Simulator:
        seen.append(config)
        return Simulator(config, *args, **kwargs)

    # (xce.sim.single_run, where `xce sim run` builds its simulator, is not compiled)
    monkeypatch.setattr(single_run, "Simulator", watched)
    (tmp_path / "cluster.yaml").write_text(textwrap.dedent(STATIC).replace(
        "queues: [{name: normal, priority: 30}]",
        "queues: [{name: normal, priority: 30}, {name: low, priority: 10}]"))
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(LIMITED_JOBS))
    args = ["sim", "run", str(tmp_path / "cluster.yaml"), "--workload", str(path), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        main, [*args, "--reserve-depth", "3", "--backfill", "--no-enforce-limits"]
    )
    assert result.exit_code == 0, result.output
    plain, changed = seen
    assert (plain.reserve_depth, [q.backfill for q in plain.queues]) == (0, [False, False])
    assert plain.simulation.enforce_run_limits
    assert changed.reserve_depth == 3
    assert [q.backfill for q in changed.queues] == [True, True]
    assert not changed.simulation.enforce_run_limits
    assert changed.hosts == plain.hosts and [q.name for q in changed.queues] == ["normal", "low"]


def test_cli_sim_cluster_prints_the_plan_options(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {id: 1, submit: 0, run: 10, n: 6}\n")
    result = CliRunner().invoke(main, [
        "sim", "cluster", "--workload", str(path), "--reserve-depth", "1", "--backfill",
        "--no-enforce-limits",
    ])
    assert result.exit_code == 0, result.output
    config = load_config_text(result.output, "printed.yaml")
    assert config.reserve_depth == 1
    assert [q.backfill for q in config.queues] == [True]
    assert not config.simulation.enforce_run_limits


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_cli_sim_run_bad_reserve_depth_is_one_line(tmp_path, value):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {id: 1, submit: 0, run: 10, n: 1}\n")
    result = CliRunner().invoke(
        main, ["sim", "run", "--workload", str(path), "--reserve-depth", value, "--json"]
    )
    assert result.exit_code == 2
    assert result.output == (
        f"Error: --reserve-depth: expected a whole number >= 0, got '{value}'\n"
    )


@pytest.mark.parametrize(("args", "message"), [
    (["--first", "-3"], "Invalid value for '--first': -3 is not in the range x>=0."),
    (["--load", "0"], "Invalid value for '--load': 0.0 is not in the range 0<x<=1000000.0."),
    (["--load", "nan"], "Invalid value for '--load': load must be a finite number > 0, got nan"),
    (["--elastic", "1.5"], "Invalid value for '--elastic': 1.5 is not in the range 0<=x<=1."),
    (["--elastic", "-0.5"], "Invalid value for '--elastic': -0.5 is not in the range 0<=x<=1."),
])
def test_cli_sim_run_bad_workload_options_are_usage_errors(tmp_path, args, message):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {id: 1, submit: 0, run: 10, n: 1}\n")
    result = CliRunner().invoke(main, ["sim", "run", "--workload", str(path), *args, "--json"])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == f"Error: {message}"


@pytest.mark.parametrize(
    "path", [p for p in TRACE_FILES if p.name.startswith(("HPC2N", "SDSC"))],
    ids=lambda p: p.name.split("-")[0],
)
def test_elastic_easy_without_pend_reasons_decides_the_same(path: Path) -> None:
    """The lean sessions of `xce sim run` take shortcuts behind a reservation (a job
    placed on what the reservation leaves, in one pass: sched/plan.py `unclaimed`);
    on a real trace, half static plus bursting with EASY, with hosts requested for
    jobs, every decision is the one the sessions with pend reasons make."""
    workload = transform(load_workload(path), first=1500)
    config = sized_cluster(workload, elastic=0.5, lead_time=120, idle_time=600,
                           backfill=True, reserve_depth=1)
    config = msgspec.structs.replace(
        config, policy=msgspec.structs.replace(config.policy, persistence=0))
    runs = [Simulator(config, workload, reasons=reasons) for reasons in (True, False)]
    for sim in runs:
        sim.run()
    a, b = (sim.summary() for sim in runs)
    a.pop("wall_seconds")
    b.pop("wall_seconds")
    assert a == b
    assert runs[0].metrics.started == runs[1].metrics.started
    assert a["hosts_joined"] > 0 and a["jobs_backfilled"] > 0


SWF_WITH_MEMORY = (
    "; MaxProcs: 8\n"
    "1 0 -1 100 4 -1 -1 4 200 3072000 1 1 -1 -1 1 -1 -1 -1\n"  # 3000 MB per processor
    "2 10 -1 100 2 -1 -1 2 200 1024000 1 1 -1 -1 1 -1 -1 -1\n"  # 1000 MB per processor
)
MEMORY_CLUSTER = """\
cluster: m
resources:
  mem: {type: numeric, consumable: true}
hosts:
  - {name: "n[1-2]", slots: 4, resources: {mem: 4000}}
queues:
  - {name: normal, priority: 30}
"""


def test_swf_requested_memory_is_asked_for_where_the_cluster_counts_mem(tmp_path):
    (tmp_path / "m.swf").write_text(SWF_WITH_MEMORY)
    (tmp_path / "c.yaml").write_text(MEMORY_CLUSTER)
    (tmp_path / "plain.yaml").write_text(MEMORY_CLUSTER.replace(
        "resources:\n  mem: {type: numeric, consumable: true}\n", ""
    ).replace(", resources: {mem: 4000}", ""))

    def summary(cluster: str) -> dict[str, Any]:
        out = CliRunner().invoke(main, ["sim", "run", str(tmp_path / cluster), "--workload",
                                        str(tmp_path / "m.swf"), "--json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.output)

    counted = summary("c.yaml")
    assert (counted["finished"], counted["too_large"]) == (1, 1), (
        "job 1 asks 3000 MB per slot: a 4000 MB host holds one of its 4 slots, two hosts "
        "two; job 2 (1000 MB per slot, 2 slots) fits"
    )
    plain = summary("plain.yaml")
    assert (plain["finished"], plain["too_large"]) == (2, 0), "no mem resource: no memory"


@pytest.mark.parametrize(("res", "expected"), [
    ("", "rusage[mem=512]"),
    ("select[ssd]", "select[ssd] rusage[mem=512]"),
    ("rusage[vcs=1]", "rusage[mem=512:vcs=1]"),
    ("rusage[mem=100]", "rusage[mem=100]"),
])
def test_requested_memory_joins_the_requirement(res, expected):
    assert with_memory(res, 512.0) == expected


def test_a_yaml_workload_job_keeps_its_priority(tmp_path):
    # One 1-slot host busy until 100 with job 1; jobs 2 and 3 wait; job 3 has the
    # higher user priority (as a scenario's `priority`), so it starts first at 100.
    (tmp_path / "w.yaml").write_text(
        "jobs:\n"
        "  - {id: 1, submit: 0, run: 100}\n"
        "  - {id: 2, submit: 10, run: 10}\n"
        "  - {id: 3, submit: 20, run: 10, priority: 5}\n"
    )
    config = load_config_text("hosts:\n  - {name: n1, slots: 1}\n")
    sim = Simulator(config, load_workload(tmp_path / "w.yaml"))
    sim.run()
    assert sim.metrics.started == {1: 0.0, 3: 100.0, 2: 110.0}


def test_the_run_ends_when_borrowed_tokens_are_given_back(tmp_path):
    # Job 1 takes the one base token at 0; 2 are borrowed (granted at 30) for jobs 2
    # and 3, which end at 130; the tokens, idle from 130, go back at 230: nothing is
    # held after that, so the run ends there (no session for the return alone).
    (tmp_path / "c.yaml").write_text(textwrap.dedent("""\
        cluster: t8
        session_interval: 10
        resources:
          vcs: {type: numeric, consumable: true, shared: true}
        hosts:
          - {name: n01, slots: 4}
        shared:
          vcs: {total: 1}
        queues:
          - {name: normal, priority: 30}
        catalog:
          countables:
            - {resource: vcs, max_borrow: 2, idle_time: 100}
        policy:
          persistence: 0
        simulation:
          countables:
            vcs: {grant_delay: 30}
    """))
    (tmp_path / "w.yaml").write_text(
        'jobs:\n  - {ids: "1-3", submit: 0, run: 100, n: 1, res: "rusage[vcs=1]"}\n'
    )
    out = CliRunner().invoke(main, ["sim", "run", str(tmp_path / "c.yaml"), "--workload",
                                    str(tmp_path / "w.yaml"), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert {k: summary[k] for k in ("sim_seconds", "sessions", "token_hours", "wait_mean")} == {
        "sim_seconds": 230.0, "sessions": 4, "token_hours": 0.111, "wait_mean": 20.0
    }, "sessions at 0, 10 (the request), 30 (the grant) and 230 (idle tokens returned)"
    assert summary["utilization"] == pytest.approx(300 / (4 * 230))
