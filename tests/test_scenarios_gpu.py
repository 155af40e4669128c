"""Scenario specifications of GPUs as LSF counts them (issue 20; docs/scheduling.md,
"GPUs"; docs/requirements.md, "GPUs: -gpu").

Hosts and templates have `gpus: N`; a job asks for GPUs *per host* (`bsub -gpu
"num=N"`, scenario `gpus: N`). Every GPU a job asks for is taken on each host it runs
on, whatever its slots there. Each test is one small scenario with the exact outcome
worked out by hand.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from xce.cli import client as client_module
from xce.cli.client_cmds import submit
from xce.config import ConfigError, load_config_text
from xce.model.api import SubmitRequest, Submitted
from xce.model.events import JobFinished, JobSubmitted
from xce.model.jobs import JobSpec
from xce.resreq import GpuError, GpuRequest, ResReqError, parse, parse_gpu, validate
from xce.scenario import load_scenario_text
from xce.sched.reasons import NEVER_RUNS
from xce.sched.state import SchedulerState, SubmitError
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

NO_GPUS = "Not enough GPUs: {need} per host needed, {free} free on eligible hosts"


def no_gpus(need: int, free: int) -> str:
    return NO_GPUS.format(need=need, free=free)


# --------------------------------------------------------------------------- placement


def test_ptile_job_takes_its_gpus_on_each_of_its_hosts_and_leaves_the_rest(session):
    s = session("""
        now: 100
        cluster:
          hosts:
            - {name: g1, slots: 8, gpus: 4}
            - {name: g2, slots: 8, gpus: 4}
            - {name: g3, slots: 8, gpus: 4}
        jobs:
          - {id: 1, n: 16, res: "span[ptile=8]", gpus: 2, submit: 1}
          - {id: 2, n: 8, res: "span[hosts=1]", gpus: 4, submit: 2}
          - {id: 3, n: 1, gpus: 1, submit: 3}
    """)
    assert s.dispatched == {1: {"g1": 8, "g2": 8}, 2: {"g3": 8}}, (
        "job 1 puts 8 slots on each of 2 hosts (first by name: all alike) and takes 2 "
        "GPUs on each; g3 is left whole for job 2's 4 GPUs"
    )
    assert s.reasons == {3: "Not enough job slots: 1 needed, 0 free on eligible hosts"}


def test_gpus_left_on_a_host_go_to_the_next_job(session):
    s = session("""
        now: 100
        cluster:
          hosts:
            - {name: g1, slots: 16, gpus: 4}
            - {name: g2, slots: 16, gpus: 4}
            - {name: g3, slots: 16, gpus: 4}
        jobs:
          - {id: 1, n: 16, res: "span[ptile=8]", gpus: 2, submit: 1}
          - {id: 2, n: 8, res: "span[ptile=4]", gpus: 2, submit: 2}
          - {id: 3, n: 1, gpus: 2, submit: 3}
          - {id: 4, n: 1, gpus: 2, submit: 4}
          - {id: 5, n: 1, gpus: 1, submit: 5}
          - {id: 6, n: 1, submit: 6}
    """)
    # After job 1: g1, g2 have 8 slots and 2 GPUs free, g3 16 and 4. Job 2 takes the
    # most free first (g3), then g1 (name): 4 slots and 2 GPUs on each. Then g3 has 12
    # slots and 2 GPUs, g2 8 and 2, g1 4 and 0: job 3 goes to g3, job 4 to g2.
    assert s.dispatched == {
        1: {"g1": 8, "g2": 8},
        2: {"g1": 4, "g3": 4},
        3: {"g3": 1},
        4: {"g2": 1},
        6: {"g3": 1},
    }
    assert s.reasons == {5: no_gpus(1, 0)}


def test_span_hosts_1_needs_its_gpus_on_the_one_host(session):
    s = session("""
        now: 100
        cluster:
          hosts:
            - {name: g1, slots: 8, gpus: 2}
            - {name: g2, slots: 4, gpus: 4}
            - {name: g3, slots: 8, gpus: 4}
        jobs:
          - {id: 1, n: 6, state: RUN, hosts: {g3: 6}, start: 0}
          - {id: 2, n: 4, res: "span[hosts=1]", gpus: 3, submit: 1}
    """)
    assert s.dispatched == {2: {"g2": 4}}, (
        "g1 has the most free slots but 2 GPUs; g3 has its 4 GPUs but 2 free slots"
    )


def test_a_host_without_gpus_is_never_chosen_for_a_gpu_job(session):
    s = session("""
        now: 100
        cluster:
          hosts:
            - {name: c1, slots: 32}
            - {name: g1, slots: 4, gpus: 1}
            - {name: g2, slots: 4, gpus: 1}
        jobs:
          - {id: 1, n: 6, gpus: 1, submit: 1}
          - {id: 2, n: 1, gpus: 1, submit: 2}
          - {id: 3, n: 1, submit: 3}
    """)
    assert s.dispatched == {1: {"g1": 4, "g2": 2}, 3: {"c1": 1}}, (
        "job 1 spreads without span, but only over hosts that have its GPU, 1 on each"
    )
    assert s.reasons == {2: no_gpus(1, 0)}


def test_select_reads_configured_gpus_and_order_reads_free_ones(session):
    s = session("""
        now: 100
        cluster:
          hosts:
            - {name: g1, slots: 8, gpus: 2}
            - {name: g2, slots: 8, gpus: 4}
            - {name: c1, slots: 16}
        jobs:
          - {id: 1, res: "select[ngpus>0]", submit: 1}
          - {id: 2, res: "order[ngpus]", gpus: 3, submit: 2}
          - {id: 3, res: "order[ngpus]", submit: 3}
          - {id: 4, res: "order[-ngpus]", submit: 4}
          - {id: 5, res: "select[ngpus==0]", submit: 5}
          - {id: 6, res: "select[ngpus>=4]", submit: 6}
    """)
    assert s.dispatched == {
        1: {"g1": 1},  # GPU hosts only; 8 free slots each: by name
        2: {"g2": 1},  # the only host with 3 GPUs; 1 left there
        3: {"g1": 1},  # the most free GPUs now: g1 (2) before g2 (1) and c1 (0)
        4: {"c1": 1},  # the fewest
        5: {"c1": 1},
        6: {"g2": 1},  # configured 4, though 1 is free: select reads the configuration
    }


# --------------------------------------------------------------------------- reasons


def test_pend_reason_names_gpus_per_host_and_the_most_free_on_an_eligible_host(session):
    s = session("""
        now: 100
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: g1, slots: 8, gpus: 1, resources: {mem: 1000}}
            - {name: g2, slots: 8, gpus: 1, resources: {mem: 1000}}
            - {name: g3, slots: 16, gpus: 2, resources: {mem: 2000}}
            - {name: g4, slots: 16, gpus: 2, resources: {mem: 2000}}
        hosts:  # (closed: so that every job could run some day)
          - {name: g3, state: closed}
          - {name: g4, state: closed}
        jobs:
          - {id: 1, n: 16, res: "span[ptile=8]", gpus: 2, submit: 1}
          - {id: 2, n: 17, gpus: 1, submit: 2}
          - {id: 3, n: 1, res: "rusage[mem=2000]", gpus: 2, submit: 3}
          - {id: 4, n: 12, res: "span[ptile=12]", gpus: 2, submit: 4}
    """)
    assert s.dispatched == {}
    assert s.reasons == {
        1: no_gpus(2, 1),
        2: "Not enough job slots: 17 needed, 16 free on eligible hosts",
        3: "Not enough mem: 1 slots x 2000 needed, room for 0 slots on eligible hosts",
        4: "Not enough hosts to meet the span requirement",
    }, "slots, consumables and span come before GPUs: a job that fits but for them"
    assert s.trace(1)[0].check == "gpus"


def test_gpu_job_on_a_cluster_without_gpus_pends_for_them(session):
    s = session("""
        now: 100
        cluster:
          hosts: [{name: c1, slots: 4}]
        jobs:
          - {id: 1, gpus: 1, submit: 1}
          - {id: 2, submit: 2}
    """)
    assert s.dispatched == {2: {"c1": 1}}
    assert s.reasons == {1: NEVER_RUNS + ": job requests 1 GPUs per host; the most any "
                            "host or template has is 0"}


# --------------------------------------------------------------------------- running jobs


RUNNING = """
    now: 100
    cluster:
      hosts: [{name: g1, slots: 8, gpus: 4}]
    jobs:
      - {id: 1, n: 1, gpus: 4, state: RUN, hosts: {g1: 1}, start: 0}
      - {id: 2, n: 2, gpus: 1, submit: 1}
