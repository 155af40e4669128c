"""The job wrapper: `python -m xce.agent.shim JOBDIR [LOCK_FD]`.

The agent starts one shim per job in a new session, so the shim and its job outlive
the agent (killed, restarted, upgraded). The shim holds the job directory's lock for
as long as it lives (LOCK_FD, handed over already locked by the agent; without it the
shim takes the lock itself), runs the command of `launch.json` as the leader of a new
process group, records both pids in `pids.json`, forwards SIGTERM and SIGINT to the
job's process group, waits, kills what is left of that group, and writes
`status.json`. Its own errors go to its stderr (`shim.log` when the agent starts it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import resource
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NamedTuple, NoReturn, TypeVar

from xce.agent import jobfiles
from xce.agent.gpus import gpu_environment
from xce.agent.jobfiles import GpuGrant, Pids, Status
from xce.atomic_json import write_atomic
from xce.model.api import MAX_FAILURE, Launch

CANNOT_RUN = 127  # like a shell: command not found, directory missing, ...
FORWARDED = {signal.SIGTERM, signal.SIGINT}
# Python ignores these at start-up; ignored signals would stay ignored in the job.
T = TypeVar("T")

RESTORED = (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)


class Account(NamedTuple):
    """The user a job runs as, when the shim runs as root."""

    name: str
    uid: int
    gid: int
    home: str


def job_account(user: str) -> Account | None:
    """Whom to switch to: only a shim running as root switches, to the job's user unless
    that is root. An unknown user raises KeyError."""
    if os.geteuid() != 0 or not user:
        return None
    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0:
        return None
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def job_environment(launch: Launch, gpus: GpuGrant | None = None) -> dict[str, str]:
    """The submission environment plus the LSF variables that parallel tools read, and
    for a job with GPUs here its devices (CUDA_VISIBLE_DEVICES) and their mode."""
    env = dict(launch.env)
    if gpus is not None:
        env.update(gpu_environment(gpus))
    env.update(
        LSB_JOBID=str(launch.job),
        XCE_JOBID=str(launch.job),
        LSB_HOSTS=" ".join(host for host, n in launch.hosts.items() for _ in range(n)),
        LSB_MCPU_HOSTS=" ".join(f"{host} {n}" for host, n in launch.hosts.items()),
        LSB_QUEUE=launch.queue,
        LSB_JOBNAME=launch.name or " ".join(launch.command),
    )
    if launch.index:  # an element of a job array: LSF's array id, index and name
        env.update(LSB_JOBID=str(launch.array), LSB_JOBINDEX=str(launch.index),
                   LSB_JOBNAME=f"{launch.name}[{launch.index}]")
    return env


class Files(NamedTuple):
    """Where the job runs and writes."""

    cwd: str
    stdout: str
    stderr: str


def job_files(launch: Launch, jobdir: Path, account: Account | None) -> Files:
    """The working directory (default: the user's home) and the output files (`%J` is the
    job id, an array's id for its elements; `%I` the array index, 0 for a job of no
    array; relative to the working directory; default stdout: JOBDIR/stdout; default
    stderr: with stdout)."""
    cwd = launch.cwd or (account.home if account else os.path.expanduser("~"))
    job = launch.array if launch.index else launch.job

    def path(name: str) -> str:
        return os.path.join(cwd, name.replace("%J", str(job)).replace("%I", str(launch.index)))

    stdout = path(launch.output) if launch.output else str(jobdir / jobfiles.DEFAULT_OUTPUT)
    stderr = path(launch.error) if launch.error else stdout
    return Files(cwd, stdout, stderr)


OUTPUT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


def open_default_output(launch: Launch, files: Files, account: Account | None) -> int | None:
    """The default output file lies in the agent's job directory, where the job's user
    may neither create files nor even reach: the shim opens it, for that user."""
    if launch.output:
        return None
    fd = os.open(files.stdout, OUTPUT_FLAGS, 0o644)
    if account is not None:
        os.fchown(fd, account.uid, account.gid)
    return fd


class StartError(Exception):
    """The job's command could not be started: `what` was tried and failed for `why`
    (`errno` the OSError's, if any). `str()` is the line for the job's error file."""

    def __init__(self, what: str, why: str, code: int | None = None) -> None:
        super().__init__(f"cannot {what}: {why}")
        self.what, self.why, self.errno = what, why, code

    def failure(self, host: str, command: str) -> str:
        """The job's failure for its owner (JobReport.failure), naming the host."""
        if self.what == f"run {command!r}" and self.errno == errno.ENOENT:
            return f"command {command!r} not found on {host}"
        return f"cannot {self.what} on {host}: {self.why}"


def attempt(what: str, action: Callable[[], T]) -> T:
    """`action()`, its OSError turned into a StartError that says what was tried."""
    try:
        return action()
    except OSError as err:
        raise StartError(what, str(err.strerror or err), err.errno) from err


def unknown_user(user: str, host: str) -> str:
    """The failure of a job whose user this host does not know."""
    return f"unknown user {user!r} on {host} (the user must exist on the execution hosts)"


def run_host(launch: Launch) -> str:
    """The host that runs the job's command: its first execution host."""
    return next(iter(launch.hosts), "?")


def exec_job(
    launch: Launch, files: Files, account: Account | None, stdout_fd: int | None,
    gpus: GpuGrant | None = None, failures: int | None = None,
) -> NoReturn:
    """In the forked child: become the job (own process group, the job's user, its files
    and directory) and exec the command; on failure say why on stderr (and as the
    job's failure on `failures`, a pipe closed by the exec) and exit 127.
    `stdout_fd`: the default output file, already open; `gpus`: the job's devices here
    (refused: it fails)."""
    try:
        os.setpgid(0, 0)
        for sig in RESTORED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        if account is not None:
            attempt(f"switch to user {account.name!r}", lambda: become(account))
        redirect(files, stdout_fd)
        attempt(f"change to directory {files.cwd!r}", lambda: os.chdir(files.cwd))
        if gpus is not None and gpus.refused:
            raise StartError("have its GPUs", gpus.refused)
        command, env = launch.command, job_environment(launch, gpus)
        attempt(f"run {command[0]!r}", lambda: os.execvpe(command[0], command, env))
    except StartError as err:
        with contextlib.suppress(OSError):
            os.write(2, f"xce: job {launch.job}: {err}\n".encode())
        if failures is not None:
            with contextlib.suppress(OSError):
                failure = err.failure(run_host(launch), launch.command[0])
                os.write(failures, failure.encode()[:MAX_FAILURE])
    finally:
        os._exit(CANNOT_RUN)  # never back into the shim's code, whatever happened


def become(account: Account) -> None:
    """Drop root for the job's user and groups."""
    os.initgroups(account.name, account.gid)
    os.setgid(account.gid)
    os.setuid(account.uid)


def redirect(files: Files, stdout_fd: int | None) -> None:
    """stdin from /dev/null; stdout and stderr appended to the job's files."""
    stdout = stdout_fd
    if stdout is None:
        stdout = attempt(
            f"open output file {files.stdout!r}",
            lambda: os.open(files.stdout, OUTPUT_FLAGS, 0o644),
        )
    stderr = stdout
    if files.stderr != files.stdout:
        stderr = attempt(
            f"open error file {files.stderr!r}",
            lambda: os.open(files.stderr, OUTPUT_FLAGS, 0o644),
        )
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)


