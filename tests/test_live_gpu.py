"""The agent's GPUs, live: a real `xce agent` process with real shims and job
processes, talking HTTP on loopback to a small controller played by the test (it
registers the agent, and hands out launches with GPUs as the real controller fills
them from the job spec). No real GPU is needed.

* A host spec of 4 GPUs and no nvidia-smi: the agent registers 4; two `gpus=2` jobs
  get disjoint devices (CUDA_VISIBLE_DEVICES, which each job writes to a file with
  the rest of its environment); an exclusive job is alone on its device; a job whose
  devices are not free is refused (127, the reason in its output); the grants survive
  an agent restart.
* A fake nvidia-smi on PATH that lists 2 GPUs wins over a host spec of 4.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest
from live import (
    ME,
    XCE,
    kill_marked,
    live_cluster,
    marked_pids,
    skip_unless_linux,
    wait_for,
)

from xce.model.api import Heartbeat, HeartbeatReply, JobReport, Launch, Registered, RegisterRequest

pytestmark = skip_unless_linux

MARK = "XCE_LIVE_TEST"
TOKEN = "gpu-agent-token"


@dataclass
class FakeController:
    """The agent endpoints of a controller: it records what the agent registers and
    reports, and starts and kills the jobs the test asks for."""

    registered: list[RegisterRequest] = field(default_factory=list)
    running: set[int] = field(default_factory=set)
    reports: dict[int, JobReport] = field(default_factory=dict)
    to_start: list[Launch] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def answer(self, path: str, body: bytes) -> bytes:
        with self.lock:
            if path.endswith("/register"):
                self.registered.append(msgspec.json.decode(body, type=RegisterRequest))
                return msgspec.json.encode(Registered(heartbeat_interval=0.1))
            beat = msgspec.json.decode(body, type=Heartbeat)
            self.running = set(beat.running)
            self.reports.update((r.job, r) for r in beat.finished)
            start, self.to_start = self.to_start, []
            return msgspec.json.encode(HeartbeatReply(
                start=start, ack=[r.job for r in beat.finished], heartbeat_interval=0.1))

    def start(self, *launches: Launch) -> None:
        with self.lock:
            self.to_start.extend(launches)


@pytest.fixture
def controller() -> Iterator[FakeController]:
    fake = FakeController()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self.send_response(401)
                self.end_headers()
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            reply = fake.answer(self.path, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


class AgentProcess:
    """`xce agent` against the fake controller, in a session of its own."""

    def __init__(self, root: Path, controller: FakeController, *args: str,
                 path: str = "") -> None:
        self.root = root
        self.controller = controller
        self.args = args
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
        self.env.update({MARK: f"{root}{os.sep}", "XCE_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"})
        if path:
            self.env["PATH"] = path
        self.log = root / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RegisterRequest:
        """Start it; what it registers."""
        before = len(self.controller.registered)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [*XCE, "agent", "--controller", self.controller.url, "--name", "g1",
                 "--slots", "8", "--state-dir", str(self.root / "state"),
                 "--kill-grace", "1", *self.args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=self.env,
                start_new_session=True)
        wait_for(lambda: len(self.controller.registered) > before, 20,
                 f"the agent to register: {self.log_text()}")
        return self.controller.registered[-1]

    def stop(self) -> None:
        """SIGTERM: the agent goes, its jobs go on."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[Path]:
    """Everything the test started (agents, shims, jobs) is killed at its end."""
    yield tmp_path
    kill_marked(f"{tmp_path}{os.sep}")
    assert not marked_pids(f"{tmp_path}{os.sep}")