"""


def test_a_running_job_holds_its_gpus(session):
    s = session(RUNNING)
    assert s.dispatched == {}
    assert s.reasons == {2: no_gpus(1, 0)}


def test_a_running_jobs_gpus_are_free_when_it_ends(session):
    s = session(RUNNING, extra_events=[JobFinished(job=1, time=50)])
    assert s.dispatched == {2: {"g1": 2}}


def test_gpus_freed_by_a_job_of_a_template_host_follow_the_template(session):
    s = session("""
        now: 100
        cluster:
          catalog:
            templates: [{name: p, provider: cloud, slots: 8, gpus: 2, max: 1}]
        hosts:
          - {name: p-1, template: p, state: ok, joined: 10}
        jobs:
          - {id: 1, n: 1, gpus: 2, state: RUN, hosts: {p-1: 1}, start: 20}
          - {id: 2, n: 1, gpus: 1, submit: 30}
    """, extra_events=[JobFinished(job=1, time=90)])
    assert s.dispatched == {2: {"p-1": 1}}, "a joined host has its template's GPUs"


# --------------------------------------------------------------------------- the plan


def test_a_reservation_waits_for_gpus_and_backfill_uses_gpus_it_does_not_need(session):
    s = session("""
        now: 1000
        cluster:
          reserve_depth: 1
          hosts:
            - {name: g1, slots: 8, gpus: 4}
            - {name: g2, slots: 8, gpus: 4}
          queues: [{name: normal, backfill: true}]
        jobs:
          - {id: 1, n: 1, gpus: 4, state: RUN, hosts: {g1: 1}, start: 0, run_limit: 2000}
          - {id: 2, n: 1, gpus: 3, state: RUN, hosts: {g2: 1}, start: 0, run_limit: 3000}
          - {id: 10, n: 2, res: "span[hosts=1]", gpus: 2, submit: 10, run_limit: 1000}
          - {id: 11, n: 1, gpus: 1, submit: 20, run_limit: 500}
          - {id: 12, n: 1, gpus: 1, submit: 30, run_limit: 5000}
          - {id: 13, n: 1, submit: 40, run_limit: 5000}
    """)
    # Job 10 needs 2 GPUs on one host: g1 has none until job 1's planned end at
    # 2000, g2 one until 3000. Job 11 takes g2's free GPU; then none is left for
    # job 12; job 13 asks for no GPU and g1 keeps 6 slots for job 10 beside it.
    assert s.json["reservations"] == [
        {"job": 10, "start": 2000.0, "hosts": {"g1": 2}, "end": 3000.0}
    ]
    assert s.dispatched == {11: {"g2": 1}, 13: {"g1": 1}}
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on g1 (2 slots)",
        12: no_gpus(1, 0),
    }


def test_gpus_a_reservation_holds_are_left_to_it(session):
    s = session("""
        now: 1000
        cluster:
          reserve_depth: 1
          hosts: [{name: g1, slots: 8, gpus: 4}]
          queues: [{name: normal, backfill: true}]
        jobs:
          - {id: 1, n: 1, gpus: 2, state: RUN, hosts: {g1: 1}, start: 0, run_limit: 2000}
          - {id: 10, n: 1, gpus: 4, submit: 10, run_limit: 1000}
          - {id: 11, n: 1, gpus: 2, submit: 20, run_limit: 5000}
          - {id: 12, n: 1, gpus: 2, submit: 30, run_limit: 500}
          - {id: 13, n: 1, submit: 40, run_limit: 5000}
    """)
    assert s.json["reservations"] == [
        {"job": 10, "start": 2000.0, "hosts": {"g1": 1}, "end": 3000.0}
    ]
    assert s.dispatched == {12: {"g1": 1}, 13: {"g1": 1}}, (
        "the 2 free GPUs may go only to a job that gives them back by 2000 (job 12); "
        "slots are plenty, so job 13 (no GPU) starts too"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on g1 (1 slot)",
        11: "Would delay the reservation of job 10 (starts in 17 min)",
    }


# --------------------------------------------------------------------------- catalog


GPU_CATALOG = """
    now: 1000
    cluster:
      hosts: [{name: c1, slots: 4}]
      catalog:
        templates:
          - {name: aws.c5, provider: aws, slots: 16, max: 10, rank: 10}
          - {name: aws.p4, provider: aws, slots: 96, gpus: 8, max: 10, rank: 30}
    jobs:
