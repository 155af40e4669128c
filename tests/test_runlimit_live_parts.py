"""Run limits in the live system, part by part (the whole, with real processes, is in
test_live_runlimit.py): `-W` parsing, the agent's own enforcement, the controller's
checks at submit, its backstop, the reservation it shows and when it runs the next
session."""

from __future__ import annotations

import asyncio
import math
import os
import pwd
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from xce.agent import jobfiles
from xce.agent.jobs import JobStore, signal_job
from xce.cli.runlimit import RunLimitError, limit_text, parse_run_limit
from xce.config.loader import load_config_text
from xce.controller import sessions
from xce.controller.app import job_info
from xce.controller.auth import Identity
from xce.controller.core import Controller, Settings
from xce.controller.problems import ApiProblem
from xce.controller.runlimits import MIN_SESSION_GAP, session_delay
from xce.controller.store import SqliteStore
from xce.model.api import (
    RUN_LIMIT_REACHED,
    Heartbeat,
    JobReport,
    Launch,
    RegisterRequest,
    SubmitRequest,
)
from xce.model.result import (
    Demand,
    Idle,
    Reservation,
    SessionResult,
    SessionStats,
)
from xce.sched.state import SchedulerState

T = TypeVar("T")
ME = pwd.getpwuid(os.getuid()).pw_name
ADMIN = Identity("root-admin", "admin")
CONFIG = """\
cluster: t
session_interval: 10
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30, max_run_limit: 3600}
  - {name: short, priority: 20, run_limit: 60}
  - {name: free, priority: 10}
"""


def wait_for(probe: Callable[[], T | None], timeout: float = 6.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- -W [hh:]mm
@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 5400), ("1:30", 5400), ("0:01", 60), ("01:05", 3900), ("2:0", 7200),
])
def test_W_is_minutes_or_hours_and_minutes(text: str, seconds: float) -> None:
    assert parse_run_limit(text) == seconds


@pytest.mark.parametrize("text", ["abc", "1:99", "-5", "", "0", "0:00", "1:", ":30",
                                  " 5", "1.5", "1:30:00", "\u0663"])
def test_malformed_W_is_refused(text: str) -> None:
    with pytest.raises(RunLimitError, match="run limit"):
        parse_run_limit(text)


def test_limits_show_in_minutes_or_seconds() -> None:
    assert [limit_text(s) for s in (3600, 90, 2, 7.5)] == ["60.0 min", "1.5 min", "2 s",
                                                           "7.5 s"]


# ---------------------------------------------------------------- next session
def test_the_next_session_comes_at_next_due_when_it_is_sooner() -> None:
    assert session_delay(10, 100, math.inf) == 10
    assert session_delay(10, 100, 103.5) == 3.5
    assert session_delay(10, 100, 150) == 10
    assert session_delay(10, 100, 99) == MIN_SESSION_GAP, "never a busy loop"
    assert session_delay(0.01, 100, 99) == 0.01, "never slower than the interval"


# ---------------------------------------------------------------- the agent
@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    made = JobStore(tmp_path / "state", kill_grace=0.5)
    yield made
    for pids in tmp_path.rglob(jobfiles.PIDS):
        signal_job(pids.parent, signal.SIGKILL)


def _launch(job: int, script: str, cwd: Path, run_limit: float | None) -> Launch:
    return Launch(job=job, user=ME, command=["sh", "-c", script], hosts={"h1": 1}, run=True,
                  cwd=str(cwd), run_limit=run_limit)


def _ended(store: JobStore, job: int) -> Callable[[], JobReport | None]:
    def probe() -> JobReport | None:
        store.enforce_limits()
        store.escalate()
        return next((r for r in store.finished() if r.job == job), None)

    return probe


def test_the_agent_ends_a_job_at_its_limit(store: JobStore, tmp_path: Path) -> None:
    began = time.monotonic()
    store.start(_launch(1, "sleep 60", tmp_path, 0.5))
    report = wait_for(_ended(store, 1))
    assert (report.signal, report.exit_code, report.reason) == (15, 143, RUN_LIMIT_REACHED)
    assert 0.5 <= time.monotonic() - began < 3


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(store: JobStore,
                                                          tmp_path: Path) -> None:
    store.start(_launch(2, "trap '' TERM; sleep 60", tmp_path, 0.3))
    report = wait_for(_ended(store, 2))
    assert (report.signal, report.exit_code, report.reason) == (9, 137, RUN_LIMIT_REACHED)
    assert report.run_time >= 0.3 + 0.5 - 0.1, "SIGKILL only once the grace is over"


