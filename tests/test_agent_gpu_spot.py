"""The agent's GPUs and EC2's spot notice, part by part (live, with real processes:
test_live_gpu.py, test_live_spot.py): which devices a job gets, what nvidia-smi says,
the host file's `gpus`, reading a notice document, and the controller's side: the
launch carries the job's GPUs, a heartbeat with a notice closes the host and requeues
its jobs."""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from xce.agent.gpus import discover_gpus, grant_gpus
from xce.agent.hostspec import HostSpecError, describe_host
from xce.agent.jobfiles import GpuGrant
from xce.agent.shim import job_environment
from xce.agent.spot import NOTICE_LEAD, MetadataError, notice_time
from xce.config.loader import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller, Settings
from xce.controller.store import SqliteStore
from xce.model.api import Heartbeat, JobReport, Launch, RegisterRequest, SubmitRequest

ME = pwd.getpwuid(os.getuid()).pw_name


def launch(job: int, gpus: int, **fields: Any) -> Launch:
    return Launch(job=job, user=ME, command=["true"], hosts={"h1": 1}, run=True, gpus=gpus,
                  **fields)


# ---------------------------------------------------------------- devices
def test_a_job_gets_the_lowest_free_devices() -> None:
    held = {7: [0], 8: [2]}
    assert grant_gpus(launch(9, 2), [0, 1, 2, 3], held) == GpuGrant([1, 3], "shared", False)
    grant = grant_gpus(launch(9, 1, gpu_mode="exclusive_process"), [0, 1, 2, 3], held)
    assert (grant.devices, grant.mode, grant.exclusive) == ([1], "exclusive_process", True), \
        "exclusive_process implies j_exclusive"
    assert grant_gpus(launch(9, 1, gpu_exclusive=True), [4, 5], {}).devices == [4], \
        "the devices nvidia-smi numbers"


def test_a_job_whose_devices_are_not_free_is_refused_saying_why() -> None:
    grant = grant_gpus(launch(9, 3), [0, 1, 2, 3], {7: [0], 8: [2]})
    assert grant.devices == []
    assert grant.refused == ("it needs 3 GPU(s) and 2 of this host's 4 are free; "
                             "held: 0 (job 7), 2 (job 8)")
    assert grant_gpus(launch(9, 1), [], {}).refused == (
        "it needs 1 GPU(s) and 0 of this host's 0 are free")


def test_the_environment_names_the_devices_and_their_mode() -> None:
    job = launch(9, 2, env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "HOME": "/h"})
    env = job_environment(job, GpuGrant([1, 3], "shared"))
    assert (env["CUDA_VISIBLE_DEVICES"], env["XCE_GPU_MODE"], env["CUDA_DEVICE_ORDER"]) == (
        "1,3", "shared", "PCI_BUS_ID"), "CUDA numbers devices as nvidia-smi does"
    assert "CUDA_VISIBLE_DEVICES" not in job_environment(launch(9, 0)), \
        "a job without GPUs: nothing set"


def fake_smi(tmp_path: Path, script: str) -> str:
    path = tmp_path / "nvidia-smi"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return str(path)


