"""The agent's job store: one directory per job under STATE/jobs/ (docs/agent.md).

Everything the agent knows about a job is in its directory, so an agent that restarts
(or is replaced by a newer one) finds its jobs again: a job runs while its shim holds
the directory's lock, and has ended once `status.json` exists.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from xce.agent import jobfiles
from xce.agent.gpus import grant_gpus
from xce.agent.jobfiles import (
    GPUS,
    HELD,
    KILL,
    LAUNCH,
    LOCK,
    PIDS,
    STATUS,
    STOPPED,
    GpuGrant,
    Held,
    KillRequest,
    Status,
)
from xce.agent.peek import job_output
from xce.agent.shim import run_host
from xce.atomic_json import write_atomic
from xce.model.api import RUN_LIMIT_REACHED, JobOutput, JobReport, Launch

log = logging.getLogger(__name__)

# A job whose shim ended without writing its status (the host rebooted, the shim was
# killed): its exit code is unknown.
LOST_EXIT_CODE = -1
DEFAULT_KILL_GRACE = 10.0
# Removed on ack, `launch.json` first: a directory without it is no job any more.
# What stays is the job's default output file and a shim.log that says something.
BOOKKEEPING = (LAUNCH, HELD, KILL, PIDS, GPUS, STATUS, STOPPED, LOCK)


class StateDirError(Exception):
    """A state directory the agent must not trust."""


def check_state_dir(state_dir: Path) -> None:
    """Create the state directory, or make sure that nobody else could have put jobs
    into it (the default lies in /tmp, where anyone may create it first): it must
    belong to the agent's user, and not be writable by others."""
    state_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    stat = state_dir.stat()
    if stat.st_uid != os.geteuid() or stat.st_mode & 0o022:
        raise StateDirError(
            f"{state_dir} belongs to another user or is writable by others: "
            "choose another --state-dir"
        )


