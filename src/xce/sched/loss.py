"""A running job whose host is lost: requeued, or exited, as its queue says
(`requeue_on_host_loss`). One rule for the live controller and the simulator."""

from __future__ import annotations

from typing import Final

from xce.model.events import JobFinished, JobRequeued
from xce.model.jobs import JobSpec
from xce.sched.queries import SchedulerQueries

LOST_EXIT_CODE: Final = -1  # a job ended with its host: no process exit status exists


def lost_job(state: SchedulerQueries, job: JobSpec, now: float, why: str
             ) -> JobRequeued | JobFinished:
    """The event that ends `job`'s run on a lost host."""
    queue = state.queues.get(job.queue)
    if queue is None or queue.requeue_on_host_loss:
        return JobRequeued(job.id, now, reason=why)  # (why, for `xce hist`)
    return JobFinished(job.id, now, LOST_EXIT_CODE, None, why)
