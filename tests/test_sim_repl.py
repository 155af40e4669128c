"""`xce sim repl` in script mode (commands from stdin), driven through click."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from xce.cli.main import main
from xce.config import load_config, load_config_text
from xce.model.events import JobFinished, JobStarted, JobSubmitted, SupplyChanged
from xce.model.jobs import JobSpec
from xce.model.recording import SessionRecord, read_recording
from xce.model.result import Reservation
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events
from xce.sim.driver import Simulator
from xce.sim.repl import Repl
from xce.sim.repl_text import ReplError, parse_time, show_time
from xce.sim.replay import replay
from xce.sim.workload import load_workload

CLUSTER = """\
cluster: tiny
session_interval: 10
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 600
  templates:
    - {name: cloud, provider: sim, slots: 4, max: 3}
policy:
  persistence: 7200
simulation:
  providers:
    sim: {lead_time: 300}
"""

# Job 1 fills the static host; jobs 2-3 need cloud hosts, but the policy waits 2 h
# before asking for any; job 4 arrives at 5000 s and wakes the scheduler up.
JOBS = """\
jobs:
  - {id: 1, submit: 0, run: 10000, n: 4, user: alice}
  - {ids: "2-3", submit: 60, run: 600, n: 4, user: bob}
  - {id: 4, submit: 5000, run: 100, n: 1, user: carol}
"""

SCRIPT = (
    "run for 1h\ninfo jobs pending\nwhy 3\ninfo demand\nset policy persistence 0\n"
    "step 2\ninfo supply\nquit\n"
)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cluster, jobs = tmp_path / "cluster.yaml", tmp_path / "jobs.yaml"
    cluster.write_text(textwrap.dedent(CLUSTER))
    jobs.write_text(textwrap.dedent(JOBS))
    return cluster, jobs


def repl(files: tuple[Path, Path], script: str) -> Result:
    cluster, jobs = files
    return CliRunner().invoke(
        main, ["sim", "repl", str(cluster), "--workload", str(jobs)], input=script,
        env={"COLUMNS": "80"},
    )


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def cells(line: str) -> list[str]:
    """The cells of a rich table row."""
    return [cell.strip() for cell in line.strip()[1:-1].split("│")]


def rows(text: str) -> list[list[str]]:
    return [cells(line) for line in lines(text) if line.startswith("│")]


def test_script(files: tuple[Path, Path]) -> None:
    result = repl(files, SCRIPT)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    out = lines(result.stdout)
    # run for 1h
    assert out[0] == (
        "now t=3600 (1h): 2 sessions, 1 job started, 0 finished; 2 pending, 1 running"
    )
    # info jobs pending
    assert out[1] == "Pending jobs: 2"
    table = rows(result.stdout)
    assert table[0] == [
        "2-3", "2", "Waiting for provisioning: fits on template", "360 (6m) virtual"
    ], "the jobs hold their new hosts from the last session (t=60) + the lead time"
    assert table[1] == ["", "", "cloud (2 new hosts requested this session)", ""]
    # why 3
    assert (
        "Job 3: Waiting for provisioning: fits on template cloud (2 new hosts requested this "
        "session)"
    ) in out
    assert (
        "  [real] slots: Not enough job slots: 4 needed, 0 free on eligible hosts "
        "(evaluated job 2)"
    ) in out
    # info demand
    assert "demand of the session at t=60 (1m):" in out
    assert ["cloud", "2", "0", "2-3"] in table
    # set policy persistence 0
    assert "policy persistence: 7200 -> 0 (from the next policy round)" in out
    # step 2: job 4 arrives at 5000 s; the policy asks for hosts at once; the request
    # itself is an input, so the next session comes one tick later
    assert (
        "ran 2 sessions; session 4 at t=5010 (1h23m30s): 0 dispatched, 3 pending, 1 running"
    ) in out
    # info supply
    assert "Hosts at t=5010 (1h23m30s)" in out
    assert ["cloud", "0", "3", "3", "-", "-"] in table
    assert "Policy actions: last 1 of 1" in out
    assert ["5000", "request 3 cloud", "demand of 3 hosts for 3 jobs persisted 4940 s"] in table
    # tables fit 80 columns; message lines are left to the terminal to wrap
    assert all(len(line) <= 80 for line in out if line[:1] in "┏┃┡│└")


def test_bad_command_keeps_going(files: tuple[Path, Path]) -> None:
    result = repl(files, "frobnicate now\nstep 0\nrun until soon\nwhy x\nstep\nquit\n")
    assert lines(result.stderr) == [
        "error: unknown command 'frobnicate' (type help)",
        "error: the session count must be at least 1",
        "error: bad time 'soon': give seconds or a number with s, m, h or d",
        "error: bad job id 'x'",
    ]
    assert lines(result.stdout) == [
        "ran 1 session; session 1 at t=0: 1 dispatched, 0 pending, 1 running"
    ]
    assert result.exit_code == 1  # script mode: some command failed


def test_end_of_input_quits(files: tuple[Path, Path]) -> None:
    result = repl(files, "run\nwhy 2\nwhy 99")
    assert result.exit_code == 1
    out = lines(result.stdout)
    assert out[0].endswith("; 0 pending, 0 running; the workload is done")
    assert out[1] == "Job 2: finished"
    assert lines(result.stderr) == ["error: job 99 is not in the workload"]


def simulator(files: tuple[Path, Path]) -> Simulator:
    cluster, jobs = files
    return Simulator(load_config(cluster), load_workload(jobs))


def session(sim: Simulator) -> tuple[Repl, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=80)
    return Repl(sim, console, console), out


def test_record_mid_run_replays(files: tuple[Path, Path], tmp_path: Path) -> None:
    sim = simulator(files)
    shell, out = session(sim)
    path = tmp_path / "mid.jsonl"
    for command in ("set policy persistence 600", "run for 1h", f"record {path}", "run",
                    "record stop"):
        shell.execute(command)
    assert shell.failed == 0, out.getvalue()
    assert "events that rebuild the current state" in out.getvalue()
    first = next(read_recording(path))[2]
    assert type(first).__name__ == "ConfigLoaded"
    report = replay(path)
    assert report.divergence is None
    assert report.sessions > 3


TOKENS_CLUSTER = """\
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts: [{name: "n[1-4]", slots: 4}]
shared: {vcs: {total: 2}}
catalog:
  countables: [{resource: vcs, max_borrow: 6, idle_time: 300}]
