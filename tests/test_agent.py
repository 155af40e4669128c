"""The execution agent (xce.agent) with real processes: the shim, the job store, and
the register/heartbeat loop against a small real HTTP controller."""

from __future__ import annotations

import asyncio
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from aiohttp import web

from xce.agent import jobfiles
from xce.agent.daemon import Agent, AgentSettings
from xce.agent.hostspec import HostSpecError, describe_host
from xce.agent.jobfiles import Status
from xce.agent.jobs import LOST_EXIT_CODE, JobStore, StateDirError, signal_job
from xce.atomic_json import write_atomic
from xce.model.api import (
    ApiError,
    Heartbeat,
    HeartbeatReply,
    JobReport,
    Launch,
    Registered,
    RegisterRequest,
)

T = TypeVar("T")
ME = pwd.getpwuid(os.getuid()).pw_name
TOKEN = "s3cret"
# A job that runs until the test creates the file `release` in its directory.
UNTIL_RELEASED = "until [ -e release ]; do sleep 0.02; done; exit {code}"


def launch(job: int, script: str, cwd: Path, **fields: Any) -> Launch:
    """A job of this test's user running `sh -c script` in `cwd`, on one slot."""
    defaults: dict[str, Any] = {"hosts": {"h1": 1}, "run": True, "cwd": str(cwd)}
    return Launch(job=job, user=ME, command=["sh", "-c", script], **(defaults | fields))


def run_shim(jobdir: Path, job: Launch) -> Status:
    """Run the shim in the foreground on a job directory holding `job`."""
    jobdir.mkdir(parents=True, exist_ok=True)
    write_atomic(jobdir / jobfiles.LAUNCH, job)
    subprocess.run([sys.executable, "-m", "xce.agent.shim", str(jobdir)], check=True, timeout=5)
    status = jobfiles.read(jobdir / jobfiles.STATUS, Status)
    assert status is not None, "the shim writes status.json before it exits"
    return status


