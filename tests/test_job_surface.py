"""The job surface (issue 21: 1), in parts: the shim's failures and CPU time, the agent's
failure reasons and output tails, the controller's accounting records (kept across a
restart, in a store table of their own) and a job's life from the log, the summaries
per user and queue, and the CLI's words for all of it."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import pwd
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from xce.agent import jobfiles
from xce.agent.daemon import OUTPUT_BUDGET, Agent, AgentSettings
from xce.agent.jobfiles import Status
from xce.agent.jobs import LOST_EXIT_CODE, failure_of
from xce.agent.peek import job_output, tail
from xce.atomic_json import write_atomic
from xce.cli.client_cmds import ending_text
from xce.cli.job_cmds import acct_lines, event_line, history_lines, output_lines
from xce.cli.units import TimeError, parse_time
from xce.config import load_config_text
from xce.controller.accounting import failure_text, summary
from xce.controller.auth import Identity
from xce.controller.core import Controller, Settings
from xce.controller.job_history import job_history
from xce.controller.store import Fact, SqliteStore
from xce.model.api import (
    PEEK_BYTES,
    Heartbeat,
    JobEvent,
    JobHistory,
    JobOutput,
    JobReport,
    Launch,
    OutputTail,
    RegisterRequest,
    SubmitRequest,
)
from xce.model.durations import duration_text
from xce.model.events import (
    JobAccounted,
    JobFinished,
    JobHeld,
    JobKilled,
    JobRequeued,
    JobStarted,
    JobSubmitted,
)
from xce.model.jobs import JobSpec

ME = pwd.getpwuid(os.getuid()).pw_name
CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30}
  - {name: night, priority: 10}
"""


def run_shim(jobdir: Path, job: Launch) -> Status:
    jobdir.mkdir(parents=True, exist_ok=True)
    write_atomic(jobdir / jobfiles.LAUNCH, job)
    subprocess.run([sys.executable, "-m", "xce.agent.shim", str(jobdir)], check=True, timeout=10)
    status = jobfiles.read(jobdir / jobfiles.STATUS, Status)
    assert status is not None
    return status


