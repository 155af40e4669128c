"""The files of one job directory, shared by the agent and the shim (docs/agent.md).

The agent writes `launch.json` (and `held.json`, `kill.json`, `gpus.json`); the shim
holds a lock on `lock` for as long as it lives, writes `pids.json` and `status.json`,
and sends its own errors to `shim.log`. Every JSON file is replaced atomically
(`xce.atomic_json`), never written in place.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TypeVar

import msgspec

T = TypeVar("T")

LAUNCH = "launch.json"  # the Launch struct, as the controller sent it
HELD = "held.json"  # a job that only holds slots here (Launch.run false)
KILL = "kill.json"  # the controller asked for the job to end, or it reached its limit
LOCK = "lock"  # locked by the shim while it lives
PIDS = "pids.json"
GPUS = "gpus.json"  # the devices the agent gave the job (a job of Launch.gpus > 0)
STATUS = "status.json"
STOPPED = "stopped.json"  # the agent stopped the job (SIGSTOP) for the controller (xce stop)
SHIM_LOG = "shim.log"
DEFAULT_OUTPUT = "stdout"


class Status(msgspec.Struct, frozen=True):
    """How a job ended. `exit_code` is 128+signal when a signal ended it, like a shell;
    `failure`: why it could not start (for its owner, naming the host); `cpu_time`: the
    seconds of CPU its processes used (those that were waited for)."""

    exit_code: int
    signal: int | None
    start: float
    end: float
    run_time: float
    failure: str = ""
    cpu_time: float = 0.0


class Pids(msgspec.Struct, frozen=True):
    """The shim and the job's first process (the leader of the job's process group),
    each with its start time in clock ticks since boot, so a reused pid is not mistaken
    for them."""

    shim: int
    shim_start: int
    job: int
    job_start: int
    start: float = 0.0  # when the job started (wall clock; 0: not recorded)


class Held(msgspec.Struct, frozen=True):
    """Slots held for a parallel job whose command runs on another host."""

    start: float


class KillRequest(msgspec.Struct, frozen=True):
    """When the kill was first asked for: SIGKILL follows after the grace period.
    `reason`: why the agent itself ends the job (its run limit), empty for a kill the
    controller asked for."""

    time: float
    reason: str = ""


class Stopped(msgspec.Struct, frozen=True):
    """The job's process group was stopped (SIGSTOP) then, for the controller: it is
    continued (SIGCONT) once the controller no longer lists it, or when it is killed."""

    time: float


class GpuGrant(msgspec.Struct, frozen=True):
    """The GPU devices (indices) a job has on this host while it runs, and its mode;
    `refused`: why it got none (not enough free devices), for the shim to say and fail
    the job with 127; `holders`: then, the jobs holding devices."""

    devices: list[int]
    mode: str = "shared"
    exclusive: bool = False
    refused: str = ""
    holders: list[int] = []


def read(path: Path, kind: type[T]) -> T | None:
    """The JSON file at `path` as `kind`, or None when there is no such file."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=kind)
    except FileNotFoundError:
        return None


def process_start_time(pid: int) -> int | None:
    """When process `pid` started (field 22 of /proc/PID/stat), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after it.
    return int(stat.rsplit(")", 1)[1].split()[19])


def lock(path: Path) -> int:
    """Create `path` if needed and lock it; the lock lasts while the descriptor is open
    in any process (the agent hands it to the shim)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def is_locked(path: Path) -> bool:
    """Whether a live process holds the lock on `path` (no file: nobody does)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases our lock when we got it
    return False