policy: {persistence: 60}
simulation:
  countables: {vcs: {grant_delay: 30}}
"""

TOKENS_JOBS = """\
jobs:
  - {ids: "1-6", submit: 0, run: 1000, n: 1, res: "rusage[vcs=1]"}
  - {ids: "7-12", submit: 3000, run: 500, n: 1, res: "rusage[vcs=1]"}
"""


def test_record_with_tokens(tmp_path: Path) -> None:
    """Started while tokens are borrowed (their use history is part of the rebuilt
    state), the recording replays through idle time, return, the next borrow and its
    return."""
    (tmp_path / "cluster.yaml").write_text(TOKENS_CLUSTER)
    (tmp_path / "jobs.yaml").write_text(TOKENS_JOBS)
    sim = simulator((tmp_path / "cluster.yaml", tmp_path / "jobs.yaml"))
    shell, out = session(sim)
    path = tmp_path / "tokens.jsonl"
    shell.execute("run for 5m")
    assert sim.borrowed["vcs"] == 4
    shell.execute(f"record {path}")
    shell.execute("run")
    shell.close()
    assert shell.failed == 0, out.getvalue()
    assert sim.metrics.tokens_borrowed == 8  # borrowed again after the recording started
    report = replay(path)
    assert report.divergence is None
    idle = [item for _, _, item in read_recording(path)
            if isinstance(item, SessionRecord) and item.outputs["idle"]["resources"]]
    assert idle  # sessions that saw idle borrowed tokens were replayed too


def test_rebuilt_state_keeps_the_use_history_of_borrowed_tokens() -> None:
    """A recording started mid-run (or a snapshot) rebuilds the pool's recent use, so
    idle borrowed tokens are judged the same after the rebuild."""
    text = """\
    resources:
      vcs: {type: numeric, consumable: true, shared: true}
    hosts: [{name: n1, slots: 4}]
    shared: {vcs: {total: 2}}
    catalog:
      countables: [{resource: vcs, max_borrow: 10, idle_time: 300}]
    """
    state = SchedulerState(load_config_text(textwrap.dedent(text)))
    state.apply(SupplyChanged(borrowed={"vcs": 3}, time=10))
    state.apply(JobSubmitted(job=JobSpec(id=1, res="rusage[vcs=4]")))
    state.apply(JobStarted(job=1, hosts={"n1": 1}, time=100))
    state.apply(JobFinished(job=1, time=200))
    rebuilt = SchedulerState()
    rebuilt.apply_all(state_events(state))
    assert rebuilt.pools["vcs"][0].history == state.pools["vcs"][0].history
    for now in (250, 450, 520):
        assert run_session(rebuilt, now).idle == run_session(state, now).idle, now


def test_summary_twice_is_the_same(files: tuple[Path, Path]) -> None:
    sim = simulator(files)
    shell, _ = session(sim)
    shell.execute("run for 2h")
    first, second = shell._summary(), shell._summary()
    assert first["host_hours"] == second["host_hours"]
    shell.execute("run")
    assert shell._summary()["host_hours"] == sim.summary()["host_hours"]


def test_times() -> None:
    assert parse_time("90") == 90
    assert parse_time("10m") == 600
    assert parse_time("2h") == 7200
    assert parse_time("1.5d") == 129600
    with pytest.raises(ReplError):
        parse_time("-5")
    assert show_time(59) == "t=59"
    assert show_time(90061) == "t=90061 (1d1h1m1s)"
    assert show_time(12.5) == "t=12.5"


def test_info_jobs_pending_shows_expected_starts(files: tuple[Path, Path]) -> None:
    """Pending jobs with a reservation in the last session show when they are expected
    to start (the session result's `reservations`; here put there by hand), grouped
    by reason and start; `why` says where. (Without any, the table has no such
    column.)"""
    sim = simulator(files)
    out = io.StringIO()
    console = Console(file=out, width=160)
    shell = Repl(sim, console, console)
    shell.execute("run for 1h")
    result = sim.last_result
    assert result is not None and all(r.virtual for r in result.reservations)
    result.reservations = [
        Reservation(job=2, start=5400.0, hosts={"n1": 4}, end=6000.0),
        Reservation(job=3, start=3900.0, hosts={"cloud-1": 4}, virtual=True),
    ]
    out.truncate(0)
    out.seek(0)
    shell.execute("info jobs pending")
    shell.execute("why 3")
    assert shell.failed == 0, out.getvalue()
    reason = "Waiting for provisioning: fits on template cloud (2 new hosts requested this session)"
    table = rows(out.getvalue())
    assert "EXPECTED START" in out.getvalue()
    assert table[:2] == [  # in scheduling order
        ["2", "1", reason, "5400 (1h30m)"],
        ["3", "1", reason, "3900 (1h5m) virtual"],
    ]
    assert "  expected start: 3900 (1h5m) virtual on 4*cloud-1" in lines(out.getvalue())
