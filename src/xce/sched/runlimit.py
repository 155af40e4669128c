"""A job's run limit (ARCHITECTURE.md section 2a): its own, else its queue's default
(`run_limit`, else its `max_run_limit`, as LSF's RUNLIMIT with one value), else none;
and when a running job is planned to end."""

from __future__ import annotations

import math

from xce.model.cluster import Queue
from xce.model.jobs import JobSpec


def run_limit(spec: JobSpec, queue: Queue | None) -> float | None:
    """Seconds the job may run (`bsub -W`, else the queue's default), None: none."""
    if spec.run_limit is not None:
        return spec.run_limit
    if queue is None:
        return None
    return queue.run_limit if queue.run_limit is not None else queue.max_run_limit


def planned_end(start: float, limit: float | None, now: float) -> float:
    """When a job started at `start` is planned to end: start + limit, one second from
    now when it is past it (it may still be running), never (inf) without a limit."""
    if limit is None:
        return math.inf
    end = start + limit
    return end if end > now else now + 1.0