def test_nvidia_smi_wins_and_a_failing_one_leaves_the_host_spec(tmp_path: Path) -> None:
    listed = fake_smi(tmp_path, "printf 'GPU 0: A (UUID: GPU-a)\\n  MIG 1g.5gb Device 0: "
                      "(UUID: MIG-b)\\nGPU 1: A (UUID: GPU-c)\\n'")
    assert discover_gpus(4, listed) == [0, 1], "its GPU lines (not MIG devices)"
    broken = tmp_path / "broken"
    broken.mkdir()
    failing = fake_smi(broken, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    assert discover_gpus(3, failing) == [0, 1, 2]
    assert discover_gpus(2, str(tmp_path / "none")) == [0, 1], "not found: the host spec"


def test_the_host_file_and_options_give_the_gpus(tmp_path: Path) -> None:
    host_file = tmp_path / "host.yaml"
    host_file.write_text("slots: 8\ngpus: 4\n")
    assert describe_host(host_file).gpus == 4
    assert describe_host(host_file, gpus=2).gpus == 2, "the option wins"
    assert describe_host(None).gpus == 0
    host_file.write_text("gpus: -1\n")
    with pytest.raises(HostSpecError, match="gpus"):
        describe_host(host_file)


# ---------------------------------------------------------------- the notice
def test_a_notice_document_gives_its_time() -> None:
    body = b'{"action": "terminate", "time": "2026-12-01T08:22:00Z"}'
    assert notice_time(body, 0) == 1796113320.0
    assert notice_time(b'{"action": "stop", "time": "2026-12-01T08:22:00"}', 0) == 1796113320.0
    assert notice_time(b'{"action": "hibernate"}', 1000.0) == 1000.0 + NOTICE_LEAD
    for bad in (b"<html>hello</html>", b'{"action": "dance"}', b"[]"):
        with pytest.raises(MetadataError):
            notice_time(bad, 0)


# ---------------------------------------------------------------- the controller
CONFIG = """\
cluster: t
session_interval: 10
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30}
"""
ADMIN = Identity("root-admin", "admin")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def run(tmp_path: Path, body: Callable[[Controller], Any]) -> None:
    async def main() -> None:
        ctl = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"),
                         Settings(heartbeat_interval=2), Clock())
        await ctl.start()
        try:
            await body(ctl)
        finally:
            await ctl.close()
            ctl.store.close()

    asyncio.run(main())


async def running_job(ctl: Controller, **spec: Any) -> int:
    """A job dispatched to n1 and reported running there."""
    await ctl.register("n1", RegisterRequest(slots=2, gpus=4))
    job, _ = await ctl.submit(ADMIN, SubmitRequest(command=["sleep", "60"]))
    record = ctl.view.jobs[job]
    record.spec = msgspec.structs.replace(record.spec, **spec)  # as submitted with GPUs
    await ctl.run_session()
    await asyncio.sleep(0.05)  # the dispatch made durable
    return job


def test_the_launch_carries_the_jobs_gpus(tmp_path: Path) -> None:
    async def body(ctl: Controller) -> None:
        await running_job(ctl, gpus=2, gpu_mode="exclusive_process", gpu_exclusive=True)
        [start] = (await ctl.heartbeat("n1", Heartbeat())).start
        assert (start.gpus, start.gpu_mode, start.gpu_exclusive) == (
            2, "exclusive_process", True)

    run(tmp_path, body)


def test_a_heartbeat_with_a_notice_closes_the_host_and_requeues_its_jobs(
        tmp_path: Path) -> None:
    async def body(ctl: Controller) -> None:
        job = await running_job(ctl)
        await ctl.heartbeat("n1", Heartbeat(running=[job]))
        assert ctl.job(job).state == "RUN"
        reply = await ctl.heartbeat("n1", Heartbeat(running=[job], reclaim_at=1_120.0))
        host = ctl.view.hosts["n1"]
        assert (host.state, host.reason) == ("closed", "reclaim"), "closed_Recl"
        assert ctl.job(job).state == "PEND", "requeued, to run elsewhere"
        assert reply.kill == [job], "what still runs there is killed"
        again = await ctl.heartbeat("n1", Heartbeat(running=[job], reclaim_at=1_120.0))
        assert again.kill == [job] and ctl.job(job).state == "PEND", "nothing twice"

    run(tmp_path, body)


def test_a_job_reported_ended_with_the_notice_is_not_requeued(tmp_path: Path) -> None:
    async def body(ctl: Controller) -> None:
        job = await running_job(ctl)
        await ctl.heartbeat("n1", Heartbeat(running=[job]))
        await ctl.heartbeat("n1", Heartbeat(finished=[JobReport(job, 0)], reclaim_at=1_120.0))
        assert ctl.job(job).state == "DONE"

    run(tmp_path, body)


def test_a_bad_notice_time_is_refused() -> None:
    for body in (b'{"reclaim_at": -1}', b'{"reclaim_at": "soon"}'):
        with pytest.raises(msgspec.ValidationError, match="reclaim_at"):
            msgspec.json.decode(body, type=Heartbeat)
