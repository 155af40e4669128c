"""The agent stops and continues a job's process group for the controller (`xce stop`,
`xce resume` of a running job: HeartbeatReply.suspended), keeps that across its own
restart, and a stopped job it is told to kill still ends by its SIGTERM."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_agent import launch, report_of, wait_for

from xce.agent import jobfiles
from xce.agent.jobs import JobStore, signal_job
from xce.agent.suspend import hold_stopped

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the agent runs on Linux only (/proc, flock)")


@pytest.fixture(autouse=True)
def no_stray_jobs(tmp_path: Path) -> Iterator[None]:
    yield
    for pids in tmp_path.rglob(jobfiles.PIDS):
        signal_job(pids.parent, signal.SIGCONT)
        signal_job(pids.parent, signal.SIGKILL)


def state_of(pid: int) -> str:
    """The process state letter of /proc/PID/stat (T: stopped)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0].decode()


def job_pids(store: JobStore, job: int) -> jobfiles.Pids:
    return wait_for(lambda: jobfiles.read(store.directory(job) / jobfiles.PIDS, jobfiles.Pids))


def test_stop_continue_across_an_agent_restart_and_kill_while_stopped(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state", kill_grace=5)
    # a process group of two: the shell and its sleep
    store.start(launch(20, "sleep 60 & echo $! > child; wait", tmp_path))
    leader = job_pids(store, 20).job
    child = int(wait_for(lambda: (tmp_path / "child").exists()
                         and (tmp_path / "child").read_text().strip()))
    assert hold_stopped(store, {20}) == [20]
    wait_for(lambda: state_of(leader) == "T" and state_of(child) == "T")
    assert (store.directory(20) / jobfiles.STOPPED).exists()
    assert store.running() == [20], "a stopped job still runs (its slots are kept)"
    assert hold_stopped(store, {20}) == [20], "listed again: stays stopped"

    restarted = JobStore(tmp_path / "state", kill_grace=5)  # as after an agent restart
    assert hold_stopped(restarted, set()) == [], "no longer listed: continued"
    wait_for(lambda: state_of(leader) != "T" and state_of(child) != "T")
    assert not (store.directory(20) / jobfiles.STOPPED).exists()

    hold_stopped(restarted, {20})
    wait_for(lambda: state_of(leader) == "T")
    began = time.monotonic()
    restarted.kill(20)  # SIGTERM, then SIGCONT so that it is taken
    report = wait_for(lambda: report_of(restarted, 20), timeout=4)
    assert (report.signal, report.exit_code) == (15, 143)
    assert time.monotonic() - began < 5, "ended by its SIGTERM, not by SIGKILL after the grace"
    assert hold_stopped(restarted, {20}) == [], "an ended job is not stopped"


def test_a_job_that_only_holds_slots_is_not_stopped(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state")
    store.start(launch(21, "sleep 60", tmp_path, hosts={"h0": 1, "h1": 1}, run=False))
    assert hold_stopped(store, {21}) == []
    assert not (store.directory(21) / jobfiles.STOPPED).exists()
