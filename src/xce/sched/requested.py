"""Hosts requested for a job go to that job (ARCHITECTURE.md 2a, "Elastic").

A provisioned host joins with the jobs its request was made for (`HostAdded`'s
`requested_for`, kept in `SchedulerState.requested_for` while the host is present and
the job has not started). When the real pass places one of those jobs now, it takes
them before other hosts as free (the usual preference otherwise: most free slots, or
`order[]`, then the requested hosts, then name). So a job whose hosts joined as other
hosts freed up starts on its own hosts, and the ones that freed are the ones left
idle: none of the hosts obtained for it joins only to be given back unused. It
changes where a job goes, never whether it fits. A reservation later than now spares
them (and provisioned hosts idle now) where it fits as early without them
(`spared_by_later_starts`, sched/earliest.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xce.sched.state import SchedulerState


def jobs_served(jobs: Sequence[int], count: int) -> tuple[int, ...]:
    """The jobs the hosts of a request of `count` are for (`HostAdded.requested_for`):
    the first `count` of its demand's jobs, in scheduling order (each job takes at
    least one host). The live controller and the simulator both ask this."""
    return tuple(jobs[:count])


def requesting_buckets(state: SchedulerState) -> set[int]:
    """The ids of the buckets holding a pending job that hosts present were requested
    for (the others are placed as ever)."""
    found: set[int] = set()
    pending = state.pending
    for job_id in state.requested_for:
        job = pending.get(job_id)
        if job is not None and job.bucket is not None:
            found.add(id(job.bucket))
    return found


def requested_hosts(state: SchedulerState, job_id: int) -> set[int] | None:
    """The indices of the hosts present that were requested for `job_id`, if any."""
    indices = state.requested_for.get(job_id)
    return set(indices) if indices else None


def spared_by_later_starts(state: SchedulerState, job_id: int) -> set[int]:
    """The hosts a reservation of `job_id` later than now leaves alone where it fits
    as early without them: hosts requested for other pending jobs (they go to those
    jobs) and provisioned hosts idle now (held idle until its start, each would be
    paid for meanwhile and could not be given back). Never the hosts requested for
    `job_id` itself."""
    requested = state.requested_for
    spared = {index for job, indices in requested.items() if job != job_id for index in indices}
    spared.update(state.idle_provisioned)
    own = requested.get(job_id)
    if own:
        spared.difference_update(own)
    return spared


def takes_spared(state: SchedulerState, job_id: int, placed: dict[int, int]) -> bool:
    """Whether a placement of `job_id` takes a host `spared_by_later_starts` names."""
    idle, hosts = state.idle_provisioned, state.hosts
    count = len(hosts)
    for index in placed:
        host = hosts[index] if index < count else None
        if host is None:
            continue  # (a virtual host: after the state's hosts)
        if job_id not in host.requested_for and (index in idle or host.requested_for):
            return True
    return False
