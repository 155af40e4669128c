"""A job's run limit (ARCHITECTURE.md section 2a): its own, else its queue's
`run_limit`, else its queue's `max_run_limit` (LSF's RUNLIMIT with one value: the
hard limit of every job, those without `-W` too), else none. When a running job is
planned to end is the plan's (`sched/plan.py`, Plan.planned)."""

from __future__ import annotations

from xce.model.cluster import Queue
from xce.model.jobs import JobSpec


def run_limit(spec: JobSpec, queue: Queue | None) -> float | None:
    """Seconds the job may run (`bsub -W`, else the queue's default, else its
    maximum), None: none."""
    if spec.run_limit is not None:
        return spec.run_limit
    if queue is None:
        return None
    return queue.run_limit if queue.run_limit is not None else queue.max_run_limit