class JobStore:
    """The jobs of this host, in `state_dir/jobs/<job id>/`."""

    def __init__(self, state_dir: Path, kill_grace: float = DEFAULT_KILL_GRACE,
                 gpus: Sequence[int] = ()) -> None:
        check_state_dir(state_dir)
        self.root = state_dir / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)
        self.kill_grace = kill_grace
        self.gpus = list(gpus)  # the host's GPU devices (indices)
        self._shims: dict[int, subprocess.Popen[bytes]] = {}  # started here: to be reaped
        self._terminated: set[int] = set()  # SIGTERM sent by this agent
        # When each job reaches its run limit (None: no limit, or being ended already);
        # a job not started yet is not in it.
        self._deadlines: dict[int, float | None] = {}

    def directory(self, job: int) -> Path:
        return self.root / str(job)

    def jobs(self) -> list[int]:
        """Every job of the store (started and not yet acknowledged), in id order."""
        return sorted(
            int(entry.name)
            for entry in self.root.iterdir()
            if entry.name.isdigit() and (entry / LAUNCH).exists()
        )

    def start(self, launch: Launch) -> bool:
        """Start a job (a job already in the store is left alone: False). A job that
        only holds slots here (`run` false) starts no process."""
        jobdir = self.directory(launch.job)
        if (jobdir / LAUNCH).exists():
            return False
        grant = self._gpu_grant(launch) if launch.gpus > 0 else None
        if grant is not None and grant.refused and self._ending_holders(grant):
            # The devices are held by jobs being ended (a kill and this start in one
            # reply): not started now; the controller sends it again next heartbeat.
            log.info("job %d: waits for the GPUs of jobs being ended", launch.job)
            return False
        jobdir.mkdir(exist_ok=True)
        if grant is not None:
            self._keep_grant(launch, jobdir, grant)
        if not launch.run:
            write_atomic(jobdir / HELD, Held(time.time()))
            write_atomic(jobdir / LAUNCH, launch)
            first = next(iter(launch.hosts), "?")
            log.info("job %d: holding its slots (its command runs on %s)", launch.job, first)
            return True
        # Locked before launch.json exists and handed to the shim: if the agent dies
        # before the shim has started, the lock is free and the job is reported lost.
        lock_fd = jobfiles.lock(jobdir / LOCK)
        try:
            write_atomic(jobdir / LAUNCH, launch)
            with open(jobdir / jobfiles.SHIM_LOG, "ab") as shim_log:
                self._shims[launch.job] = subprocess.Popen(
                    [sys.executable, "-m", "xce.agent.shim", str(jobdir), str(lock_fd)],
                    cwd=jobdir,
                    stdin=subprocess.DEVNULL,
                    stdout=shim_log,
                    stderr=shim_log,
                    pass_fds=(lock_fd,),
                    start_new_session=True,  # outlives the agent and its signals
                )
        except OSError:
            log.exception("job %d: cannot start its shim (it will be reported lost)", launch.job)
        else:
            log.info("job %d: started %s", launch.job, launch.command)
        finally:
            os.close(lock_fd)
        return True

    def _gpu_grant(self, launch: Launch) -> GpuGrant:
        """The devices for a job (gpus.grant_gpus) given those its running jobs hold."""
        held = {job: grant.devices for job in self.running()
                if (grant := jobfiles.read(self.directory(job) / GPUS, GpuGrant)) is not None}
        return grant_gpus(launch, self.gpus, held)

    def _ending_holders(self, grant: GpuGrant) -> bool:
        """Whether some job holding devices is being ended (asked to be killed)."""
        return any((self.directory(job) / KILL).exists() for job in grant.holders)

    def _keep_grant(self, launch: Launch, jobdir: Path, grant: GpuGrant) -> None:
        """Give the job its devices before it exists (`gpus.json` before
        `launch.json`); a refused job's shim fails it, saying why."""
        write_atomic(jobdir / GPUS, grant)
        if grant.refused:
            log.warning("job %d: no GPUs: %s", launch.job, grant.refused)
        else:
            log.info("job %d: GPU(s) %s (%s%s)", launch.job, ",".join(map(str, grant.devices)),
                     grant.mode, ", exclusive" if grant.exclusive else "")

    def running(self) -> list[int]:
        """Jobs that have not ended: their shim lives, or they hold slots."""
        self._reap()
        return [job for job in self.jobs() if self._runs(self.directory(job))]

    def finished(self) -> list[JobReport]:
        """A report for every job that ended and is not yet acknowledged. A job whose
        shim is gone without a status is recorded as lost (LOST_EXIT_CODE) first."""
        self._reap()
        reports = []
        for job in self.jobs():
            status = self._status(job)
            if status is not None:
                request = jobfiles.read(self.directory(job) / KILL, KillRequest)
                launch = jobfiles.read(self.directory(job) / LAUNCH, Launch)
                reports.append(JobReport(
                    job, status.exit_code, status.signal, status.run_time, status.end,
                    request.reason if request is not None else "",
                    failure_of(status, launch, ended_by_xce=request is not None),
                    status.cpu_time,
                ))
        return reports

    def output(self, job: int, host: str) -> JobOutput:
        """The output so far of a job running here (`host`: this host's name)."""
        return job_output(self.directory(job), job, host)

    def ack(self, jobs: Iterable[int]) -> None:
        """Forget ended jobs whose report the controller has made durable."""
        for job in jobs:
            jobdir = self.directory(job)
            if not (jobdir / STATUS).exists():
                log.debug("job %d: acknowledged, but no report of it here", job)
                continue
            for name in BOOKKEEPING:
                (jobdir / name).unlink(missing_ok=True)
            shim_log = jobdir / jobfiles.SHIM_LOG
            if shim_log.exists() and shim_log.stat().st_size == 0:
                shim_log.unlink()
            with contextlib.suppress(OSError):  # not empty: the job's default output
                jobdir.rmdir()
            self._terminated.discard(job)
            self._deadlines.pop(job, None)

    def kill(self, job: int, reason: str = "") -> None:
        """End a job: SIGTERM to its process group now, SIGKILL once the grace period
        is over (see `escalate`). A job that only holds slots ends at once (exit 0).
        `reason`: why the agent ends it itself, reported with its end."""
        jobdir = self.directory(job)
        if not (jobdir / LAUNCH).exists() or (jobdir / STATUS).exists():
            log.info("job %d: kill asked for, but it is not running here", job)
            return
        held = jobfiles.read(jobdir / HELD, Held)
        if held is not None:
            now = time.time()
            released = Status(0, None, held.start, now, now - held.start)
            write_atomic(jobdir / STATUS, released)
            log.info("job %d: released its held slots", job)
            return
        request = jobfiles.read(jobdir / KILL, KillRequest)
        if request is None:  # the first request starts the grace period
            request = KillRequest(time.time(), reason)
            write_atomic(jobdir / KILL, request)
            log.info("job %d: killing%s", job, f" ({reason})" if reason else "")
        self._deadlines[job] = None  # being ended: its limit no longer matters
        self._signal(job, request)

    def enforce_limits(self) -> list[int]:
        """Begin ending the jobs that reached their run limit (the launch's, counted
        from the job's start here): SIGTERM now, SIGKILL after the grace (`escalate`),
        reported with RUN_LIMIT_REACHED. The jobs it began to end."""
        now = time.time()
        reached = []
        for job in self.jobs():
            deadline = self._deadline(job)
            if deadline is not None and now >= deadline:
                log.info("job %d: reached its run limit", job)
                self.kill(job, RUN_LIMIT_REACHED)
                reached.append(job)
        return reached

    def set_limit(self, job: int, limit: float | None) -> None:
        """The controller changed a running job's run limit (`xce modify -W`): kept
        in its launch file (so an agent restart keeps it) and counted from its start."""
        jobdir = self.directory(job)
        launch = jobfiles.read(jobdir / LAUNCH, Launch)
        if launch is None or launch.run_limit == limit:
            return
        write_atomic(jobdir / LAUNCH, msgspec.structs.replace(launch, run_limit=limit))
        log.info("job %d: run limit now %s", job, "none" if limit is None else f"{limit:g} s")
        self._deadlines.pop(job, None)  # (recomputed from the launch file)

    def _deadline(self, job: int) -> float | None:
        """When `job` reaches its run limit; None: no limit, not started yet, ended or
        being ended."""
        if job in self._deadlines:
            return self._deadlines[job]
        jobdir = self.directory(job)
        launch = jobfiles.read(jobdir / LAUNCH, Launch)
        if (launch is None or launch.run_limit is None or not launch.run
                or (jobdir / KILL).exists() or (jobdir / STATUS).exists()):
            self._deadlines[job] = None
            return None
        pids = jobfiles.read(jobdir / PIDS, jobfiles.Pids)
        if pids is None or not pids.start:
            return None  # not started yet (asked again next time)
        deadline = self._deadlines[job] = pids.start + launch.run_limit
        return deadline

    def escalate(self) -> None:
        """Signal the jobs asked to end that still run: SIGTERM if not yet sent (the
        job's pids may not have been known at the kill), SIGKILL once past the grace."""
        for job in self.jobs():
            jobdir = self.directory(job)
            request = jobfiles.read(jobdir / KILL, KillRequest)
            if request is not None and not (jobdir / STATUS).exists():
                self._signal(job, request)

    def _signal(self, job: int, request: KillRequest) -> None:
        overdue = time.time() >= request.time + self.kill_grace
        if not overdue and job in self._terminated:
            return
        sig = signal.SIGKILL if overdue else signal.SIGTERM
        jobdir = self.directory(job)
        if signal_job(jobdir, sig) and not overdue:
            self._terminated.add(job)
        if (jobdir / STOPPED).exists():  # stopped (xce stop): continued to take the TERM
            signal_job(jobdir, signal.SIGCONT)
            (jobdir / STOPPED).unlink(missing_ok=True)

    def _runs(self, jobdir: Path) -> bool:
        if (jobdir / STATUS).exists():
            return False
        return (jobdir / HELD).exists() or jobfiles.is_locked(jobdir / LOCK)

    def _status(self, job: int) -> Status | None:
        jobdir = self.directory(job)
        status = jobfiles.read(jobdir / STATUS, Status)
        if status is not None or self._runs(jobdir):
            return status
        # The lock is free, so the shim is gone, and it writes its status before it
        # exits: read again, in case it did so since the first read.
        status = jobfiles.read(jobdir / STATUS, Status)
        if status is None:
            now = time.time()
            status = Status(LOST_EXIT_CODE, None, now, now, 0.0)
            write_atomic(jobdir / STATUS, status)
            log.warning("job %d: its shim ended without a status: lost", job)
        return status

    def _reap(self) -> None:
        """Collect the shims this agent started that have exited (no zombies)."""
        for job, shim in list(self._shims.items()):
            if shim.poll() is not None:
                del self._shims[job]


