"""Changing a job after its submission (LSF's bmod, btop, bbot and bswitch): the
`JobModified` event in the scheduler state, and what the controller asks before it
logs one (the new spec checked, a job's new place in the order).

A pending job (queued, held, or waiting for a dependency or its array's limit) leaves
its place and comes back with its new spec, as a submission would be checked, keeping
its id and submit time (its `order`, when `top`/`bottom` set it, stands for the
submit time in the order). A running job may change only its run limit: its planned
end moves (the plan reads it).
"""

from __future__ import annotations

import math
from bisect import insort
from typing import TYPE_CHECKING

import msgspec

from xce.model.events import JobModified
from xce.model.jobs import JobSpec
from xce.sched.access import check_queue_user
from xce.sched.dependencies import bind
from xce.sched.errors import SchedulerInputError, SubmitError
from xce.sched.runlimit import run_limit
from xce.sched.running import drop_end
from xce.sched.spec_checks import check_run_limit

if TYPE_CHECKING:
    from xce.sched.buckets import PendingJob
    from xce.sched.state import SchedulerState


def check_modified(state: SchedulerState, spec: JobSpec, strict: bool = True) -> JobSpec:
    """`spec`, the new spec of a pending or running job, checked (SubmitError) and its
    defaults filled; nothing changes. A running job may differ only in its run limit;
    `strict`: the jobs a new dependency condition names must be found (as for a
    submission; the event itself takes a job that is not found as gone)."""
    old = state._submitted.get(spec.id)
    if old is None:
        raise SubmitError(f"job {spec.id} is neither pending nor running")
    if spec.id in state.running:
        if msgspec.structs.replace(spec, run_limit=old.run_limit) != old:
            raise SubmitError(f"job {spec.id} is running: only its run limit can change")
        check_run_limit(spec, state.queues[spec.queue])
        return spec
    spec = state._resolve(spec, new=False)
    if strict and spec.queue != old.queue:  # (bswitch, bmod -q: the new queue's users)
        check_queue_user(spec, state.queues[spec.queue])
    if strict and spec.depend and spec.depend != old.depend:
        bind(state, state.waits, spec, strict=True)  # (the jobs it names are found)
    return spec


def modify_job(state: SchedulerState, event: JobModified) -> None:
    """Apply a JobModified event (SubmitError / SchedulerInputError: nothing changed)."""
    if event.job != event.spec.id:
        raise SchedulerInputError(f"job {event.job}: a modification of job {event.spec.id}")
    spec = check_modified(state, event.spec, strict=False)
    job_id = spec.id
    run = state.running.get(job_id)
    if run is not None:
        drop_end(state, run)
        limit = run_limit(spec, state.queues[spec.queue])
        run.spec, run.end = spec, math.inf if limit is None else run.start + limit
        if run.end != math.inf:
            insort(state.ends, (run.end, job_id, run))
        state._submitted[job_id] = spec
        return
    old = state._submitted[job_id]
    held = job_id in state.held
    state._dequeue(job_id)
    waits = state.waits
    if old.depend != spec.depend:
        waits._leave(job_id)  # its old condition no longer holds it
    state._submitted[job_id] = spec
    if spec.depend and job_id not in waits.dependencies:
        waits.active = True
        waits._bind(state, spec)
    state._enqueue(spec, state.sort_key(spec), held)


def moved_order(state: SchedulerState, job_id: int, top: bool, user: str | None) -> float:
    """The `order` that puts pending job `job_id` first (`top`) or last among the
    pending jobs of its queue and priority (`user`: only among that user's jobs; None:
    among everyone's), as LSF's btop / bbot; its own when no other job is there.
    SubmitError when it is not pending."""
    me = _pending(state, job_id)
    if me is None:
        raise SubmitError(f"job {job_id} is not pending")
    spec = me.spec
    places: list[float] = [
        job.key[2] for job in _every_pending(state)
        if job.id != job_id and job.spec.queue == spec.queue
        and job.spec.priority == spec.priority and (user is None or job.spec.user == user)
    ]
    if not places:
        return float(me.key[2])
    return min(places) - 1.0 if top else max(places) + 1.0


def _pending(state: SchedulerState, job_id: int) -> PendingJob | None:
    return state.pending.get(job_id) or state.held.get(job_id) or state.waiting.get(job_id)


def _every_pending(state: SchedulerState) -> list[PendingJob]:
    return [*state.pending.values(), *state.held.values(), *state.waiting.values()]