def gpu_job(job: int, root: Path, gpus: int, **fields: Any) -> Launch:
    """A job that writes its environment to `env.<job>` and runs until the test makes
    `release.<job>`."""
    script = f"env > env.{job}.tmp && mv env.{job}.tmp env.{job}; " \
             f"until [ -e release.{job} ]; do sleep 0.05; done"
    env = {MARK: f"{root}{os.sep}", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return Launch(job=job, user=ME, command=["sh", "-c", script], hosts={"g1": 1}, run=True,
                  cwd=str(root), env=env, gpus=gpus, **fields)


def environment(root: Path, job: int) -> dict[str, str]:
    """The environment job `job` found, once it has written it."""
    path = root / f"env.{job}"
    wait_for(path.exists, 15, f"job {job} to start")
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def devices(root: Path, job: int) -> set[int]:
    return {int(d) for d in environment(root, job)["CUDA_VISIBLE_DEVICES"].split(",")}


def end(root: Path, controller: FakeController, job: int) -> JobReport:
    (root / f"release.{job}").touch()
    return wait_for(lambda: controller.reports.get(job), 15, f"job {job} to end")


def test_jobs_get_disjoint_devices_and_an_exclusive_job_is_alone(
        cleanup: Path, controller: FakeController) -> None:
    root = cleanup
    agent = AgentProcess(root, controller, "--gpus", "4", "--nvidia-smi",
                         str(root / "no-nvidia-smi-here"))
    assert agent.start().gpus == 4, "no nvidia-smi: the host spec's GPUs are registered"

    controller.start(gpu_job(1, root, 2), gpu_job(2, root, 2))
    first, second = devices(root, 1), devices(root, 2)
    assert len(first) == len(second) == 2 and not first & second, \
        f"two gpus=2 jobs on 4 GPUs get disjoint devices: {first}, {second}"
    assert first | second == {0, 1, 2, 3}
    env = environment(root, 1)
    assert (env["XCE_GPU_MODE"], env["CUDA_DEVICE_ORDER"]) == ("shared", "PCI_BUS_ID")

    assert end(root, controller, 1).exit_code == 0
    controller.start(gpu_job(3, root, 1, gpu_mode="exclusive_process"))
    [alone] = devices(root, 3)
    assert alone == min(first), "the lowest free device"
    assert environment(root, 3)["XCE_GPU_MODE"] == "exclusive_process"
    # Device 1 of job 1 is free again, the exclusive job's is not: a job that needs
    # two GPUs is refused, one that needs one gets the other free device.
    controller.start(gpu_job(4, root, 2), gpu_job(5, root, 1, gpu_exclusive=True))
    refused = wait_for(lambda: controller.reports.get(4), 15, "job 4 to be refused")
    assert refused.exit_code == 127
    said = (root / "state" / "jobs" / "4" / "stdout").read_text()
    assert re.search(r"xce: job 4: cannot have its GPUs: it needs 2 GPU\(s\) and 1 of this "
                     r"host's 4 are free; held: ", said), said
    [other] = devices(root, 5)
    assert other not in {alone} | second, "never a device another job holds"

    # The grants are kept with the jobs: a restarted agent knows they are taken.
    agent.stop()
    assert agent.start().running == [2, 3, 5]
    controller.start(gpu_job(6, root, 1))
    assert wait_for(lambda: controller.reports.get(6), 15, "job 6").exit_code == 127, \
        "every device is held by a job that still runs"
    assert end(root, controller, 2).exit_code == 0
    controller.start(gpu_job(7, root, 2))
    assert devices(root, 7) == second, "the devices job 2 gave back"
    for job in (3, 5, 7):
        end(root, controller, job)


def test_the_gpus_nvidia_smi_lists_win_over_the_host_spec(
        cleanup: Path, controller: FakeController) -> None:
    root = cleanup
    bin_dir = root / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "-L" ] || exit 9\n'
        "echo 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-3b1c9e0a-0000-0000-0000-000000000000)'\n"
        "echo 'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-3b1c9e0a-0000-0000-0000-000000000001)'\n")
    fake.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    host_file = root / "host.yaml"
    host_file.write_text("gpus: 4\n")
    agent = AgentProcess(root, controller, "--host-file", str(host_file), path=path)
    assert agent.start().gpus == 2, "nvidia-smi -L lists 2 GPUs"
    assert "lists 2 GPU(s), the host spec says 4" in agent.log_text()
    controller.start(gpu_job(1, root, 2))
    assert devices(root, 1) == {0, 1}
    assert end(root, controller, 1).exit_code == 0


# ------------------------------------------------------------ through the controller
GPU_CONFIG = """\
cluster: gpu
session_interval: 0.2
hosts:
  - {name: n1, slots: 8, gpus: 4}
queues:
  - {name: normal, priority: 30}
"""
# A job that writes its devices to FILE, then waits for GO to exist.
DEVICES = ('echo "$CUDA_VISIBLE_DEVICES $XCE_GPU_MODE" > {file}; '
           "while [ ! -e {go} ]; do sleep 0.1; done")


def test_gpu_jobs_through_the_controller(tmp_path: Path) -> None:
    """`xce submit -gpu` against a real controller and agent (host spec 4 GPUs, no
    nvidia-smi): two num=2 jobs run at once on disjoint devices; a third job of one
    GPU pends, named by its reason, until one of them ends; then it gets a device of
    the one that ended."""
    with live_cluster(tmp_path, GPU_CONFIG, agents=("n1",)) as cluster:
        cluster.start_controller()
        cluster.start_agent("n1", slots=8, extra=["--gpus", "4", "--nvidia-smi",
                                                 str(tmp_path / "no-nvidia-smi")])
        go = tmp_path / "go"
        ids = []
        for k, gpu in enumerate(["num=2", "num=2:mode=exclusive_process", "num=1"]):
            out = cluster.xce("submit", "-gpu", gpu, "--", "sh", "-c",
                              DEVICES.format(file=tmp_path / f"dev{k}", go=go), check=True)
            ids.append(int(re.search(r"Job <(\d+)>", out.stdout).group(1)))  # type: ignore[union-attr]
        first, second, third = ids
        cluster.wait_state(first, "RUN")
        cluster.wait_state(second, "RUN")
        wait_for(lambda: ((tmp_path / "dev0").exists() and (tmp_path / "dev1").exists())
                 or None, 15, "both GPU jobs to write their devices")
        one = (tmp_path / "dev0").read_text().split()
        two = (tmp_path / "dev1").read_text().split()
        assert one[1] == "shared" and two[1] == "exclusive_process"
        devices_one, devices_two = set(one[0].split(",")), set(two[0].split(","))
        assert len(devices_one) == 2 and len(devices_two) == 2
        assert not devices_one & devices_two, "two jobs were given one device"
        assert devices_one | devices_two == {"0", "1", "2", "3"}
        pending = wait_for(lambda: (j := cluster.job(third))["pend_kind"] == "resource" and j,
                           10, "a session's pend reason")
        assert pending["pend_reason"] == (
            "Not enough GPUs: 1 per host needed, 0 free on eligible hosts")
        cluster.ok("POST", f"/jobs/{first}/kill")
        assert cluster.wait_state(third, "RUN")["exec_hosts"] == {"n1": 1}
        wait_for(lambda: (tmp_path / "dev2").exists() or None, 15, "the third job's devices")
        got = (tmp_path / "dev2").read_text().split()[0]
        assert got in devices_one, "the third job got a device another job holds"
        go.touch()
        cluster.wait_state(second, "DONE")
        cluster.wait_state(third, "DONE")
