"""A job's run limit (ARCHITECTURE.md section 2a): its own, else its queue's
`run_limit`, else none (a queue's `max_run_limit` only caps what a job may ask for);
and when a running job is planned to end."""

from __future__ import annotations

import math

from xce.model.cluster import Queue
from xce.model.jobs import JobSpec


def run_limit(spec: JobSpec, queue: Queue | None) -> float | None:
    """Seconds the job may run (`bsub -W`, else the queue's default), None: none."""
    if spec.run_limit is not None:
        return spec.run_limit
    return queue.run_limit if queue is not None else None


def planned_end(start: float, limit: float | None, now: float) -> float:
    """When a job started at `start` is planned to end: start + limit, one second from
    now when it is past it (it may still be running), never (inf) without a limit."""
    if limit is None:
        return math.inf
    end = start + limit
    return end if end > now else now + 1.0
