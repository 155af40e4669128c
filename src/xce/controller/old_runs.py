"""Requeued jobs whose old run may still live on its hosts (`xce requeue`, a pending job
an agent still runs after a controller restart).

The rule: such a job is not dispatched again (on any host) until every host that may
still run it has sent a heartbeat that neither lists it running nor reports it ended,
that is until its agent has killed the old run, reported its end and had that report
acknowledged. So the old run's report (ignored: the job is pending) can never be taken
for the end of a later run, and a later run never meets the old one's job directory on
the agent. A host that is lost or gone (or removed) no longer holds the job back.
Memory only: after a controller restart, an agent that still runs a pending job says
so in its next heartbeat, and the job is held back again from then on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from xce.controller.view import PEND, PSUSP, ClusterView
from xce.model.lifecycle import HostState

# The states of a host whose agent may still run an old run (and will be heard from).
_MAY_RUN = (HostState.OK, HostState.CLOSED, HostState.UNREACH)
# What a pending job kept back waits for (its pend reason).
WAITING = "Requeued: waiting for its previous run to end on its host(s)"


class OldRuns:
    """Job -> the hosts where its previous run may still live."""

    def __init__(self) -> None:
        self.hosts: dict[int, set[str]] = {}

    def add(self, job: int, hosts: Iterable[str]) -> None:
        self.hosts.setdefault(job, set()).update(hosts)

    def heard(self, host: str, running: Collection[int], finished: Collection[int],
              orphans: Iterable[int], view: ClusterView) -> None:
        """A heartbeat of `host`: it runs `running`, reported `finished` ended, and is
        told to kill `orphans` (jobs it runs that the controller does not run there).
        A pending orphan waits for that run to end; a job this host neither runs nor
        reports any more no longer waits for it."""
        for job_id in orphans:
            job = view.jobs.get(job_id)
            if job is not None and job.state in (PEND, PSUSP):
                self.add(job_id, [host])
        for job_id, on in list(self.hosts.items()):
            if host in on and job_id not in running and job_id not in finished:
                self._clear(job_id, host)

    def blocks(self, job: int, view: ClusterView) -> bool:
        """Whether `job` must not be dispatched yet: a host that may still run its old
        run has not said that run is over."""
        on = self.hosts.get(job)
        if on is None:
            return False
        for name in list(on):
            host = view.hosts.get(name)
            if host is None or host.state not in _MAY_RUN:
                self._clear(job, name)
        return job in self.hosts

    def _clear(self, job: int, host: str) -> None:
        on = self.hosts.get(job)
        if on is not None:
            on.discard(host)
            if not on:
                del self.hosts[job]
