"""Stopping and continuing jobs for the controller (`xce stop` / `xce resume` of a
running job, LSF's bstop/bresume: docs/agent.md).

The heartbeat reply lists the jobs of this host that must be stopped
(`HeartbeatReply.suspended`). The agent stops each one's process group (SIGSTOP) and
marks it in its directory (`stopped.json`), so that an agent that restarts still knows
which jobs it stopped; a marked job no longer listed is continued (SIGCONT). A job
being killed is continued so that it takes its SIGTERM (JobStore.kill), and is never
stopped again.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Collection

from xce.agent.jobfiles import HELD, KILL, STOPPED, Stopped
from xce.agent.jobs import JobStore, signal_job
from xce.atomic_json import write_atomic

log = logging.getLogger(__name__)


def hold_stopped(store: JobStore, wanted: Collection[int]) -> list[int]:
    """Stop the running jobs of `wanted` (again each time: a SIGCONT from elsewhere is
    undone), continue the ones this agent stopped that are not in it; the jobs that
    are stopped now."""
    stopped = []
    for job in store.running():
        jobdir = store.directory(job)
        if (jobdir / HELD).exists():
            continue  # it only holds slots here: no process
        marked = (jobdir / STOPPED).exists()
        if job in wanted and not (jobdir / KILL).exists():
            if not marked:  # marked first: an agent that dies now continues it later
                write_atomic(jobdir / STOPPED, Stopped(time.time()))
            if signal_job(jobdir, signal.SIGSTOP) and not marked:
                log.info("job %d: stopped (SIGSTOP to its process group)", job)
            stopped.append(job)
        elif marked:
            if signal_job(jobdir, signal.SIGCONT):
                log.info("job %d: continued (SIGCONT to its process group)", job)
            (jobdir / STOPPED).unlink(missing_ok=True)
    return stopped
