"""Recordings and replay: a recorded run replays with no divergence; an altered
recording is caught at the first session it changes, naming the session, the field,
what was recorded and what the scheduler now computes; `xce sim replay` exits 1 on a
divergence and 0 otherwise; a file that is not a recording is a clear error.

The recorded run is the static run of test_sim (2 hosts x 4 slots, sessions at 10 s)
plus a job: session 1 at t=0 starts job 1 on n01; session 2 at t=10 starts job 2 on
n02 while job 3 (4 slots) pends with "Not enough job slots: 4 needed, 0 free on
eligible hosts" (docs/scheduling.md, check 4). The elastic variant adds a template so
that host and supply events are recorded too.
"""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from xce.cli.main import main
from xce.config import load_config_text
from xce.model.recording import Recorder, RecordingError, read_recording
from xce.sim.driver import Simulator
from xce.sim.replay import Divergence, replay
from xce.sim.workload import load_workload

STATIC = """
    cluster: static
    session_interval: 10
    hosts:
      - {name: "n[01-02]", slots: 4}
    queues: [{name: normal, priority: 30}]
"""

ELASTIC = STATIC + """
    catalog:
      idle_time: 300
      templates:
        - {name: cloud, provider: sim, slots: 4, max: 2}
    policy: {persistence: 0}
    simulation:
      providers: {sim: {lead_time: 60}}
"""

JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 100, n: 4}
      - {id: 2, submit: 3, run: 50, n: 4}
      - {id: 3, submit: 5, run: 30, n: 4}
      - {id: 4, submit: 12, run: 20, n: 2}
      - {id: 5, submit: 12, run: 20, n: 4}
