"""The hosts jobs suspended by a preemption are on (docs/scheduling.md, "Preemption").

Such a job handed its slots to its preemptor, so no host lists it as running
(`HostRecord.running`), but it is still there and resumes there. So none of those
hosts is idle supply or empty, none may leave while it is suspended, and a host lost
under it requeues it, or exits it, as a running job (sched/loss.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the state's modules import this one)
    from xce.sched.hosts import HostRecord
    from xce.sched.queries import SchedulerQueries


def suspended_hosts(state: SchedulerQueries) -> set[int]:
    """The hosts jobs suspended by a preemption are on."""
    running = state.running
    return {index for job in state.preemptions.suspended for index in running[job].held}


def suspended_on(state: SchedulerQueries, index: int) -> list[int]:
    """The jobs suspended by a preemption on host `index`, by id."""
    running = state.running
    return sorted(job for job in state.preemptions.suspended if index in running[job].held)


def jobs_on(state: SchedulerQueries, host: HostRecord) -> list[int]:
    """The jobs on `host`, running or suspended by a preemption, by id."""
    if not state.preemptions.suspended:
        return sorted(host.running)
    return sorted([*host.running, *suspended_on(state, host.index)])
