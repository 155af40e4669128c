"""The simulator with job arrays and dependencies (issue 21): a YAML workload with
`array`, `depend`, `exit` and `end_orphan` runs to the documented outcome and its
recording replays with zero divergence (docs/simulator.md, "Workload files")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from xce.config import load_config_text
from xce.model.recording import Recorder
from xce.sim.driver import Simulator
from xce.sim.replay import replay
from xce.sim.workload import WorkloadError, load_workload

CLUSTER = """
    cluster: small
    session_interval: 10
    hosts: [{name: n01, slots: 4}]
"""
JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 100, name: prep}
      - {id: 10, submit: 0, run: 50, name: sweep, array: "1-6%2", depend: "done(prep)"}
      - {id: 20, submit: 0, run: 30, depend: "ended(10)"}
      - {id: 21, submit: 0, run: 10, name: bad, exit: 3}
      - {id: 22, submit: 0, run: 10, depend: "done(bad)", end_orphan: true}
      - {id: 23, submit: 0, run: 10, depend: "exit(bad, 3) && !started(sweep[1])"}
      - {id: 30, submit: 0, run: 5, array: "1-6", depend: "done(sweep[*])"}
"""


def run(tmp_path: Path, recording: Path | None = None) -> Simulator:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent(JOBS))
    config = load_config_text(textwrap.dedent(CLUSTER), "cluster.yaml")
    recorder = Recorder(recording) if recording is not None else None
    sim = Simulator(config, load_workload(jobs), recorder=recorder)
    sim.run()
    if recorder is not None:
        recorder.close()
    return sim


def test_a_workload_with_arrays_and_dependencies_runs_in_the_documented_order(tmp_path):
    sim = run(tmp_path)
    assert sim.metrics.started == {
        1: 0, 21: 0, 23: 10,
        11: 100, 12: 100, 13: 150, 14: 150, 15: 200, 16: 200,
        31: 150, 32: 150, 33: 200, 34: 200, 35: 250, 36: 250,
        20: 250,
    }, (
        "the sweep waits for prep (ends at 100), two elements at a time; each post "
        "element after its sweep element; job 20 once every sweep element ended; job 23 "
        "once bad exited 3, before sweep[1] started"
    )
    summary = sim.summary()
    assert (summary["jobs"], summary["finished"], summary["orphans_ended"]) == (17, 16, 1), (
        "job 22 waits for done(bad), which exited: -ti ends it without running"
    )


def test_its_recording_replays_with_zero_divergence(tmp_path):
    recording = tmp_path / "run.jsonl"
    run(tmp_path, recording)
    report = replay(recording)
    assert report.divergence is None, str(report.divergence)
    assert report.sessions > 0


def test_workload_array_and_depend_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("jobs:\n  - {id: 1, run: 5, array: \"1-3%\"}\n")
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    assert str(caught.value) == (
        f"{path}:2: jobs[0].array: job array error at column 5: expected the number of "
        "elements that may run at once after '%'"
    )


def test_a_job_naming_a_job_the_scheduler_does_not_know_is_refused_on_arrival(tmp_path):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent("""
        jobs:
          - {id: 1, submit: 0, run: 5, depend: "done(2)"}
          - {id: 2, submit: 1, run: 5}
          - {id: 3, submit: 2, run: 5, depend: "done(1)"}
    """))
    config = load_config_text(textwrap.dedent(CLUSTER), "cluster.yaml")
    sim = Simulator(config, load_workload(jobs))
    sim.run()
    assert sim.summary()["refused"] == 2, (
        "job 1 names job 2 before it is submitted (LSF refuses it), and job 3 names the "
        "refused job 1"
    )
    assert sorted(sim.metrics.started) == [2]