"""


def record(tmp_path: Path, name: str, cluster: str = STATIC) -> tuple[Path, Simulator]:
    jobs_file = tmp_path / "jobs.yaml"
    jobs_file.write_text(textwrap.dedent(JOBS))
    config = load_config_text(textwrap.dedent(cluster), "cluster.yaml")
    path = tmp_path / name
    recorder = Recorder(path)
    sim = Simulator(config, load_workload(jobs_file), recorder=recorder)
    sim.run()
    recorder.close()
    return path, sim


def read_lines(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def find(lines: list[dict[str, Any]], event: str, job: int) -> int:
    """Index of the line holding `event` for `job`."""
    for index, line in enumerate(lines):
        e = line.get("e")
        if e and e["event"] == event:
            subject = e["job"]["id"] if event == "JobSubmitted" else e["job"]
            if subject == job:
                return index
    raise AssertionError(f"no {event} of job {job} in the recording")


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("cluster", [STATIC, ELASTIC], ids=["static", "elastic"])
@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_recorded_run_replays_without_divergence(tmp_path, name, cluster):
    path, sim = record(tmp_path, name, cluster)
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b", ".gz recordings are gzip-compressed"
    lines = read_lines(path)
    assert lines[0] == {"format": "xce-recording", "version": 1, "source": "sim"}
    sessions = [line for line in lines if "s" in line]
    events = [line for line in lines[1:] if "e" in line]
    assert [line["s"] for line in sessions] == list(range(1, sim.metrics.sessions + 1))
    report = replay(path)
    assert report.divergence is None
    assert report.sessions == sim.metrics.sessions
    assert report.events == len(events)
    if cluster is ELASTIC:
        assert sim.metrics.hosts_joined, "host and supply events are recorded and replayed"


def test_read_recording_expands_pend_reason_deltas(tmp_path):
    """Session 3 (t=20): jobs 4 (2 slots) and 5 (4 slots, job 3's bucket) arrived at
    12; the line records only what changed (jobs 4 and 5), the reader gives all."""
    path, _ = record(tmp_path, "run.jsonl")
    four = "Not enough job slots: 4 needed, 0 free on eligible hosts"
    two = "Not enough job slots: 2 needed, 0 free on eligible hosts"
    third = next(line for line in read_lines(path) if line.get("s") == 3)
    assert third["t"] == 20
    assert sorted(job for _r, _k, jobs in third["pending"]["set"] for job in jobs) == [4, 5]
    sessions = {item.s: item for _line, _t, item in read_recording(path) if hasattr(item, "s")}
    assert sessions[2].outputs["pending"] == {3: [four, "resource"]}
    assert sessions[3].outputs["pending"] == {
        3: [four, "resource"], 4: [two, "resource"], 5: [four, "resource"],
    }


# --------------------------------------------------------------------------- divergence


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_changed_job_size_is_a_divergence(tmp_path, name):
    path, _ = record(tmp_path, name)
    lines = read_lines(path)
    index = find(lines, "JobSubmitted", 3)
    lines[index]["e"]["job"]["n"] = 8
    write_lines(path, lines)
    report = replay(path)
    assert report.divergence == Divergence(
        session=2,
        time=10,
        field="pending[job 3][0]",
        expected="Not enough job slots: 4 needed, 0 free on eligible hosts",
        got="Not enough job slots: 8 needed, 0 free on eligible hosts",
    )


def test_dropped_job_start_is_a_divergence(tmp_path):
    """Without job 1's start, session 2 finds job 1 pending and n01 free: it starts
    job 1 on n01 before job 2, where the recording has job 2 only."""
    path, _ = record(tmp_path, "run.jsonl")
    lines = read_lines(path)
    del lines[find(lines, "JobStarted", 1)]
    write_lines(path, lines)
    report = replay(path)
    divergence = report.divergence
    assert divergence is not None
    assert (divergence.session, divergence.time) == (2, 10)
    assert divergence.field.startswith("dispatch"), divergence
    assert report.sessions == 2, "replay stops at the first divergence"


def test_each_session_records_its_reservations(tmp_path):
    """Every session line has `reservations` (FORMATS.md's session result shape; none
    here: no reserve_depth); a recorded reservation the scheduler does not make again
    is a divergence."""
    path, _ = record(tmp_path, "run.jsonl")
    lines = read_lines(path)
    sessions = [line for line in lines if "s" in line]
    assert sessions and all(line["reservations"] == [] for line in sessions)
    sessions[1]["reservations"] = [{"job": 3, "start": 60.0, "hosts": {"n02": 4}, "end": 90.0}]
    write_lines(path, lines)
    divergence = replay(path).divergence
    assert divergence is not None
    assert (divergence.session, divergence.field) == (2, "reservations length")
    assert (divergence.expected, divergence.got) == (1, 0)


def test_a_recording_without_reservations_replays(tmp_path):
    """Recordings made before reservations existed have no `reservations` key: replay
    does not compare it."""
    path, sim = record(tmp_path, "run.jsonl")
    lines = read_lines(path)
    for line in lines:
        line.pop("reservations", None)
    write_lines(path, lines)
    report = replay(path)
    assert report.divergence is None
    assert report.sessions == sim.metrics.sessions


# --------------------------------------------------------------------------- CLI


def test_cli_replay_of_a_good_recording_exits_0(tmp_path):
    path, sim = record(tmp_path, "run.jsonl.gz")
    result = CliRunner().invoke(main, ["sim", "replay", str(path)])
    assert result.exit_code == 0, result.output
    assert f"replayed {sim.metrics.sessions} sessions" in result.output
    assert "no divergence" in result.output


def test_cli_replay_of_an_altered_recording_exits_1(tmp_path):
    path, _ = record(tmp_path, "run.jsonl")
    lines = read_lines(path)
    lines[find(lines, "JobSubmitted", 3)]["e"]["job"]["n"] = 8
    write_lines(path, lines)
    result = CliRunner().invoke(main, ["sim", "replay", str(path)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("DIVERGENCE: session 2 at t=10: "), result.output
    assert "pending[job 3][0]" in result.output
    assert "4 needed" in result.output and "8 needed" in result.output


@pytest.mark.parametrize(
    "name, content",
    [
        ("jobs.yaml", "jobs:\n  - {id: 1, run: 10}\n"),
        ("other.jsonl", '{"format": "something-else", "version": 1}\n'),
        ("empty.jsonl", ""),
        ("plain.jsonl.gz", "not gzip at all\n"),
    ],
)
def test_cli_replay_of_a_file_that_is_not_a_recording_is_a_clear_error(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    result = CliRunner().invoke(main, ["sim", "replay", str(path)])
    assert result.exit_code not in (0, None), result.output
    assert str(path) in result.output, result.output
    assert "recording" in result.output
    assert "Traceback" not in result.output
    with pytest.raises(RecordingError, match=str(path)):
        replay(path)


def test_replay_of_a_truncated_record_names_the_line(tmp_path):
    path, _ = record(tmp_path, "run.jsonl")
    text = path.read_text().splitlines()
    text[3] = text[3][: len(text[3]) // 2]
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(RecordingError, match=rf"{path}:4: "):
        replay(path)