def failure_of(status: Status, launch: Launch | None, ended_by_xce: bool) -> str:
    """Why a job failed, for its owner (JobReport.failure): the shim's start failure;
    a signal that XCE did not send (`ended_by_xce`: a kill or its run limit); a job
    lost with its shim. Empty for a job that ran and exited, whatever its status."""
    host = run_host(launch) if launch is not None else "this host"
    if status.failure:
        return status.failure
    if status.exit_code == LOST_EXIT_CODE and status.signal is None:
        return (f"lost on {host}: its shim ended without saying how the job ended "
                "(the host rebooted, or the shim was killed)")
    if status.signal is not None and not ended_by_xce:
        try:
            name = signal.Signals(status.signal).name
        except ValueError:
            name = f"signal {status.signal}"
        return f"{name} ({signal.strsignal(status.signal) or 'unknown signal'}) on {host}"
    return ""


def signal_job(jobdir: Path, sig: int) -> bool:
    """Send `sig` to the job's process group, if its leader is still the process the
    shim started (pid and start time): False when there is none (yet)."""
    pids = jobfiles.read(jobdir / PIDS, jobfiles.Pids)
    if pids is None or jobfiles.process_start_time(pids.job) != pids.job_start:
        return False
    try:
        os.killpg(pids.job, sig)
    except ProcessLookupError:
        return False
    return True