"""


def catalog_scenario(jobs: str) -> str:
    return textwrap.dedent(GPU_CATALOG) + textwrap.indent(textwrap.dedent(jobs), "  ")


def test_demand_counts_gpus_per_host_of_the_template(session):
    s = session(catalog_scenario("""
        - {id: 4, n: 8, submit: 0}
        - {id: 1, n: 1, gpus: 4, submit: 1}
        - {id: 2, n: 1, gpus: 4, submit: 2}
        - {id: 3, n: 1, gpus: 4, submit: 3}
        - {id: 5, n: 8, submit: 5}
    """))
    assert s.demand["hosts"] == [
        {"template": "aws.c5", "count": 1, "in_flight_used": 0, "jobs": [4, 5]},
        {"template": "aws.p4", "count": 2, "in_flight_used": 0, "jobs": [1, 2, 3]},
    ], (
        "job 4 (no GPU) opens a host of the better ranked aws.c5; aws.c5 has no GPU: "
        "two jobs of 4 GPUs fill a host of aws.p4 (8), the third opens a second; job 5 "
        "fits on the aws.c5 host opened already (templates by rank)"
    )
    assert s.reasons[1] == (
        "Waiting for provisioning: fits on template aws.p4 (2 new hosts requested this "
        "session)"
    )


def test_demand_of_a_ptile_job_counts_gpus_on_each_piece(session):
    s = session(catalog_scenario("""
        - {id: 1, n: 16, res: "span[ptile=8]", gpus: 4, submit: 1}
        - {id: 2, n: 8, res: "span[ptile=8]", gpus: 4, submit: 2}
        - {id: 3, n: 8, res: "span[ptile=8]", gpus: 4, submit: 3}
    """))
    assert s.demand["hosts"] == [
        {"template": "aws.p4", "count": 2, "in_flight_used": 0, "jobs": [1, 2, 3]},
    ], "job 1's two pieces open 2 hosts (4 GPUs each); jobs 2 and 3 take the other 4 of each"


def test_no_template_with_enough_gpus_says_so(session):
    s = session(catalog_scenario("""
        - {id: 1, n: 1, gpus: 16, submit: 1}
    """))
    assert s.demand["hosts"] == []
    assert s.reasons == {
        1: NEVER_RUNS + ": job requests 16 GPUs per host; the most any host or template "
        "has is 8"
    }


def test_in_flight_gpu_hosts_are_used_before_new_ones(session):
    s = session(catalog_scenario("""
        - {id: 1, n: 1, gpus: 8, submit: 1}
        - {id: 2, n: 1, gpus: 8, submit: 2}
    """) + "supply:\n  in_flight: {aws.p4: 1}\n")
    assert s.demand["hosts"] == [
        {"template": "aws.p4", "count": 1, "in_flight_used": 1, "jobs": [1, 2]},
    ], "job 1 takes all 8 GPUs of the host in flight; job 2 needs a new one"


# --------------------------------------------------------------------------- the docs


def test_the_example_of_scheduling_md(session):
    """docs/scheduling.md, "GPUs": the first example, as documented."""
    s = session("""
        now: 1000
        cluster:
          reserve_depth: 1
          hosts:
            - {name: g01, slots: 16, gpus: 4}
            - {name: g02, slots: 16, gpus: 4}
            - {name: c01, slots: 32}
          queues: [{name: normal, backfill: true}]
        jobs:
          - {id: 1, n: 1, gpus: 2, state: RUN, hosts: {g02: 1}, start: 0, run_limit: 3600}
          - {id: 10, n: 16, res: "span[ptile=8]", gpus: 2, submit: 10, run_limit: 7200}
          - {id: 11, n: 4, res: "span[hosts=1]", gpus: 4, submit: 20, run_limit: 7200}
          - {id: 12, n: 2, gpus: 1, submit: 30, run_limit: 600}
          - {id: 13, n: 8, submit: 40}
          - {id: 14, n: 1, gpus: 2, submit: 50, run_limit: 600}
          - {id: 15, n: 1, gpus: 1, submit: 60, run_limit: 36000}
    """)
    assert s.dispatched == {10: {"g01": 8, "g02": 8}, 12: {"g01": 2}, 13: {"c01": 8}}
    assert s.json["reservations"] == [
        {"job": 11, "start": 8200.0, "hosts": {"g01": 4}, "end": 15400.0}
    ]
    assert s.reasons == {
        11: "Reserved: expected to start at 8200 (in 2 h) on g01 (4 slots)",
        14: no_gpus(2, 1),
        15: "Would delay the reservation of job 11 (starts in 2 h)",
    }
    assert s.trace(11)[0].detail.startswith(
        "Not enough GPUs: 4 per host needed, 2 free on eligible hosts. Reserved: the "
        "earliest time at which it fits on capacity that stays free for its run limit "
        "(2 h) is 8200 (in 2 h), on g01 (4 slots)"
    )


def test_the_catalog_example_of_scheduling_md(session):
    s = session(catalog_scenario("""
        - {id: 21, n: 1, gpus: 4, submit: 1}
        - {id: 22, n: 1, gpus: 4, submit: 2}
        - {id: 23, n: 1, gpus: 4, submit: 3}
        - {id: 24, n: 16, res: "span[ptile=8]", gpus: 4, submit: 4}
        - {id: 25, n: 1, gpus: 16, submit: 5}
    """).replace("{name: c1, slots: 4}", "{name: c01, slots: 32}").replace(
        "gpus: 8, max: 10", "gpus: 8, max: 4"))
    assert s.demand["hosts"] == [
        {"template": "aws.p4", "count": 3, "in_flight_used": 0, "jobs": [21, 22, 23, 24]},
    ]
    waiting = (
        "Waiting for provisioning: fits on template aws.p4 (3 new hosts requested this "
        "session)"
    )
    assert s.reasons == {
        21: waiting, 22: waiting, 23: waiting, 24: waiting,
        25: "No host or template can ever run this job: job requests 16 GPUs per host; "
        "the most any host or template has is 8",
    }


# --------------------------------------------------------------------------- simulator


def test_simulated_gpu_jobs_wait_for_gpus_and_oversize_ones_are_refused(tmp_path: Path):
    config = load_config_text(textwrap.dedent("""
        session_interval: 10
        hosts:
          - {name: g1, slots: 4, gpus: 2}
          - {name: c1, slots: 4}
    """), "cluster.yaml")
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent("""
        jobs:
          - {id: 1, submit: 0, run: 100, gpus: 2}
          - {id: 2, submit: 3, run: 50, gpus: 2}
          - {id: 3, submit: 5, run: 10}
          - {id: 4, submit: 6, run: 10, gpus: 3}
    """))
    workload = load_workload(path)
    assert [j.gpus for j in workload.jobs] == [2, 2, 0, 3]
    sim = Simulator(config, workload)
    sim.run()
    assert sim.metrics.started == {1: 0, 2: 100, 3: 10}, (
        "job 2 waits for job 1's GPUs although g1 has free slots; job 3 needs none"
    )
    assert sim.metrics.too_large == [4], "no host has 3 GPUs"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("num=2", GpuRequest(2)),
        ("-", GpuRequest(1)),
        ("mode=exclusive_process", GpuRequest(1, "exclusive_process", True)),
        ("num=4:mode=shared:j_exclusive=yes", GpuRequest(4, "shared", True)),
        (" num = 2/host : j_exclusive = no ", GpuRequest(2)),
    ],
)
def test_gpu_strings(text: str, expected: GpuRequest) -> None:
    assert parse_gpu(text) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("num=x", "gpu requirement error at column 5: num must be an integer >= 1, got 'x'"),
        ("num=0", "gpu requirement error at column 5: num must be an integer >= 1, got '0'"),
        ("foo=1", "gpu requirement error at column 1: unknown -gpu option 'foo' (expected "
                  "num, mode or j_exclusive)"),
        ("num=2:mps=yes", "gpu requirement error at column 7: -gpu option 'mps' is not "
                          "supported"),
        ("num=2:mode=excl", "gpu requirement error at column 12: mode must be shared or "
                            "exclusive_process, got 'excl'"),
        ("j_exclusive=maybe", "gpu requirement error at column 13: j_exclusive must be yes "
                              "or no, got 'maybe'"),
        ("num=1:num=2", "gpu requirement error at column 7: duplicate -gpu option 'num'"),
        ("num", "gpu requirement error at column 4: expected '=' after 'num'"),
        ("num=", "gpu requirement error at column 5: expected a value after 'num='"),
        ("num=2:", "gpu requirement error at column 7: expected a -gpu option (num, mode or "
                   "j_exclusive)"),
        ("", "gpu requirement error at column 1: expected a -gpu option (num, mode or "
             "j_exclusive)"),
        ("num=2/task", "gpu requirement error at column 7: GPUs per task (num=N/task) are "
                       "not supported: num is per host"),
    ],
)
def test_bad_gpu_strings_name_the_column(text: str, error: str) -> None:
    with pytest.raises(GpuError) as caught:
        parse_gpu(text)
    assert str(caught.value) == error
    assert isinstance(caught.value, ResReqError), "callers of requirement errors catch it"


def test_submit_gpu_option_is_parsed_and_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[SubmitRequest] = []

    def fake_submit(self: object, request: SubmitRequest) -> Submitted:
        sent.append(request)
        return Submitted(job=7, queue="normal")

    monkeypatch.setattr(client_module.Client, "submit", fake_submit)
    monkeypatch.setenv("XCE_TOKEN", "t")
    result = CliRunner().invoke(submit, ["-gpu", "num=2:mode=exclusive_process", "true"])
    assert result.exit_code == 0, result.output
    assert result.output == "Job <7> is submitted to queue <normal>.\n"
    [request] = sent
    assert (request.gpus, request.gpu_mode, request.gpu_exclusive) == (
        2, "exclusive_process", True
    )


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("num=x", "gpu requirement error at column 5: num must be an integer >= 1, got 'x'"),
        ("foo=1", "gpu requirement error at column 1: unknown -gpu option 'foo' (expected "
                  "num, mode or j_exclusive)"),
    ],
)
def test_submit_with_a_bad_gpu_option_is_a_usage_error(
    value: str, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module.Client, "submit", lambda *a: pytest.fail("sent"))
    monkeypatch.setenv("XCE_TOKEN", "t")
    result = CliRunner().invoke(submit, ["-gpu", value, "true"])
    assert result.exit_code == 2
    assert f"Invalid value for '-gpu': {error}" in result.output


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("hosts: [{name: n1, slots: 8, gpus: -1}]\n",
         "cluster.yaml:1: hosts[0].gpus: gpus must be >= 0"),
        ("hosts:\n  - name: n1\n    slots: 8\n    gpus: 2.5\n",
         "cluster.yaml:4: hosts[0].gpus: expected an integer, got a number (2.5)"),
        ("catalog:\n  templates:\n    - {name: t, provider: p, slots: 8, gpus: -2}\n",
         "cluster.yaml:3: catalog.templates[0].gpus: gpus must be >= 0"),
        ("resources:\n  ngpus: {consumable: true}\n",
         "cluster.yaml:2: resources.ngpus: 'ngpus' is a builtin resource and cannot be "
         "declared"),
    ],
)
def test_bad_gpus_in_the_configuration_name_file_line_and_field(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, "cluster.yaml")
    assert str(caught.value) == error


def test_config_gpus_reach_hosts_and_templates() -> None:
    config = load_config_text(textwrap.dedent("""
        hosts: [{name: "n[1-2]", slots: 8, gpus: 4}, {name: c1, slots: 8}]
        catalog:
          templates: [{name: aws.p4, provider: aws, slots: 96, gpus: 8, max: 4}]
    """), "cluster.yaml")
    assert [h.gpus for h in config.hosts] == [4, 4, 0]
    assert config.catalog.templates[0].gpus == 8


@pytest.mark.parametrize(
    ("job", "error"),
    [
        ("{id: 1, gpus: -1}", "scenario.yaml:5: jobs[0].gpus: gpus must be >= 0"),
        ("{id: 1, gpus: two}", "scenario.yaml:5: jobs[0].gpus: expected an integer, got a "
                               "string ('two')"),
        ("{id: 1, gpu: 'num=x'}", "scenario.yaml:5: jobs[0].gpu: gpu requirement error at "
                                  "column 5: num must be an integer >= 1, got 'x'"),
        ("{id: 1, gpus: 1, gpu: 'num=1'}", "scenario.yaml:5: jobs[0].gpu: give one of gpus "
                                           "or gpu"),
    ],
)
def test_bad_gpus_in_a_scenario_name_file_line_and_field(job: str, error: str) -> None:
    text = f"now: 1\ncluster:\n  hosts: [{{name: g1, slots: 1, gpus: 1}}]\njobs:\n  - {job}\n"
    with pytest.raises(ConfigError) as caught:
        load_scenario_text(text, "scenario.yaml")
    assert str(caught.value) == error


def test_scenario_gpu_string_gives_the_mode() -> None:
    sc = load_scenario_text(textwrap.dedent("""
        cluster:
          hosts: [{name: g1, slots: 1, gpus: 1}]
        jobs:
          - {id: 1, gpu: "num=1:mode=exclusive_process"}
    """), "scenario.yaml")
    [spec] = [e.job for e in sc.events if isinstance(e, JobSubmitted)]
    assert (spec.gpus, spec.gpu_mode, spec.gpu_exclusive) == (1, "exclusive_process", True)


@pytest.mark.parametrize(
    ("res", "error"),
    [
        ("rusage[ngpus=1]", 'requirement error at column 8: GPUs are asked for with -gpu '
                            '"num=N", not rusage[]'),
        ("select[gpus>0]", "requirement error at column 8: unknown resource 'gpus'"),
    ],
)
def test_gpus_in_requirement_strings(res: str, error: str) -> None:
    with pytest.raises(ResReqError) as caught:
        validate(parse(res), {})
    assert str(caught.value) == error


def test_select_and_order_by_ngpus_are_valid() -> None:
    validate(parse("select[ngpus>=2] order[ngpus]"), {})
    validate(parse("order[-ngpus:slots]"), {})


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (JobSpec(id=1, gpus=-1), "job 1: gpus must be between 0 and 1000000"),
        (JobSpec(id=1, gpus=1, gpu_mode="exclusive"),
         "job 1: GPU mode must be shared or exclusive_process, not 'exclusive'"),
    ],
)
def test_bad_gpu_submissions_are_refused(spec: JobSpec, error: str) -> None:
    state = SchedulerState(load_config_text("hosts: [{name: g1, slots: 1, gpus: 1}]\n", "c"))
    with pytest.raises(SubmitError) as caught:
        state.apply(JobSubmitted(job=spec))
    assert str(caught.value) == error
