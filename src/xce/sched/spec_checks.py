"""Checks of a job's spec that a submission and a modification share
(`SchedulerState._resolve`, sched/modify.py): its run limit against its queue's
`max_run_limit`, and its GPUs."""

from __future__ import annotations

import math

from xce.model.cluster import Queue
from xce.model.jobs import JobSpec
from xce.resreq.gpu import MAX_GPUS, MODES
from xce.sched.errors import SubmitError


def check_run_limit(spec: JobSpec, queue: Queue) -> None:
    """Refuse (SubmitError) a run limit below 0, or above the queue's max_run_limit."""
    limit = spec.run_limit
    if limit is None:
        return
    if limit < 0 or math.isnan(limit):
        raise SubmitError(f"run limit must be >= 0 seconds, not {limit:g}")
    if queue.max_run_limit is not None and limit > queue.max_run_limit:
        raise SubmitError(
            f"run limit {limit:g} s exceeds queue {queue.name}'s "
            f"max_run_limit {queue.max_run_limit:g} s"
        )


def check_gpus(spec: JobSpec) -> None:
    """Refuse (SubmitError) a GPU count out of range or an unknown GPU mode."""
    if not 0 <= spec.gpus <= MAX_GPUS:
        raise SubmitError(f"job {spec.id}: gpus must be between 0 and {MAX_GPUS}")
    if spec.gpu_mode not in MODES:
        raise SubmitError(
            f"job {spec.id}: GPU mode must be {' or '.join(MODES)}, not '{spec.gpu_mode}'"
        )
