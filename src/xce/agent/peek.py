"""A running job's output so far, for `xce peek` (LSF's bpeek; docs/agent.md).

The agent reads the end of the job's output file (and of its error file when that is
another file) when the controller asks for it in a heartbeat reply. The agent runs as
root, and the path is the user's choice: only a regular file that belongs to the job's
user is read (the files the shim made for the job, or that the job's user could read
anyway), opened without blocking (never a FIFO's writer to wait for).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from xce.agent import jobfiles
from xce.agent.shim import job_account, job_files, run_host
from xce.model.api import PEEK_BYTES, JobOutput, Launch, OutputTail


def job_output(jobdir: Path, job: int, host: str) -> JobOutput:
    """The end of job `job`'s output (and error) file, as this host (`host`) has it."""
    launch = jobfiles.read(jobdir / jobfiles.LAUNCH, Launch)
    if launch is None or (jobdir / jobfiles.STATUS).exists():
        return JobOutput(job, host, unreadable=f"job {job} is not running on {host}")
    if not launch.run:
        return JobOutput(job, host, unreadable=f"job {job} only holds slots on {host}: its "
                                               f"command runs on {run_host(launch)}")
    try:
        account = job_account(launch.user)
    except KeyError:
        return JobOutput(job, host, unreadable=f"unknown user {launch.user!r} on {host}")
    files = job_files(launch, jobdir, account)
    owner = account.uid if account is not None else os.geteuid()
    stderr = tail(files.stderr, owner) if files.stderr != files.stdout else None
    return JobOutput(job, host, tail(files.stdout, owner), stderr)


def tail(path: str, owner: int, most: int = PEEK_BYTES) -> OutputTail:
    """The last `most` bytes of the regular file at `path` if it belongs to `owner`.
    The path is looked up without opening what it names (O_PATH: a device is never
    opened), and only the file found then is read (reopened through /proc/self/fd)."""
    try:
        found = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as err:
        return OutputTail(path, unreadable=f"cannot open it: {err.strerror or err}")
    try:
        info = os.fstat(found)
        if not stat.S_ISREG(info.st_mode):
            return OutputTail(path, unreadable="not a regular file: not shown")
        if info.st_uid != owner:
            return OutputTail(path, unreadable="it belongs to another user than the "
                                               "job's: not shown")
        fd = os.open(f"/proc/self/fd/{found}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            start = max(0, size - most)
            data = os.pread(fd, size - start, start)
        finally:
            os.close(fd)
    except OSError as err:
        return OutputTail(path, unreadable=f"cannot read it: {err.strerror or err}")
    finally:
        os.close(found)
    return OutputTail(path, size, data.decode(errors="replace"))
