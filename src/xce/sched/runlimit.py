"""A job's run limit (ARCHITECTURE.md section 2a): its own, else its queue's
`run_limit`, else none (a queue's `max_run_limit` only caps what a job may ask for).
When a running job is planned to end is the plan's (`sched/plan.py`, Plan.planned)."""

from __future__ import annotations

from xce.model.cluster import Queue
from xce.model.jobs import JobSpec


def run_limit(spec: JobSpec, queue: Queue | None) -> float | None:
    """Seconds the job may run (`bsub -W`, else the queue's default), None: none."""
    if spec.run_limit is not None:
        return spec.run_limit
    return queue.run_limit if queue is not None else None

