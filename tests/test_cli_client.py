"""The controller client commands (`xce submit`, `jobs`, `kill`, `hosts`, `queues`,
`demand`, `idle`, `host close|open`): their LSF-like output, where they find the
controller and the token, and what they send, against a small real HTTP server."""

from __future__ import annotations

import asyncio
import calendar
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import msgspec
import pytest
from aiohttp import web
from click.testing import CliRunner, Result

from xce.cli.client import ClientError, controller_url, read_token
from xce.cli.client_cmds import (
    CLIENT_COMMANDS,
    demand_cost,
    demand_lines,
    host_long,
    hosts_lines,
    idle_lines,
    job_long,
    jobs_lines,
    queues_lines,
    table,
)
from xce.cli.control_cmds import CONTROL_COMMANDS
from xce.cli.provisioner_cmd import running_lines, status_lines
from xce.model.api import (
    CatalogInfo,
    HostInfo,
    JobInfo,
    JobList,
    QueueInfo,
    SessionOutput,
    TemplateInfo,
)
from xce.model.cluster import HostTemplate
from xce.provisioner.status import Status, running_hosts

TOKEN = "s3cret"
# Fri Nov 29 18:40:00 2024 UTC; the tests run with TZ=UTC.
T0 = calendar.timegm((2024, 11, 29, 18, 40, 0))

