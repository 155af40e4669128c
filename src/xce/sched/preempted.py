"""Running jobs being preempted, in the scheduler state: who preempted them, since when,
and what their slots count as meanwhile (docs/scheduling.md, "Preemption").

A job being requeued or killed for a preemption still holds its slots until the
driver's JobRequeued / JobKilled says it stopped; they count for its preemptor
meanwhile (it preempts nothing more). A suspended one releases its slots at once
(JobPreempted) and holds them again when it is resumed (JobResumed).
"""

from __future__ import annotations

from bisect import insort
from typing import TYPE_CHECKING

from xce.model.events import JobPreempted, JobResumed
from xce.sched.errors import SchedulerInputError
from xce.sched.running import RunningJob, drop_end, hold_capacity

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState

SUSPEND = "suspend"
REQUEUE = "requeue"


class PreemptBook:
    """The preemptions under way, and when each job was last preempted."""

    __slots__ = ("last", "stopping", "suspended")

    def __init__(self) -> None:
        self.last: dict[int, float] = {}  # job -> when it was last preempted
        # victim being requeued or killed -> (preemptor, action)
        self.stopping: dict[int, tuple[int, str]] = {}
        self.suspended: dict[int, tuple[int, float]] = {}  # victim -> (preemptor, since)

    def busy(self, job: int) -> bool:
        """Whether a preemption of `job` is under way."""
        return job in self.stopping or job in self.suspended

    def waited_for(self, preemptor: int) -> list[int]:
        """The victims being requeued or killed for `preemptor`, in id order."""
        return sorted(v for v, (by, _action) in self.stopping.items() if by == preemptor)

    def requeuing(self) -> list[tuple[int, int]]:
        """The victims being requeued, with their preemptors, in id order."""
        return sorted(
            (victim, by) for victim, (by, action) in self.stopping.items() if action == REQUEUE
        )


def preempt(state: SchedulerState, event: JobPreempted) -> None:
    run = _running(state, event.job)
    book = state.preemptions
    if book.busy(event.job):
        raise SchedulerInputError(f"job {event.job} is already being preempted")
    book.last[event.job] = event.time
    if event.action == SUSPEND:
        book.suspended[event.job] = (event.by, event.time)
        hold_capacity(state, run, -1, event.time)
        drop_end(state, run)
    else:
        book.stopping[event.job] = (event.by, event.action)


def resume(state: SchedulerState, event: JobResumed) -> None:
    run = _running(state, event.job)
    found = state.preemptions.suspended.pop(event.job, None)
    if found is None:
        raise SchedulerInputError(f"job {event.job} is not suspended by a preemption")
    hold_capacity(state, run, +1, event.time)
    if run.end != float("inf"):  # (its limit counts the time it ran, not the pause)
        run.end += max(0.0, event.time - found[1])
        insort(state.ends, (run.end, run.spec.id, run))


def _running(state: SchedulerState, job: int) -> RunningJob:
    run = state.running.get(job)
    if run is None:
        raise SchedulerInputError(f"job {job} is not running")
    return run