def test_without_a_limit_the_agent_lets_a_job_run(store: JobStore, tmp_path: Path) -> None:
    store.start(_launch(3, "sleep 1; exit 3", tmp_path, None))
    report = wait_for(_ended(store, 3))
    assert (report.exit_code, report.reason) == (3, "")


def test_a_job_that_ends_within_its_limit_has_no_reason(store: JobStore,
                                                        tmp_path: Path) -> None:
    store.start(_launch(4, "exit 0", tmp_path, 30))
    report = wait_for(_ended(store, 4))
    assert (report.exit_code, report.signal, report.reason) == (0, None, "")


def test_the_limit_survives_an_agent_restart(tmp_path: Path, store: JobStore) -> None:
    store.start(_launch(5, "sleep 60", tmp_path, 0.6))
    wait_for(lambda: (store.directory(5) / jobfiles.PIDS).exists())
    again = JobStore(tmp_path / "state", kill_grace=0.5)  # a new agent, same state
    report = wait_for(_ended(again, 5))
    assert report.reason == RUN_LIMIT_REACHED


# ---------------------------------------------------------------- the controller
def _controller(tmp_path: Path, clock: Clock, **settings: Any) -> Controller:
    return Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"),
                      Settings(heartbeat_interval=2, **settings), clock)


def _run(tmp_path: Path, clock: Clock, body: Callable[[Controller], Any],
         **settings: Any) -> None:
    async def main() -> None:
        ctl = _controller(tmp_path, clock, **settings)
        await ctl.start()
        try:
            await body(ctl)
        finally:
            await ctl.close()
            ctl.store.close()

    asyncio.run(main())


def _request(**fields: Any) -> SubmitRequest:
    return SubmitRequest(command=["sleep", "60"], **fields)


def test_submit_refuses_a_limit_above_the_queue_maximum(tmp_path: Path) -> None:
    async def body(ctl: Controller) -> None:
        for limit, message in ((7200, "exceeds queue normal's max_run_limit 3600 s"),
                               (-5, "run limit")):
            with pytest.raises(ApiProblem, match=message) as refused:
                await ctl.submit(ADMIN, _request(run_limit=limit))
            assert refused.value.status == 400
        assert ctl.view.jobs == {}, "nothing submitted"
        job, _ = await ctl.submit(ADMIN, _request(run_limit=3600))
        assert ctl.view.jobs[job].spec.run_limit == 3600

    _run(tmp_path, Clock(), body)


def test_a_job_shows_its_own_limit_else_its_queues_default(tmp_path: Path) -> None:
    async def body(ctl: Controller) -> None:
        own, _ = await ctl.submit(ADMIN, _request(run_limit=120))
        queued, _ = await ctl.submit(ADMIN, _request(queue="short"))
        # normal has max_run_limit only: LSF's RUNLIMIT with one value, every job's
        capped, _ = await ctl.submit(ADMIN, _request())
        free, _ = await ctl.submit(ADMIN, _request(queue="free"))
        shown = {j: job_info(ctl, ctl.job(j)).run_limit for j in (own, queued, capped, free)}
        assert shown == {own: 120, queued: 60, capped: 3600, free: None}

    _run(tmp_path, Clock(), body)


def test_the_controller_ends_a_job_its_agent_did_not(tmp_path: Path) -> None:
    clock = Clock()

    async def body(ctl: Controller) -> None:
        await ctl.register("n1", RegisterRequest(slots=2))
        job, _ = await ctl.submit(ADMIN, _request(run_limit=10))
        await ctl.run_session()
        await asyncio.sleep(0.05)  # the dispatch made durable
        reply = await ctl.heartbeat("n1", Heartbeat())
        assert [launch.run_limit for launch in reply.start] == [10], "the agent is told"
        await ctl.heartbeat("n1", Heartbeat(running=[job]))
        clock.now += 10 + 4.9
        await ctl.watch_limits()
        assert ctl.job(job).state == "RUN", "the agent still has time to end it"
        clock.now += 0.2
        await ctl.watch_limits()
        ended = ctl.job(job)
        assert (ended.state, ended.exit_reason, ended.exit_code) == (
            "EXIT", RUN_LIMIT_REACHED, -1)
        reply = await ctl.heartbeat("n1", Heartbeat(running=[job]))
        assert reply.kill == [job], "what still runs is killed"

    _run(tmp_path, clock, body, limit_grace=5)