def wait_for(probe: Callable[[], T | None], timeout: float = 4.0) -> T:
    """The first truthy value of `probe()`, polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def report_of(store: JobStore, job: int) -> JobReport | None:
    return next((r for r in store.finished() if r.job == job), None)


@pytest.fixture(autouse=True)
def no_stray_jobs(tmp_path: Path) -> Iterator[None]:
    """Whatever a failed test leaves running is killed."""
    yield
    for pids in tmp_path.rglob(jobfiles.PIDS):
        signal_job(pids.parent, signal.SIGKILL)


# ---------------------------------------------------------------- the shim
def test_shim_records_exit_code_and_output(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    status = run_shim(jobdir, launch(1, "echo hi; exit 3", tmp_path))
    assert (status.exit_code, status.signal) == (3, None)
    assert status.end >= status.start and status.run_time >= 0
    assert (jobdir / "stdout").read_text() == "hi\n", "default output: JOBDIR/stdout"
    pids = jobfiles.read(jobdir / jobfiles.PIDS, jobfiles.Pids)
    assert pids is not None and pids.shim != pids.job


def test_shim_gives_the_job_its_environment_and_files(tmp_path: Path) -> None:
    script = (
        'echo "$LSB_JOBID|$XCE_JOBID|$LSB_HOSTS|$LSB_MCPU_HOSTS|$LSB_QUEUE|$LSB_JOBNAME|'
        '$FROM_SUBMIT|$(pwd)"; echo oops >&2'
    )
    job = launch(
        42,
        script,
        tmp_path,
        hosts={"h1": 2, "h2": 1},
        queue="normal",
        name="sim",
        env={"FROM_SUBMIT": "yes"},
        output="out.%J",
        error=str(tmp_path / "err.%J"),
    )
    assert run_shim(tmp_path / "job", job).exit_code == 0
    assert (tmp_path / "out.42").read_text() == (
        f"42|42|h1 h1 h2|h1 2 h2 1|normal|sim|yes|{tmp_path}\n"
    ), "LSF variables, the submission environment, the working directory"
    assert (tmp_path / "err.42").read_text() == "oops\n", "stderr in its own file"


def test_shim_stderr_goes_with_stdout_by_default(tmp_path: Path) -> None:
    job = launch(2, "echo out; echo err >&2", tmp_path, output="both")
    run_shim(tmp_path / "job", job)
    assert (tmp_path / "both").read_text() == "out\nerr\n"


def test_command_that_cannot_start_exits_127(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    job = Launch(3, ME, ["no-such-command-xce"], {"h1": 1}, run=True, cwd=str(tmp_path))
    assert run_shim(jobdir, job).exit_code == 127
    assert "cannot run 'no-such-command-xce'" in (jobdir / "stdout").read_text()

    missing = launch(4, "true", tmp_path / "gone")
    assert run_shim(jobdir, missing).exit_code == 127, "a missing directory: 127 too"
    assert "cannot change to directory" in (jobdir / "stdout").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_shim_as_root_runs_the_job_as_its_user(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    jobdir = tmp_path / "job"
    job = msgspec.structs.replace(launch(5, "id -u", Path("/")), user="nobody")
    assert run_shim(jobdir, job).exit_code == 0
    output = jobdir / "stdout"
    assert output.read_text() == f"{nobody.pw_uid}\n"
    assert output.stat().st_uid == nobody.pw_uid, "the default output belongs to the user"


def test_shim_forwards_sigterm_to_the_job(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state")
    store.start(launch(6, "sleep 60", tmp_path))
    pids = wait_for(lambda: jobfiles.read(store.directory(6) / jobfiles.PIDS, jobfiles.Pids))
    os.kill(pids.shim, signal.SIGTERM)
    report = wait_for(lambda: report_of(store, 6))
    assert (report.signal, report.exit_code) == (15, 143), "the job got it, the shim reported"


# ---------------------------------------------------------------- the job store
def test_kill_ends_a_job_with_sigterm_within_the_grace(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state", kill_grace=5)
    store.start(launch(10, "sleep 60", tmp_path))
    wait_for(lambda: (store.directory(10) / jobfiles.PIDS).exists())
    began = time.monotonic()
    store.kill(10)
    report = wait_for(lambda: report_of(store, 10))
    assert (report.signal, report.exit_code) == (15, 143)
    assert time.monotonic() - began < 5, "ended by SIGTERM, not by SIGKILL after the grace"


def test_kill_sends_sigkill_after_the_grace(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state", kill_grace=0.3)
    store.start(launch(11, "trap '' TERM; touch ready; sleep 60", tmp_path))
    wait_for(lambda: (tmp_path / "ready").exists())
    store.kill(11)

    def escalated() -> JobReport | None:
        store.escalate()
        return report_of(store, 11)

    report = wait_for(escalated)
    assert (report.signal, report.exit_code) == (9, 137), "SIGTERM ignored: SIGKILL"


def test_start_is_idempotent(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state")
    job = launch(12, "echo once >> runs", tmp_path)
    assert store.start(job)
    assert not store.start(job), "a job already started is not started again"
    wait_for(lambda: report_of(store, 12))
    assert (tmp_path / "runs").read_text() == "once\n"


def test_reopened_store_still_sees_its_jobs(tmp_path: Path) -> None:
    JobStore(tmp_path / "state").start(launch(13, UNTIL_RELEASED.format(code=4), tmp_path))
    reopened = JobStore(tmp_path / "state")  # as after an agent restart
    assert reopened.running() == [13]
    assert reopened.finished() == []
    (tmp_path / "release").touch()
    report = wait_for(lambda: report_of(reopened, 13))
    assert report.exit_code == 4
    assert reopened.running() == []
    reopened.ack([13])
    assert reopened.finished() == [] and reopened.jobs() == [], "acknowledged: forgotten"


def test_shim_survives_sigkill_of_the_agent(tmp_path: Path) -> None:
    state = tmp_path / "state"
    job = launch(14, UNTIL_RELEASED.format(code=5), tmp_path)
    agent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, msgspec; from pathlib import Path;"
            "from xce.agent.jobs import JobStore; from xce.model.api import Launch;"
            "JobStore(Path(sys.argv[1])).start(msgspec.json.decode(sys.argv[2], type=Launch));"
            "print('started', flush=True); time.sleep(60)",
            str(state),
            msgspec.json.encode(job).decode(),
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert agent.stdout is not None and agent.stdout.readline() == b"started\n"
    os.killpg(agent.pid, signal.SIGKILL)  # the agent and its whole process group
    agent.wait()
    store = JobStore(state)
    assert store.running() == [14], "the job outlives its agent"
    (tmp_path / "release").touch()
    assert wait_for(lambda: report_of(store, 14)).exit_code == 5


def test_job_whose_shim_died_is_reported_lost(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state")
    store.start(launch(15, "sleep 60", tmp_path))
    pids = wait_for(lambda: jobfiles.read(store.directory(15) / jobfiles.PIDS, jobfiles.Pids))
    os.kill(pids.shim, signal.SIGKILL)  # as if the host went down under it
    report = wait_for(lambda: report_of(store, 15))
    assert (report.exit_code, report.signal) == (LOST_EXIT_CODE, None)


def test_held_slots_end_when_killed(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state")
    store.start(launch(16, "touch ran", tmp_path, run=False, hosts={"h0": 2, "h1": 2}))
    assert store.running() == [16], "a non-first host holds the slots"
    assert store.finished() == []
    store.kill(16)
    assert store.running() == []
    assert [(r.job, r.exit_code, r.signal) for r in store.finished()] == [(16, 0, None)]
    assert not (tmp_path / "ran").exists(), "no process for held slots"


def test_state_dir_others_could_write_to_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)  # as a directory someone else created in /tmp could be
    with pytest.raises(StateDirError, match="writable by others"):
        JobStore(state)


# ---------------------------------------------------------------- host description
def test_host_description_from_file_and_options(tmp_path: Path) -> None:
    host_file = tmp_path / "host.yaml"
    host_file.write_text("slots: 8\nmodel: epyc\nresources: {mem: 64000, ssd: true}\n")
    host = describe_host(host_file, type_="X86_64", resources=["gpu=2", "ssd=false"])
    assert host == RegisterRequest(
        slots=8, type="X86_64", model="epyc", resources={"mem": 64000.0, "ssd": False, "gpu": 2.0}
    )
    with pytest.raises(HostSpecError, match="neither a number nor true/false"):
        describe_host(None, resources=["os=linux"])
    host_file.write_text("slots: 8\ncores: 4\n")
    with pytest.raises(HostSpecError, match="unknown key"):
        describe_host(host_file)


# ---------------------------------------------------------------- the agent loop
class FakeController:
    """The controller's two agent endpoints, scripted by the test."""

    def __init__(self) -> None:
        self.registers: list[RegisterRequest] = []
        self.beats: list[Heartbeat] = []
        self.reply = HeartbeatReply(heartbeat_interval=0.05)  # the next reply, then reset
        self.refuse = 0  # answer that many requests with 503
        self.forget = False  # answer the next heartbeat with 404
        self.bad_tokens = 0
        self.app = web.Application()
        self.app.router.add_post("/agents/{name}/register", self.register)
        self.app.router.add_post("/agents/{name}/heartbeat", self.heartbeat)

    def send(self, **fields: Any) -> None:
        self.reply = msgspec.structs.replace(self.reply, **fields)

    def error(self, status: int, message: str) -> web.Response:
        body = msgspec.json.encode(ApiError(message, status))
        return web.Response(status=status, body=body, content_type="application/json")

    def check(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.bad_tokens += 1
            return self.error(401, "bad token")
        if self.refuse:
            self.refuse -= 1
            return self.error(503, "starting up")
        return None

    async def register(self, request: web.Request) -> web.Response:
        if refused := self.check(request):
            return refused
        self.registers.append(msgspec.json.decode(await request.read(), type=RegisterRequest))
        self.forget = False
        return web.json_response(body=msgspec.json.encode(Registered(heartbeat_interval=0.05)))

    async def heartbeat(self, request: web.Request) -> web.Response:
        if refused := self.check(request):
            return refused
        if self.forget:
            return self.error(404, "unknown agent: register")
        self.beats.append(msgspec.json.decode(await request.read(), type=Heartbeat))
        reply, self.reply = self.reply, HeartbeatReply(heartbeat_interval=0.05)
        return web.json_response(body=msgspec.json.encode(reply))

    def last(self) -> Heartbeat:
        return self.beats[-1] if self.beats else Heartbeat()

    def finished(self, job: int) -> JobReport | None:
        return next((r for r in self.last().finished if r.job == job), None)


async def until(probe: Callable[[], T | None], timeout: float = 4.0) -> T:
    """`wait_for` in the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def with_controller(test: Callable[[FakeController, str], Awaitable[None]]) -> None:
    """Run `test(controller, url)` with a fake controller on a free local port."""
    controller = FakeController()
    runner = web.AppRunner(controller.app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        await test(controller, f"http://{host}:{port}")
    finally:
        await runner.cleanup()


class RunningAgent:
    """An agent serving in the background until `stop()`."""

    def __init__(self, url: str, state: Path, retry: tuple[float, float] = (0.05, 0.1)) -> None:
        host = RegisterRequest(slots=4, resources={"mem": 8000.0})
        settings = AgentSettings(url, "h1", TOKEN, host, retry_min=retry[0], retry_max=retry[1])
        self.store = JobStore(state, kill_grace=2)
        self.stopping = asyncio.Event()
        self.task = asyncio.create_task(Agent(settings, self.store).run(self.stopping))

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.wait_for(self.task, 2)


def test_agent_runs_reports_and_kills_jobs(tmp_path: Path) -> None:
    async def scenario(controller: FakeController, url: str) -> None:
        controller.refuse = 2  # the controller is not up yet: the agent retries
        agent = RunningAgent(url, tmp_path / "state")
        await until(lambda: controller.beats)
        assert controller.registers == [RegisterRequest(slots=4, resources={"mem": 8000.0})]

        controller.send(start=[launch(1, "echo hi; exit 3", tmp_path)])
        report = await until(lambda: controller.finished(1))
        assert (report.exit_code, report.signal) == (3, None)
        controller.send(ack=[1])
        acked = len(controller.beats) + 1  # the beat that gets the ack is the next one
        await until(lambda: len(controller.beats) > acked + 1)
        assert all(not beat.finished for beat in controller.beats[acked:]), "acked: not resent"
        assert (tmp_path / "state/jobs/1/stdout").read_text() == "hi\n", "output kept"

        controller.send(start=[launch(2, "sleep 60", tmp_path)])
        await until(lambda: 2 in controller.last().running)
        controller.send(kill=[2])
        report = await until(lambda: controller.finished(2))
        assert (report.signal, report.exit_code) == (15, 143)
        await agent.stop()
        assert controller.bad_tokens == 0, "every request carries the bearer token"

    asyncio.run(with_controller(scenario))


def test_agent_reattaches_and_outlasts_the_controller(tmp_path: Path) -> None:
    async def scenario(controller: FakeController, url: str) -> None:
        first = RunningAgent(url, tmp_path / "state")
        controller.send(start=[launch(5, UNTIL_RELEASED.format(code=0), tmp_path)])
        await until(lambda: 5 in controller.last().running)
        await first.stop()

        second = RunningAgent(url, tmp_path / "state")  # the agent restarted
        await until(lambda: len(controller.registers) == 2)
        assert controller.registers[1].running == [5], "reattached to the running job"

        controller.refuse = 1000  # the controller goes away
        await asyncio.sleep(0.3)
        assert second.store.running() == [5], "the job keeps running meanwhile"
        controller.refuse = 0
        controller.forget = True  # back, after its own restart: wants a new register
        await until(lambda: len(controller.registers) == 3)
        assert controller.registers[2].running == [5]

        (tmp_path / "release").touch()
        report = await until(lambda: controller.finished(5))
        assert (report.exit_code, report.signal) == (0, None)
        await second.stop()

    asyncio.run(with_controller(scenario))


def test_a_registered_agent_retries_at_its_heartbeat_pace(tmp_path: Path) -> None:
    """The backoff (here 1 s doubling to 30 s) never waits longer than the heartbeat
    interval once the agent has registered: a controller back from a restart hears
    from it before its unreach grace is over."""
    async def scenario(controller: FakeController, url: str) -> None:
        agent = RunningAgent(url, tmp_path / "state", retry=(1.0, 30.0))
        await until(lambda: controller.beats)
        controller.refuse = 8  # 8 failed heartbeats at 0.05 s: 0.4 s at most
        beats = len(controller.beats)
        await until(lambda: len(controller.beats) > beats, timeout=2.0)
        assert controller.refuse == 0
        await agent.stop()

    asyncio.run(with_controller(scenario))


def test_agent_command_stops_on_sigterm_and_leaves_its_jobs(tmp_path: Path) -> None:
    state = tmp_path / "state"

    async def scenario(controller: FakeController, url: str) -> None:
        command = "from xce.cli.agent_cmd import agent; agent()"
        options = ["--controller", url, "--name", "h1", "--slots", "2", "--type", "T"]
        options += ["--resource", "mem=1000", "--state-dir", str(state)]
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-c", command, *options, env=os.environ | {"XCE_TOKEN": TOKEN}
        )
        await until(lambda: controller.beats)
        assert controller.registers == [
            RegisterRequest(slots=2, type="T", resources={"mem": 1000.0})
        ]
        controller.send(start=[launch(7, UNTIL_RELEASED.format(code=0), tmp_path)])
        await until(lambda: 7 in controller.last().running)
        agent.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(agent.wait(), 3) == 0, "a clean exit"
        assert JobStore(state).running() == [7], "the job goes on without its agent"

    asyncio.run(with_controller(scenario))
    (tmp_path / "release").touch()
    assert wait_for(lambda: report_of(JobStore(state), 7)).exit_code == 0


def test_a_relative_state_dir_is_made_absolute(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's shim runs in the job's working directory: a relative --state-dir
    (`xce agent --state-dir w1`) would not be found from there (every job was lost)."""
    from xce.cli.agent_cmd import agent

    monkeypatch.chdir(tmp_path)
    context = agent.make_context("agent", ["--controller", "http://127.0.0.1:1",
                                           "--state-dir", "w1"])
    assert context.params["state_dir"] == tmp_path / "w1"