def run(launch: Launch, jobdir: Path, gpus: GpuGrant | None = None) -> Status:
    """Run the job to its end and say how it ended (and why it could not start)."""
    start, started = time.time(), time.monotonic()
    try:
        account = job_account(launch.user)
    except KeyError:
        print(f"xce: job {launch.job}: unknown user {launch.user!r}", file=sys.stderr)
        return Status(CANNOT_RUN, None, start, start, 0.0,
                      failure=unknown_user(launch.user, run_host(launch)))
    files = job_files(launch, jobdir, account)
    try:
        stdout_fd = attempt(f"open output file {files.stdout!r}",
                            lambda: open_default_output(launch, files, account))
    except StartError as err:
        print(f"xce: job {launch.job}: {err}", file=sys.stderr)
        return Status(CANNOT_RUN, None, start, start, 0.0,
                      failure=err.failure(run_host(launch), launch.command[0]))
    # Blocked until the job is its own process group and the handlers are in place.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    failures, failed = os.pipe()  # (not inherited by the job: closed by its exec)
    pid = os.fork()
    if pid == 0:
        os.close(failures)
        exec_job(launch, files, account, stdout_fd, gpus, failed)
    os.close(failed)
    if stdout_fd is not None:
        os.close(stdout_fd)
    with contextlib.suppress(OSError):  # the child may have done it (and exec'd) already
        os.setpgid(pid, pid)
    record_pids(jobdir, pid, start)
    failure = read_all(failures)  # until the exec (nothing) or the child's exit

    def forward(sig: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    # Wait without reaping: while the leader is a zombie its group id cannot be reused,
    # so ending the rest of the group (background processes) hits only the job.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    _, wait_status = os.waitpid(pid, 0)
    end = time.time()
    run_time = time.monotonic() - started
    # The job's processes that were waited for (the leader, and what it waited for).
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_time = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(wait_status):
        killer = os.WTERMSIG(wait_status)
        return Status(128 + killer, killer, start, end, run_time, failure, cpu_time)
    return Status(os.WEXITSTATUS(wait_status), None, start, end, run_time, failure, cpu_time)


def read_all(fd: int) -> str:
    """What is written to the pipe `fd` until its other end closes; `fd` is closed."""
    chunks = []
    with os.fdopen(fd, "rb") as pipe:
        while chunk := pipe.read(MAX_FAILURE):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")[:MAX_FAILURE]


def record_pids(jobdir: Path, job: int, start: float) -> None:
    """pids.json: the shim and the job's leader, with their start times, and when the
    job started (its run limit counts from then)."""
    shim = os.getpid()
    shim_start = jobfiles.process_start_time(shim)
    job_start = jobfiles.process_start_time(job)
    assert shim_start is not None and job_start is not None  # both alive or unreaped
    pids = Pids(shim, shim_start, job, job_start, start)
    write_atomic(jobdir / jobfiles.PIDS, pids)


def main(argv: list[str]) -> int:
    """`python -m xce.agent.shim JOBDIR [LOCK_FD]`."""
    if len(argv) not in (1, 2):
        print("usage: python -m xce.agent.shim JOBDIR [LOCK_FD]", file=sys.stderr)
        return 2
    jobdir = Path(argv[0])
    # Held (never closed) until the shim exits: the agent's sign that the job lives.
    lock_fd = int(argv[1]) if len(argv) == 2 else jobfiles.lock(jobdir / jobfiles.LOCK)
    os.set_inheritable(lock_fd, False)
    launch = jobfiles.read(jobdir / jobfiles.LAUNCH, Launch)
    if launch is None:
        print(f"xce shim: no {jobfiles.LAUNCH} in {jobdir}", file=sys.stderr)
        return 1
    gpus = jobfiles.read(jobdir / jobfiles.GPUS, GpuGrant)
    write_atomic(jobdir / jobfiles.STATUS, run(launch, jobdir, gpus))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