def test_an_agents_report_at_the_limit_ends_the_job_exit(tmp_path: Path) -> None:
    async def body(ctl: Controller) -> None:
        await ctl.register("n1", RegisterRequest(slots=2))
        job, _ = await ctl.submit(ADMIN, _request(run_limit=10))
        other, _ = await ctl.submit(ADMIN, _request(run_limit=10))
        await ctl.run_session()
        await asyncio.sleep(0.05)
        await ctl.heartbeat("n1", Heartbeat(running=[job, other]))
        await ctl.heartbeat("n1", Heartbeat(finished=[
            JobReport(job, 0, None, 10, 0, RUN_LIMIT_REACHED),  # caught TERM, exit 0
            JobReport(other, 143, 15, 10, 0, "anything else"),
        ]))
        assert (ctl.job(job).state, ctl.job(job).exit_reason) == ("EXIT", RUN_LIMIT_REACHED)
        assert (ctl.job(other).state, ctl.job(other).exit_reason) == ("EXIT", ""), \
            "only the reasons an agent may give are kept"
        clock_job = ctl.job(job)
        assert clock_job.exit_code == 0 and clock_job.signal is None

    _run(tmp_path, Clock(), body)


def test_a_reservation_and_next_due_come_from_the_last_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    planned: dict[str, Any] = {}

    def session(state: SchedulerState, now: float) -> SessionResult:
        return SessionResult(now, [], [], [], Demand(), Idle(), SessionStats(),
                             reservations=[Reservation(planned["job"], now + 300,
                                                       {"n1": 2}, now + 900)],
                             next_due=now + 3)

    monkeypatch.setattr(sessions, "run_session", session)

    async def body(ctl: Controller) -> None:
        assert ctl.session_delay() == 10, "no session yet: the interval"
        planned["job"], _ = await ctl.submit(ADMIN, _request(n=2, run_limit=600))
        await ctl.run_session()
        info = job_info(ctl, ctl.job(planned["job"]))
        assert (info.expected_start, info.reserved_hosts) == (clock.now + 300, {"n1": 2})
        assert ctl.session_delay() == pytest.approx(3)
        clock.now += 2
        assert ctl.session_delay() == pytest.approx(1)

    _run(tmp_path, clock, body)


def test_jobs_l_shows_limit_reservation_and_reason() -> None:
    from xce.cli.client_cmds import job_long
    from xce.model.api import JobInfo

    pending = JobInfo(id=3, user="a", queue="normal", state="PEND", n=2, res="", name="",
                      command=["sleep", "60"], submit_time=1e9, run_limit=3600.0,
                      pend_reason="Reserved", expected_start=1e9 + 100,
                      reserved_hosts={"n1": 2, "n2": 1})
    text = "\n".join(job_long(pending))
    assert " RUNLIMIT 60.0 min" in text
    assert f"Expected to start at {time.ctime(1e9 + 100)[:19]} on Host(s) <2*n1> <n2>;" in text
    ended = JobInfo(id=4, user="a", queue="normal", state="EXIT", n=1, res="", name="",
                    command=["sleep", "60"], submit_time=1e9, start_time=1e9, end_time=1e9 + 2,
                    exec_hosts={"n1": 1}, exit_code=143, signal=15,
                    exit_reason=RUN_LIMIT_REACHED, run_limit=2.0)
    text = "\n".join(job_long(ended))
    assert "RUNLIMIT 2 s" in text and "Exited by signal 15: run limit reached." in text
    assert "\n\n\n" not in text and not text.endswith("\n")


def test_malformed_W_is_refused_before_anything_is_sent() -> None:
    from click.testing import CliRunner

    from xce.cli import client_cmds

    for bad in ("abc", "1:99", "-5", ""):
        # No controller listens there: refused before any request is made.
        refused = CliRunner().invoke(
            client_cmds.submit, ["-W", bad, "sleep", "1"],
            env={"XCE_TOKEN": "t", "XCE_CONTROLLER": "http://127.0.0.1:9"})
        assert refused.exit_code == 2, refused.output
        assert f"{bad!r} is not a run limit" in refused.output


def test_after_a_restart_the_agent_gets_a_fresh_grace(tmp_path: Path) -> None:
    clock = Clock()

    async def main() -> None:
        first = _controller(tmp_path, clock, limit_grace=5)
        await first.start()
        await first.register("n1", RegisterRequest(slots=2))
        job, _ = await first.submit(ADMIN, _request(run_limit=10))
        await first.run_session()
        await asyncio.sleep(0.05)
        await first.close()
        first.store.close()

        clock.now += 100  # the controller was down past the limit and the grace
        second = _controller(tmp_path, clock, limit_grace=5)
        await second.start()
        try:
            await second.watch_limits()
            assert second.job(job).state == "RUN", "no agent could report meanwhile"
            clock.now += 5
            await second.watch_limits()
            assert second.job(job).exit_reason == RUN_LIMIT_REACHED
        finally:
            await second.close()
            second.store.close()

    asyncio.run(main())