RUNNING = JobInfo(
    id=12, user="alice", queue="normal", state="RUN", n=4, res="span[ptile=2]", name="",
    command=["make", "-j4", "all"], submit_time=T0, start_time=T0 + 5,
    exec_hosts={"n01": 2, "n02": 2}, cwd="/home/alice/src",
)
PENDING = JobInfo(
    id=13, user="bob", queue="short", state="PEND", n=1, res="", name="sim",
    command=["./sim"], submit_time=T0 + 60,
    pend_reason="Waiting for provisioning: fits on template aws.c5 "
    "(3 new hosts requested this session)",
    pend_kind="provisioning",
)
SINGLE = JobInfo(
    id=14, user="alice", queue="normal", state="RUN", n=1, res="", name="a_very_long_name",
    command=["true"], submit_time=T0 + 86400 * 3, start_time=T0 + 86400 * 3,
    exec_hosts={"n03": 1},
)
HOSTS = [
    HostInfo(name="n01", state="ok", slots=4, used=2, type="X86_64", model="EPYC",
             resources={"mem": 64000.0, "ssd": True, "gpu": False}, last_heartbeat=T0 + 2,
             jobs=[12]),
    HostInfo(name="cloud-1", state="closed", slots=8, used=0, type="X86_64", model="",
             resources={}, template="aws.c5", closed_by_admin=True),
    HostInfo(name="n02", state="unreach", slots=16, used=0, type="X86_64", model="",
             resources={}),
]
DEMAND = {
    "hosts": [{"template": "aws.c5", "count": 3, "in_flight_used": 2, "jobs": [5, 7, 9]}],
    "resources": [
        {"resource": "vcs", "amount": 4, "in_flight_used": 0, "jobs": [11, 12]},
        {"resource": "hspice/cloud", "amount": 2.5, "in_flight_used": 1, "jobs": [13]},
    ],
    "surplus": {"hosts": [{"template": "aws.m5", "count": 2}],
                "resources": [{"resource": "vcs", "amount": 1}]},
}
CATALOG = CatalogInfo(templates=[
    TemplateInfo(name="aws.c5", provider="aws", slots=16, max=10, rank=1, alive=0,
                 in_flight=2, allowance=None, available=8),
    TemplateInfo(name="aws.m5", provider="aws", slots=16, max=10, rank=2, alive=0,
                 in_flight=2, allowance=None, available=8),
], countables=[])
PRICED = CatalogInfo(templates=[
    msgspec.structs.replace(CATALOG.templates[0], price=0.34),
    msgspec.structs.replace(CATALOG.templates[1], price=0.384),
], countables=[])
IDLE = {
    "hosts": [{"host": "cloud-1", "template": "aws.c5", "idle_for": 900}],
    "resources": [{"resource": "hspice/cloud", "amount": 3}],
}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times print in local time: make it UTC, and keep the caller's XCE_* out."""
    for name in ("XCE_CONTROLLER", "XCE_TOKEN", "XCE_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# ---------------------------------------------------------------- formatting
def test_table_aligns_columns_and_right_aligns_numbers() -> None:
    assert table(("NAME", "MAX", "NOTE"), [["n01", "4", ""], ["cloud-10", "16", "x"]],
                 ("MAX",)) == [
        "NAME      MAX  NOTE",
        "n01         4",
        "cloud-10   16  x",
    ]


def test_jobs_table_like_bjobs() -> None:
    assert jobs_lines([RUNNING, PENDING, SINGLE]) == [
        "JOBID  USER   STAT  QUEUE   EXEC_HOST    JOB_NAME    SUBMIT_TIME",
        "12     alice  RUN   normal  2*n01:2*n02  *e -j4 all  Nov 29 18:40",
        "13     bob    PEND  short                sim         Nov 29 18:41",
        "14     alice  RUN   normal  n03          *long_name  Dec  2 18:40",
    ], "long names show their last 9 characters after a *, days are blank-padded"


def test_jobs_table_wide_and_with_pend_reasons() -> None:
    assert jobs_lines([RUNNING, PENDING], wide=True, reasons=True) == [
        "JOBID  USER   STAT  QUEUE   EXEC_HOST    JOB_NAME      SUBMIT_TIME",
        "12     alice  RUN   normal  2*n01:2*n02  make -j4 all  Nov 29 18:40",
        "13     bob    PEND  short                sim           Nov 29 18:41",
        " Waiting for provisioning: fits on template aws.c5 "
        "(3 new hosts requested this session);",
    ]


def test_job_long_running_and_pending() -> None:
    assert job_long(RUNNING) == [
        "Job <12>, User <alice>, Status <RUN>, Queue <normal>, Command <make -j4 all>",
        "Fri Nov 29 18:40:00: Submitted, CWD </home/alice/src>, 4 Task(s) Requested, "
        "Requested Resources <span[ptile=2]>;",
        "Fri Nov 29 18:40:05: Started 4 Task(s) on Host(s) <2*n01> <2*n02>;",
    ]
    assert job_long(PENDING) == [
        "Job <13>, Job Name <sim>, User <bob>, Status <PEND>, Queue <short>, Command <./sim>",
        "Fri Nov 29 18:41:00: Submitted, 1 Task(s) Requested;",
        "",
        " PENDING REASONS:",
        " Waiting for provisioning: fits on template aws.c5 "
        "(3 new hosts requested this session);",
    ]


def test_job_long_finished() -> None:
    done = msgspec.structs.replace(
        SINGLE, state="DONE", end_time=T0 + 86400 * 3 + 65, exit_code=0, output="out.%J")
    killed = msgspec.structs.replace(
        RUNNING, state="EXIT", end_time=T0 + 600, signal=15, exit_code=143,
        exit_reason="Killed by alice")
    assert job_long(done)[1:] == [
        "Mon Dec  2 18:40:00: Submitted, Output File <out.%J>, 1 Task(s) Requested;",
        "Mon Dec  2 18:40:00: Started 1 Task(s) on Host(s) <n03>;",
        "Mon Dec  2 18:41:05: Done successfully.",
    ]
    assert job_long(killed)[-1] == "Fri Nov 29 18:50:00: Exited by signal 15: Killed by alice."
    never_ran = msgspec.structs.replace(PENDING, state="EXIT", end_time=T0 + 120,
                                        exit_reason="killed")
    assert job_long(never_ran)[-1] == "Fri Nov 29 18:42:00: Exited: killed.", (
        "a job killed while pending has no exit code, and no PENDING REASONS any more")
    failed = msgspec.structs.replace(killed, signal=None, exit_code=2, exit_reason="")
    assert job_long(failed)[-1] == "Fri Nov 29 18:50:00: Exited with exit code 2."


def test_hosts_table_like_bhosts() -> None:
    assert hosts_lines(HOSTS) == [
        "HOST_NAME  STATUS      MAX  NJOBS  RUN",
        "n01        ok            4      2    2",
        "cloud-1    closed_Adm    8      0    0",
        "n02        unreach      16      0    0",
    ]


def test_a_suspended_job_counts_in_njobs_not_in_run() -> None:
    # A preemptor (2 slots) runs where its victim (4 slots, USUSP) is suspended.
    host = HostInfo(name="n01", state="ok", slots=4, used=6, type="X86_64", model="",
                    resources={}, jobs=[1, 2], suspended=4)
    assert hosts_lines([host]) == [
        "HOST_NAME  STATUS  MAX  NJOBS  RUN",
        "n01        ok        4      6    2",
    ], "as bhosts: NJOBS counts the suspended job's slots, RUN only the running job's"


def test_host_long() -> None:
    assert host_long(HOSTS[0]) == [
        "HOST  n01",
        "STATUS  MAX  NJOBS  RUN",
        "ok        4      2    2",
        "TYPE       X86_64",
        "MODEL      EPYC",
        "TEMPLATE   -",
        "HEARTBEAT  Fri Nov 29 18:40:02",
        "RESOURCES  mem=64000 ssd",
        "JOBS       12",
    ], "false booleans are not listed; whole amounts print without decimals"
    assert host_long(HOSTS[1])[3:] == [
        "TYPE       X86_64",
        "MODEL      -",
        "TEMPLATE   aws.c5",
        "HEARTBEAT  -",
        "RESOURCES  -",
        "JOBS       -",
    ]


def test_queues_table_like_bqueues() -> None:
    queues = [QueueInfo(name="normal", priority=30, status="Open:Active", njobs=120,
                        pend=100, run=20),
              QueueInfo(name="night", priority=5, status="Closed:Inact", njobs=0, pend=0,
                        run=0)]
    assert queues_lines(queues) == [
        "QUEUE_NAME  PRIO  STATUS        NJOBS  PEND  RUN",
        "normal        30  Open:Active     120   100   20",
        "night          5  Closed:Inact      0     0    0",
    ]


def test_demand_tables() -> None:
    assert demand_lines(SessionOutput(session=42, time=T0, demand=DEMAND)) == [
        "Session 42 at Fri Nov 29 18:40:00",
        "",
        "Hosts to request:",
        "TEMPLATE  NEW_HOSTS  IN_FLIGHT_USED  JOBS",
        "aws.c5            3               2     3",
        "",
        "Tokens to obtain:",
        "RESOURCE  POOL   AMOUNT  IN_FLIGHT_USED  JOBS",
        "vcs       -           4               0     2",
        "hspice    cloud     2.5               1     1",
        "",
        "Surplus hosts in flight (no pending job needs them):",
        "TEMPLATE  HOSTS",
        "aws.m5        2",
        "",
        "Surplus tokens in flight (no pending job needs them):",
        "RESOURCE  POOL  AMOUNT",
        "vcs       -          1",
    ]
    assert demand_lines(SessionOutput(session=3, time=T0, demand={"hosts": []})) == [
        "Session 3 at Fri Nov 29 18:40:00", "No demand."]
    assert demand_lines(SessionOutput(session=0, time=None)) == [
        "No scheduling session has run yet."]


def test_demand_tables_with_prices_show_the_hourly_cost_of_the_new_hosts() -> None:
    prices = {"aws.c5": 0.34, "aws.m5": 0.384}
    lines = demand_lines(SessionOutput(session=42, time=T0, demand=DEMAND), prices)
    assert lines[:6] == [
        "Session 42 at Fri Nov 29 18:40:00",
        "",
        "Hosts to request:",
        "TEMPLATE  NEW_HOSTS  IN_FLIGHT_USED  JOBS  PRICE  COST_PER_HOUR",
        "aws.c5            3               2     3  0.340          1.020",
        "Hourly cost of the new hosts: 1.020",
    ], "new hosts x price per host-hour (in-flight hosts are paid for already)"
    assert lines[6:] == demand_lines(SessionOutput(session=42, time=T0, demand=DEMAND))[5:]
    assert demand_cost(SessionOutput(session=42, time=T0, demand=DEMAND), {}) is None


def test_idle_tables() -> None:
    assert idle_lines(SessionOutput(session=42, time=T0, idle=IDLE)) == [
        "Session 42 at Fri Nov 29 18:40:00",
        "",
        "Idle hosts:",
        "HOST     TEMPLATE  IDLE_FOR",
        "cloud-1  aws.c5        900s",
        "",
        "Idle tokens:",
        "RESOURCE  POOL   AMOUNT",
        "hspice    cloud       3",
    ]
    assert idle_lines(SessionOutput(session=4, time=T0, idle={})) == [
        "Session 4 at Fri Nov 29 18:40:00", "No idle supply."]


# ---------------------------------------------------------------- where and who
def test_controller_url_option_then_env_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert controller_url(None) == "http://127.0.0.1:6820"
    monkeypatch.setenv("XCE_CONTROLLER", "https://head01:6820/")
    assert controller_url(None) == "https://head01:6820"
    assert controller_url("head02:7000") == "http://head02:7000", "host:port means http"
    with pytest.raises(ClientError, match="must start with http:// or https://"):
        controller_url("ftp://head01")


def test_token_option_then_env_then_file(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ClientError, match=r"cannot read the token file .*\.xce/token"):
        read_token(None)
    (tmp_path / ".xce").mkdir()
    (tmp_path / ".xce" / "token").write_text("home-token\n")
    assert read_token(None) == "home-token"
    (tmp_path / "env-file").write_text("env-file-token")
    monkeypatch.setenv("XCE_TOKEN_FILE", str(tmp_path / "env-file"))
    assert read_token(None) == "env-file-token"
    monkeypatch.setenv("XCE_TOKEN", "env-token")
    assert read_token(None) == "env-token", "XCE_TOKEN comes before XCE_TOKEN_FILE"
    (tmp_path / "option").write_text(" option-token ")
    assert read_token(str(tmp_path / "option")) == "option-token"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ClientError, match="is empty"):
        read_token(str(tmp_path / "empty"))


