"""Detached processes on this machine, known by pid and start time (Linux `/proc`), so
that a reused pid is never mistaken for them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

POLL = 0.05  # s between checks while waiting for processes to end


@dataclass(frozen=True)
class Process:
    """A process: its pid and its start time in clock ticks since boot."""

    pid: int
    start: int

    def alive(self) -> bool:
        """Whether this very process still runs (not ended, not a zombie)."""
        stat = _stat(self.pid)
        return stat is not None and stat[0] != "Z" and stat[1] == self.start


def _stat(pid: int) -> tuple[str, int] | None:
    """State letter and start time (fields 3 and 22 of /proc/PID/stat), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after it.
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def find(marker: str) -> Process:
    """The live process whose command line contains `marker` (a dead Process when
    there is none): how a process started by an owner that died before it could
    record the pid is found."""
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                stat = _stat(int(entry.name))
                if stat is not None and stat[0] != "Z":
                    return Process(int(entry.name), stat[1])
        except OSError:
            continue
    return Process(0, 0)


def spawn(command: Sequence[str], cwd: Path, log: Path, env: dict[str, str]
          ) -> tuple[Process, subprocess.Popen[bytes]]:
    """Start `command` in a session of its own, output appended to `log`; the process,
    and the Popen the caller polls to reap it."""
    with open(log, "ab") as out:
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=cwd, env=env,
            start_new_session=True,
        )
    # Our unreaped child: its pid cannot be reused yet, so this is its start time.
    stat = _stat(child.pid)
    return Process(child.pid, stat[1] if stat else 0), child


def stop_groups(processes: Sequence[Process], grace: float) -> None:
    """SIGTERM the process group of each live process (each leads its own), SIGKILL
    those still alive after `grace` seconds; return once all have ended."""
    _signal_groups(processes, signal.SIGTERM)
    if _wait(processes, grace):
        return
    _signal_groups(processes, signal.SIGKILL)
    _wait(processes, grace + 5)


def _signal_groups(processes: Sequence[Process], sig: int) -> None:
    for process in processes:
        if process.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)


def _wait(processes: Sequence[Process], timeout: float) -> bool:
    """Whether every process ended within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(process.alive() for process in processes):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)
    return True