def launch(job: int, command: list[str], cwd: Path, **fields: object) -> Launch:
    return Launch(job, ME, command, {"n7": 1}, True, cwd=str(cwd), **fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the shim and the agent
def test_the_shim_says_why_a_job_could_not_start(tmp_path: Path) -> None:
    status = run_shim(tmp_path / "a", launch(1, ["no-such-command-xce"], tmp_path))
    assert (status.exit_code, status.failure) == (127, "command 'no-such-command-xce' not "
                                                       "found on n7")
    assert "cannot run 'no-such-command-xce'" in (tmp_path / "a" / "stdout").read_text(), \
        "the job's error file says it too, as before"
    gone = tmp_path / "gone"
    status = run_shim(tmp_path / "b", launch(2, ["true"], gone))
    assert status.failure == (f"cannot change to directory '{gone}' on n7: "
                              "No such file or directory")
    status = run_shim(tmp_path / "c", launch(3, ["true"], tmp_path, output="no/dir/out"))
    assert status.failure == (f"cannot open output file '{tmp_path}/no/dir/out' on n7: "
                              "No such file or directory")
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    status = run_shim(tmp_path / "d", launch(4, [str(script)], tmp_path))
    assert status.failure == f"cannot run '{script}' on n7: Permission denied"
    ok = run_shim(tmp_path / "e", launch(5, ["sh", "-c", "exit 4"], tmp_path))
    assert (ok.exit_code, ok.failure) == (4, ""), "a job that ran has no failure"


@pytest.mark.skipif(os.geteuid() != 0, reason="only a shim running as root looks users up")
def test_the_shim_names_an_unknown_user_and_its_host(tmp_path: Path) -> None:
    job = msgspec.structs.replace(launch(6, ["true"], tmp_path), user="nosuchuser-xce")
    status = run_shim(tmp_path / "job", job)
    assert (status.exit_code, status.failure) == (
        127, "unknown user 'nosuchuser-xce' on n7 (the user must exist on the execution hosts)")


def test_the_shim_measures_the_cpu_time_of_the_job(tmp_path: Path) -> None:
    busy = ("import time\nend = time.process_time() + 0.4\n"
            "while time.process_time() < end: pass")
    status = run_shim(tmp_path / "job", launch(7, [sys.executable, "-c", busy], tmp_path))
    assert status.exit_code == 0
    assert 0.4 <= status.cpu_time < 2.0
    idle = run_shim(tmp_path / "idle", launch(8, ["sleep", "0.3"], tmp_path))
    assert idle.cpu_time < 0.2, "sleeping uses no CPU"


def test_the_agent_names_signals_it_did_not_send_and_lost_jobs() -> None:
    job = Launch(9, ME, ["x"], {"n3": 2, "n4": 2}, True)
    killed = Status(139, 11, 0.0, 1.0, 1.0)
    assert failure_of(killed, job, ended_by_xce=False) == "SIGSEGV (Segmentation fault) on n3"
    assert failure_of(killed, job, ended_by_xce=True) == "", "a kill or the run limit: no failure"
    lost = Status(LOST_EXIT_CODE, None, 0.0, 0.0, 0.0)
    assert failure_of(lost, job, ended_by_xce=False).startswith("lost on n3: its shim ended")
    started = Status(127, None, 0.0, 0.0, 0.0, failure="command 'x' not found on n3")
    assert failure_of(started, job, ended_by_xce=False) == "command 'x' not found on n3"
    assert failure_of(Status(3, None, 0.0, 1.0, 1.0), job, ended_by_xce=False) == ""


def test_an_output_tail_is_read_only_from_the_jobs_own_regular_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_bytes(b"x" * 100 + b"the end\n")
    uid = os.geteuid()
    assert tail(str(out), uid) == OutputTail(str(out), 108, "x" * 100 + "the end\n")
    assert tail(str(out), uid, most=8) == OutputTail(str(out), 108, "the end\n")
    assert "another user" in tail(str(out), uid + 1).unreadable, "not the job user's: not shown"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert tail(str(fifo), uid).unreadable == "not a regular file: not shown", "never blocks"
    assert tail("/dev/null", 0).unreadable == "not a regular file: not shown"
    assert tail(str(tmp_path / "none"), uid).unreadable == \
        "cannot open it: No such file or directory"
    link = tmp_path / "link"
    link.symlink_to("/etc/passwd")
    if uid != 0:
        assert "another user" in tail(str(link), uid).unreadable


def test_job_output_of_a_job_directory(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    assert job_output(jobdir, 5, "n1").unreadable == "job 5 is not running on n1"
    write_atomic(jobdir / jobfiles.LAUNCH, launch(5, ["x"], tmp_path, output="o.%J",
                                                  error="e.%J"))
    (tmp_path / "o.5").write_text("out\n")
    output = job_output(jobdir, 5, "n1")
    assert output.stdout == OutputTail(str(tmp_path / "o.5"), 4, "out\n")
    assert output.stderr is not None and output.stderr.unreadable.startswith("cannot open")
    held = msgspec.structs.replace(launch(6, ["x"], tmp_path), run=False,
                                   hosts={"n0": 1, "n1": 1})
    write_atomic(jobdir / jobfiles.LAUNCH, held)
    assert job_output(jobdir, 6, "n1").unreadable == \
        "job 6 only holds slots on n1: its command runs on n0"


# ---------------------------------------------------------------- the controller
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_accounting_records_are_written_with_the_end_and_kept(tmp_path: Path) -> None:
    """A job that failed on its host, one killed while pending: each end fact brings
    its accounting record into the same commit; the failure shows in the job, and both
    come back after a restart (from the log, then from a snapshot)."""
    config = load_config_text(CONFIG)
    admin = Identity("root", "admin")
    clock = Clock()

    async def main() -> None:
        ctl = Controller(config, SqliteStore(tmp_path / "xce.db"), Settings(), clock)
        await ctl.start()
        await ctl.register("n1", RegisterRequest(slots=2))
        ran, _ = await ctl.submit(admin, SubmitRequest(command=["x"], user="bob"))
        pending, _ = await ctl.submit(admin, SubmitRequest(command=["y"], hold=True))
        clock.now += 2
        await ctl.run_session()
        assert ctl.view.jobs[ran].state == "RUN"
        clock.now += 1
        ctl.hosts.launchable.add(ran)
        report = JobReport(ran, 127, None, 0.0, clock.now,
                           failure="unknown user 'bob' on n1 (the user\nmust exist)\x07",
                           cpu_time=0.25)
        await ctl.heartbeat("n1", Heartbeat(finished=[report]))
        await ctl.kill(admin, pending)
        job = ctl.view.jobs[ran]
        assert (job.state, job.failure, job.cpu_time) == (
            "EXIT", "unknown user 'bob' on n1 (the user must exist)", 0.25)
        records = ctl.store.accounting()
        assert [(r.job, r.user, r.state, r.failure, r.cpu_time, r.start is None)
                for r in records] == [
            (ran, "bob", "EXIT", job.failure, 0.25, False),
            (pending, "root", "EXIT", "", None, True)]
        assert ctl.store.job_accounting(pending) == records[1]
        assert ctl.store.accounting(user="bob") == records[:1]
        assert ctl.store.accounting(since=clock.now + 1) == []
        facts = list(ctl.store.read())
        kinds = [type(f.event).__name__ for f in facts]
        at = kinds.index("JobKilled")
        assert kinds[at + 1] == "JobAccounted" and facts[at].seq + 1 == facts[at + 1].seq
        await ctl.close()
        ctl.store.close()
        for snapshot in (False, True):
            again = Controller(config, SqliteStore(tmp_path / "xce.db"), Settings(), clock)
            await again.start()
            assert again.view.jobs[ran].failure == job.failure
            assert again.view.jobs[ran].cpu_time == 0.25
            if snapshot:
                await again.snapshot()
            await again.close()
            again.store.close()

    asyncio.run(main())


def test_an_old_store_gets_the_accounting_table(tmp_path: Path) -> None:
    """A store made before accounting (no such table) opens, and gets it."""
    path = tmp_path / "xce.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE accounting")
    with SqliteStore(path) as store:
        assert store.accounting() == []
        store.append(5.0, [JobKilled(3, 5.0),
                           JobAccounted(3, "u", "normal", "EXIT", 1.0, 5.0, time=5.0)])
        assert [r.job for r in store.accounting()] == [3]
        assert [f.seq for f in store.read_from_time(5.0)] == [1, 2]
        assert list(store.read_from_time(6.0)) == []


def record(job: int, user: str, queue: str, state: str, submit: float, start: float | None,
           end: float, cpu: float | None = None) -> JobAccounted:
    return JobAccounted(job, user, queue, state, submit, end, start, cpu_time=cpu)


def test_the_summary_per_user_and_queue() -> None:
    records = [
        record(1, "bob", "normal", "DONE", 0, 10, 70, 30.0),
        record(2, "bob", "normal", "EXIT", 0, 30, 40, 1.0),
        record(3, "al", "night", "DONE", 100, 100, 3700, None),
        record(4, "bob", "normal", "EXIT", 50, None, 60),  # killed while pending
    ]
    found = summary(records, 0.0, None)
    assert [(r.user, r.queue) for r in found.rows] == [("al", "night"), ("bob", "normal")]
    bob = found.rows[1]
    assert (bob.done, bob.exited, bob.cpu_time, bob.wall_time) == (1, 2, 31.0, 70.0)
    assert (bob.wait_mean, bob.wait_max) == (20.0, 30.0), "the two that started"
    assert (bob.turnaround_mean, bob.turnaround_max) == (40.0, 70.0)
    assert (found.total.done, found.total.exited, found.total.wall_time) == (2, 2, 3670.0)
    only = summary(records, None, None, queue="night")
    assert [r.user for r in only.rows] == ["al"] and only.total.done == 1
    empty = summary([], None, None)
    assert (empty.rows, empty.total.wait_mean, empty.total.turnaround_mean) == ([], None, 0.0)


def test_a_failure_reason_is_kept_as_one_printable_line() -> None:
    assert failure_text("a\nb\tc\x1b[31m  d") == "a b c [31m d"
    assert len(failure_text("x" * 5000)) == 1000


def test_a_jobs_life_from_the_log(tmp_path: Path) -> None:
    spec = JobSpec(id=4, user="al", queue="normal", submit=10.0, hold=True, command=["x"])
    facts = [
        Fact(1, 10.0, JobSubmitted(spec)),
        Fact(2, 11.0, JobSubmitted(JobSpec(id=5, submit=11.0))),
        Fact(3, 14.0, JobHeld(4, held=False)),
        Fact(4, 15.0, JobStarted(4, {"n1": 1}, 15.0)),
        Fact(5, 25.0, JobRequeued(4, 25.0, "host n1 unreachable")),
        Fact(6, 27.0, JobStarted(4, {"n2": 1}, 27.0)),
        Fact(7, 30.0, JobFinished(5, 30.0)),
        Fact(8, 37.0, JobFinished(4, 37.0, exit_code=2)),
        Fact(9, 37.0, JobAccounted(4, "al", "normal", "EXIT", 10.0, 37.0, 27.0, cpu_time=1.5)),
        Fact(10, 40.0, JobFinished(4, 40.0)),  # (never read: the life ended before)
    ]
    life = job_history(facts, 4, now=100.0)
    assert life is not None
    assert [(e.seq, e.kind, e.hosts) for e in life.events] == [
        (1, "submitted", {}), (3, "released", {}), (4, "started", {"n1": 1}),
        (5, "requeued", {"n1": 1}), (6, "started", {"n2": 1}), (8, "finished", {"n2": 1})]
    end = life.events[-1]
    assert (end.state, end.exit_code, end.cpu_time) == ("EXIT", 2, 1.5)
    assert (life.psusp, life.pend, life.run, life.until) == (4.0, 3.0, 20.0, 37.0)
    running = job_history(facts[:6], 4, now=30.0)
    assert running is not None and (running.run, running.until) == (13.0, 30.0)
    assert job_history(facts, 99, now=100.0) is None


# ---------------------------------------------------------------- the CLI's words
def test_the_ending_of_a_job_that_failed_on_its_host() -> None:
    failure = "unknown user 'alice' on n01 (the user must exist on the execution hosts)"
    assert ending_text("EXIT", 127, None, "", failure) == f"Exited: {failure}."
    assert ending_text("EXIT", 139, 11, "", "SIGSEGV (Segmentation fault) on n01") == \
        "Exited by signal 11: SIGSEGV (Segmentation fault) on n01."
    assert ending_text("EXIT", 3, None, "") == "Exited with exit code 3."
    assert ending_text("EXIT", 143, 15, "run limit reached") == \
        "Exited by signal 15: run limit reached."
    assert ending_text("DONE", 0, None, "") == "Done successfully."


def test_peek_history_and_acct_lines() -> None:
    output = JobOutput(3, "n1", OutputTail("/o", 4, "a\nb\n"),
                       OutputTail("/e", 900, "end\n"))
    assert output_lines(output) == [
        "<< output from stdout >>", "a", "b",
        "<< output from stderr (/e on the host: its last 4 of 900 bytes) >>", "end"]
    done = JobEvent(9, 0.0, "finished", {"n1": 1}, state="DONE", exit_code=0, cpu_time=0.25)
    assert event_line(done, 1).endswith(": Done successfully. The CPU time used is 0.2 seconds;")
    requeued = JobEvent(5, 0.0, "requeued", {"n1": 2}, reason="host n1 unreachable")
    assert event_line(requeued, 2).endswith(
        ": Requeued from Host(s) <2*n1>: host n1 unreachable;")
    life = JobHistory(4, "al", "normal", "", ["sleep", "1"], 1, "/w",
                      [JobEvent(1, 0.0, "submitted"), done], 2.0, 0.0, 5.4, 7.4)
    lines = history_lines(life)
    assert lines[0] == "Job <4>, User <al>, Queue <normal>, Command <sleep 1>"
    assert lines[1].endswith(": Submitted, CWD </w>, 1 Task(s) Requested;")
    assert lines[-2:] == ["  PEND  PSUSP  RUN  TOTAL", "     2      0    5      7"]
    records = [record(1, "bob", "normal", "DONE", 0, 10, 70, 30.0)]
    table = acct_lines(summary(records, None, None))
    assert table[0] == "Accounting of the jobs that ended from the start to now: 1 job(s)"
    assert table[2].split() == ["bob", "normal", "1", "0", "30.0s", "1m00s", "10.0s",
                                "10.0s", "1m10s", "1m10s"]
    assert table[3].split()[:2] == ["TOTAL", "-"]


def test_durations_in_human_units() -> None:
    assert [duration_text(s) for s in (0.4, 45.25, 245, 11520, 63_181_100)] == [
        "0.4s", "45.2s", "4m05s", "3h12m", "731d06h"]
    assert duration_text(float("nan")) == "-"


def test_times_on_the_command_line() -> None:
    now = dt.datetime(2026, 11, 29, 18, 40).timestamp()
    assert parse_time("-2h", now) == now - 7200
    assert parse_time("@1764441600", now) == 1764441600.0
    assert parse_time("2026-11-29", now) == dt.datetime(2026, 11, 29).timestamp()
    assert parse_time("2026-11-29T08:30", now) == dt.datetime(2026, 11, 29, 8, 30).timestamp()
    assert parse_time("08:30", now) == dt.datetime(2026, 11, 29, 8, 30).timestamp()
    assert parse_time("27/08:30", now) == dt.datetime(2026, 11, 27, 8, 30).timestamp()
    assert parse_time("2025/10/27/08:30", now) == dt.datetime(2025, 10, 27, 8, 30).timestamp()
    for bad in ("yesterday", "@-1", "25:99", "2026/13/01/00:00"):
        with pytest.raises(TimeError):
            parse_time(bad, now)


def test_one_heartbeat_carries_the_outputs_that_fit() -> None:
    """Big outputs go one by one (the controller asks for the rest again), small ones
    together: a heartbeat stays far below what the controller takes."""
    class Store:
        def output(self, job: int, host: str) -> JobOutput:
            size = PEEK_BYTES if job < 10 else 10
            text = "x" * size
            return JobOutput(job, host, OutputTail("/o", size, text), OutputTail("/e", size, text))

    agent = Agent(AgentSettings("http://ctl:6820", "n1", "t", RegisterRequest()),
                  Store())  # type: ignore[arg-type]
    assert [o.job for o in agent._read_outputs([1, 2, 3])] == [1], "512 KiB: one a beat"
    assert [o.job for o in agent._read_outputs([11, 12, 13])] == [11, 12, 13]
    assert [o.job for o in agent._read_outputs([11, 1, 12])] == [11], "the rest next time"
    assert OUTPUT_BUDGET * 6 < 4 * 1024 * 1024, "even if JSON escaped every character"