# ---------------------------------------------------------------- against a server
class Recorded(msgspec.Struct):
    method: str
    path: str
    query: dict[str, str]
    authorization: str
    body: Any


class FakeController:
    """Answers canned JSON per (method, path) and records every request."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}
        self.requests: list[Recorded] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    def answer(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.answers[method, path] = (status, body)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.requests.append(Recorded(
            request.method, request.path, dict(request.query),
            request.headers.get("Authorization", ""), msgspec.json.decode(raw) if raw else None,
        ))
        status, body = self.answers.get(
            (request.method, request.path), (404, {"error": "no such endpoint", "status": 404}))
        if isinstance(body, str):
            return web.Response(status=status, text=body)
        return web.json_response(body, status=status)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeController]:
    fake = FakeController()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(5)
    yield fake
    asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@pytest.fixture
def controller(server: FakeController, monkeypatch: pytest.MonkeyPatch) -> FakeController:
    server.answers.clear()
    server.requests.clear()
    monkeypatch.setenv("XCE_CONTROLLER", server.url)
    monkeypatch.setenv("XCE_TOKEN", TOKEN)
    return server


CLI = click.Group("xce", commands=[*CLIENT_COMMANDS, *CONTROL_COMMANDS])


def xce(*args: str) -> Result:
    return CliRunner().invoke(CLI, list(args))


def jobs_json(*jobs: JobInfo) -> Any:
    return msgspec.to_builtins(JobList(jobs=list(jobs)))


def test_submit_sends_command_cwd_environment_and_options(
        controller: FakeController, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    controller.answer("POST", "/jobs", {"job": 101, "queue": "short"}, status=201)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MY_SETTING", "42")
    result = xce("submit", "-n", "4", "-R", "span[hosts=1]", "-q", "short", "-J", "build",
                 "-o", "out.%J", "-H", "--", "make", "-j", "4")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Job <101> is submitted to queue <short>.\n"
    [sent] = controller.requests
    assert (sent.method, sent.path, sent.authorization) == ("POST", "/jobs", f"Bearer {TOKEN}")
    body = sent.body
    assert body["command"] == ["make", "-j", "4"]
    assert (body["n"], body["res"], body["queue"], body["name"]) == (4, "span[hosts=1]",
                                                                     "short", "build")
    assert (body["output"], body["hold"], body["cwd"]) == ("out.%J", True, str(tmp_path))
    assert body["env"]["MY_SETTING"] == "42"
    assert "XCE_TOKEN" not in body["env"], "the token is not stored with the job"


def test_submit_options_end_at_the_command(controller: FakeController) -> None:
    controller.answer("POST", "/jobs", {"job": 102, "queue": "normal"}, status=201)
    result = xce("submit", "--cwd", "/scratch", "ls", "-l", "-n", "2")
    assert result.exit_code == 0, result.output
    body = controller.requests[0].body
    assert (body["command"], body["n"], body["cwd"]) == (["ls", "-l", "-n", "2"], 1, "/scratch")


def test_submit_without_command_is_a_usage_error(controller: FakeController) -> None:
    result = xce("submit", "-n", "2")
    assert result.exit_code == 2
    assert "Missing argument" in result.stderr
    assert controller.requests == []


def test_refusal_shows_the_controllers_message(controller: FakeController) -> None:
    controller.answer("POST", "/jobs", {"error": "unknown queue: nightly", "status": 400},
                      status=400)
    result = xce("submit", "-q", "nightly", "true")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "xce: unknown queue: nightly\n"


def test_an_answer_that_is_not_the_api_says_so(controller: FakeController) -> None:
    controller.answer("GET", "/queues", "<html>gateway</html>", status=502)
    result = xce("queues")
    assert result.exit_code == 1
    assert result.stderr == "xce: the controller answered 502 Bad Gateway\n"
    controller.answer("GET", "/queues", {"queues": "none"})
    result = xce("queues")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"xce: unexpected answer from the controller at {controller.url}: ")


def test_unreachable_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port on which nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("XCE_TOKEN", TOKEN)
    result = xce("jobs", "--controller", f"127.0.0.1:{port}")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"xce: cannot reach the controller at http://127.0.0.1:{port}: ")
    assert "refused" in result.stderr


def test_no_token(controller: FakeController, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCE_TOKEN")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = xce("hosts")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"xce: cannot read the token file {tmp_path}/.xce/token")
    assert controller.requests == []


def test_options_override_the_environment(controller: FakeController, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    controller.answer("GET", "/queues", {"queues": []})
    monkeypatch.setenv("XCE_CONTROLLER", "http://127.0.0.1:1")
    (tmp_path / "token").write_text("from-file\n")
    result = xce("queues", "--controller", controller.url, "--token-file", str(tmp_path / "token"))
    assert result.exit_code == 0, result.output
    assert controller.requests[0].authorization == "Bearer from-file"


def test_jobs_default_view(controller: FakeController) -> None:
    controller.answer("GET", "/jobs", jobs_json(RUNNING, PENDING))
    result = xce("jobs")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == jobs_lines([RUNNING, PENDING])
    [sent] = controller.requests
    assert (sent.query, sent.authorization) == ({"state": "unfinished"}, f"Bearer {TOKEN}")


def test_jobs_pending_of_all_users_with_reasons(controller: FakeController) -> None:
    controller.answer("GET", "/jobs", jobs_json(PENDING))
    result = xce("jobs", "-u", "all", "-p")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [
        "13     bob   PEND  short             sim       Nov 29 18:41",
        " Waiting for provisioning: fits on template aws.c5 "
        "(3 new hosts requested this session);",
    ]
    assert controller.requests[0].query == {"user": "all", "state": "pend"}


def test_jobs_state_options_combine(controller: FakeController) -> None:
    controller.answer("GET", "/jobs", jobs_json())
    result = xce("jobs", "-d")
    assert controller.requests[0].query == {"state": "finished"}
    assert (result.exit_code, result.stderr) == (255, "No DONE/EXIT job found\n")
    controller.requests.clear()
    result = xce("jobs", "-p", "-r")
    assert [r.query for r in controller.requests] == [{"state": "run"}, {"state": "pend"}]
    assert (result.exit_code, result.stderr) == (255, "No job found\n")


def test_no_job_found_is_lsfs_message_and_status(controller: FakeController) -> None:
    controller.answer("GET", "/jobs", jobs_json())
    result = xce("jobs")
    assert (result.exit_code, result.stdout, result.stderr) == (
        255, "", "No unfinished job found\n"), "as bjobs: stderr, exit status 255"
    result = xce("jobs", "-p")
    assert (result.exit_code, result.stderr) == (255, "No pending job found\n")
    result = xce("jobs", "--json")
    assert (result.exit_code, result.stdout) == (0, '{"jobs":[]}\n'), "JSON readers get []"


def test_jobs_by_id_long_and_json(controller: FakeController) -> None:
    controller.answer("GET", "/jobs/12", msgspec.to_builtins(RUNNING))
    controller.answer("GET", "/jobs/13", msgspec.to_builtins(PENDING))
    result = xce("jobs", "-l", "12", "13")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [*job_long(RUNNING), "-" * 78, *job_long(PENDING)]
    result = xce("jobs", "--json", "12")
    assert msgspec.json.decode(result.stdout, type=JobList) == JobList(jobs=[RUNNING])
    result = xce("jobs", "-p", "12", "13")
    assert result.stdout.splitlines() == jobs_lines([PENDING], reasons=True), (
        "with job ids, -p keeps the pending ones")


def test_jobs_by_id_reports_each_missing_job(controller: FakeController) -> None:
    controller.answer("GET", "/jobs/12", msgspec.to_builtins(RUNNING))
    result = xce("jobs", "99", "12")
    assert result.exit_code == 1
    assert result.stderr == "xce: Job <99>: no such endpoint\n", "the job is named once"
    assert result.stdout.splitlines() == jobs_lines([RUNNING])


def test_kill(controller: FakeController) -> None:
    controller.answer("POST", "/jobs/12/kill", {"job": 12, "state": "RUN"})
    controller.answer("POST", "/jobs/13/kill", {
        "error": "Job <13>: not the owner of the job", "status": 403}, status=403)
    result = xce("kill", "12", "13", "14")
    assert result.exit_code == 1
    assert result.stdout == "Job <12> is being terminated\n"
    assert result.stderr == (
        "xce: Job <13>: not the owner of the job\n"
        "xce: Job <14>: no such endpoint\n"), "each job is named once"
    assert [r.authorization for r in controller.requests] == [f"Bearer {TOKEN}"] * 3


def test_a_refused_token_stops_at_the_first_job(controller: FakeController) -> None:
    controller.answer("POST", "/jobs/12/kill",
                      {"error": "unknown or revoked token", "status": 401}, status=401)
    result = xce("kill", "12", "13")
    assert (result.exit_code, result.stderr) == (1, "xce: unknown or revoked token\n")
    assert len(controller.requests) == 1


def test_hosts_queues_and_host_admin(controller: FakeController) -> None:
    controller.answer("GET", "/hosts", msgspec.to_builtins({"hosts": HOSTS}))
    result = xce("hosts")
    assert result.stdout.splitlines() == hosts_lines(HOSTS)
    result = xce("hosts", "-l")
    assert result.stdout.split("\n\n")[1].splitlines() == host_long(HOSTS[1])
    controller.answer("GET", "/queues", {"queues": [{
        "name": "normal", "priority": 30, "status": "Open:Active", "njobs": 2, "pend": 1,
        "run": 1}]})
    assert xce("queues").stdout.splitlines()[1].split() == [
        "normal", "30", "Open:Active", "2", "1", "1"]
    closed = msgspec.to_builtins(HOSTS[1])
    controller.answer("POST", "/hosts/cloud-1/close", closed)
    controller.answer("POST", "/hosts/cloud-1/open", closed)
    assert xce("host", "close", "cloud-1").stdout == "Host <cloud-1> closed.\n"
    assert xce("host", "close", "--reason", "idle", "cloud-1").exit_code == 0
    assert xce("host", "open", "cloud-1").stdout == "Host <cloud-1> opened.\n"
    assert [(r.method, r.path, r.query) for r in controller.requests[-3:]] == [
        ("POST", "/hosts/cloud-1/close", {"reason": "admin"}),
        ("POST", "/hosts/cloud-1/close", {"reason": "idle"}),
        ("POST", "/hosts/cloud-1/open", {}),
    ]


def test_demand_and_idle(controller: FakeController) -> None:
    session = {"session": 42, "time": T0, "demand": DEMAND}
    controller.answer("GET", "/demand", session)
    controller.answer("GET", "/catalog", msgspec.to_builtins(CATALOG))  # (no price)
    controller.answer("GET", "/idle", {"session": 42, "time": T0, "idle": IDLE})
    result = xce("demand")
    assert result.stdout.splitlines() == demand_lines(
        msgspec.convert(session, SessionOutput))
    assert msgspec.json.decode(xce("demand", "--json").stdout)["demand"] == DEMAND
    assert xce("idle").stdout.splitlines()[3:5] == [
        "HOST     TEMPLATE  IDLE_FOR", "cloud-1  aws.c5        900s"]
    controller.answer("GET", "/idle", {"session": 42, "time": T0, "idle": {"hosts": 3}})
    result = xce("idle")
    assert result.exit_code == 1
    assert result.stderr.startswith("xce: unexpected idle supply from the controller")


def test_demand_shows_the_hourly_cost_from_the_catalogs_prices(
        controller: FakeController) -> None:
    session = {"session": 42, "time": T0, "demand": DEMAND}
    controller.answer("GET", "/demand", session)
    controller.answer("GET", "/catalog", msgspec.to_builtins(PRICED))
    assert xce("demand").stdout.splitlines() == demand_lines(
        msgspec.convert(session, SessionOutput), {"aws.c5": 0.34, "aws.m5": 0.384})
    shown = msgspec.json.decode(xce("demand", "--json").stdout)
    assert shown["demand"] == DEMAND, "the answer's keys are kept"
    assert shown["cost"] == {"hosts": {"aws.c5": 1.02}, "total": 1.02}
    assert msgspec.json.decode(xce("demand", "-l", "--json").stdout)["demand"]["cost"] == (
        shown["cost"])
    controller.answer("GET", "/demand", {"session": 43, "time": T0, "demand": {"hosts": []}})
    controller.requests.clear()
    assert "cost" not in msgspec.json.decode(xce("demand", "--json").stdout)
    assert [r.path for r in controller.requests] == ["/demand"], (
        "no hosts to request: the catalog is not asked for"
    )


def test_provisioner_status_shows_the_hosts_running_and_their_hourly_cost() -> None:
    templates = [HostTemplate("aws.c5", "aws", 16, price=0.34),
                 HostTemplate("aws.m5", "aws", 16, price=0.384),
                 HostTemplate("aws.r5", "aws", 16)]
    hosts = [{"name": "c-1", "template": "aws.c5", "state": "ok"},
             {"name": "c-2", "template": "aws.c5", "state": "closed"},
             {"name": "c-3", "template": "aws.c5", "state": "expected"},
             {"name": "m-1", "template": "aws.m5", "state": "unreach"},
             {"name": "m-2", "template": "aws.m5", "state": "failed"},
             {"name": "r-1", "template": "aws.r5", "state": "ok"},
             {"name": "n01", "state": "ok"}]
    running, cost, total = running_hosts(hosts, templates)
    assert running == {"aws.c5": 2, "aws.m5": 1, "aws.r5": 1}, (
        "joined and up (ok, closed, unreach); not expected or failed, nor static hosts"
    )
    assert cost == {"aws.c5": 0.68, "aws.m5": 0.384, "aws.r5": 0.0}
    assert total == 1.064
    shown = Status("prov-a", T0, {"aws": 1}, [], [], [], running, cost, total)
    assert running_lines(shown) == [
        "Hosts running:",
        "  TEMPLATE  HOSTS  COST_PER_HOUR",
        "  aws.c5        2          0.680",
        "  aws.m5        1          0.384",
        "  aws.r5        1          0.000",
        "Hourly cost of the hosts running: 1.064",
    ]
    assert status_lines(shown)[3:] == running_lines(shown)
    unpriced = running_hosts(hosts, [HostTemplate("aws.c5", "aws", 16)])
    assert unpriced == ({"aws.c5": 2}, {}, 0.0)
    assert running_lines(Status("prov-a", T0, {}, [], [], [], unpriced[0])) == [
        "Hosts running: aws.c5 2"]
    assert running_lines(Status("prov-a", T0, {}, [], [])) == ["Hosts running: none"]


def test_every_command_has_the_connection_options() -> None:
    for command in CLIENT_COMMANDS:
        leaves = (command.commands.values() if isinstance(command, click.Group)
                  else [command])
        for leaf in leaves:
            names = {p.name for p in leaf.params}
            assert {"controller", "token_file"} <= names, leaf.name
