"""Admission: a job no configured host nor template could ever run is refused at
submission, with the reason (the rule is sched/ever.py's, which also keeps jobs a
configuration change made impossible out of the session)."""

from __future__ import annotations

from xce.model.jobs import JobSpec
from xce.sched.ever import universe
from xce.sched.state import SchedulerState


def refusal(state: SchedulerState, spec: JobSpec) -> str | None:
    """Why a job (resolved: `SchedulerState.resolve`) could never run on this
    cluster, or None: more slots, GPUs or per-host consumables than any host or
    template its queue (and host list) may use has, a `select[]` none satisfies, or
    more of a shared resource than any pool reaching them could ever hold."""
    key = state.bucket_key(spec)
    bucket = state.buckets.get(key) or state.new_bucket(key)
    failure = universe(state).never(state, bucket)
    return None if failure is None else failure.detail
