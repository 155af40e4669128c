"""A running job's output so far (`GET /jobs/{id}/peek`, `xce peek`: LSF's bpeek).

The agent serves nothing: it only calls the controller. So the controller asks for the
output in its next heartbeat reply to the job's first execution host (`peek`), the
agent reads the end of the job's files and sends them in a heartbeat at once
(`Heartbeat.output`), and the request that waits for them is answered. A host that
does not answer within `timeout` (two heartbeat intervals and a few seconds) gets the
caller a 504; nothing of this is a fact: nothing is logged or kept.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import msgspec

from xce.controller.auth import Identity
from xce.controller.jobs import JobDesk
from xce.controller.kernel import FactKernel
from xce.controller.problems import ApiProblem
from xce.controller.view import RUN
from xce.model.api import JobOutput
from xce.model.lifecycle import HostState

SLACK = 3.0  # seconds beyond two heartbeat intervals that a peek waits for its host


class PeekDesk:
    """The peeks waiting for their host's answer: job -> (host, future)."""

    def __init__(self, facts: FactKernel, jobs: JobDesk) -> None:
        self.facts = facts
        self.jobs = jobs
        self._waiting: dict[int, tuple[str, asyncio.Future[JobOutput]]] = {}

    def timeout(self) -> float:
        return 2 * self.facts.settings.heartbeat_interval + SLACK

    async def peek(self, who: Identity, job_id: int) -> JobOutput:
        """The output so far of `job_id`, as its first host reads it: only its owner or
        an admin may see it, only while it runs."""
        job = self.jobs.owned(who, job_id)
        if job.state != RUN or not job.hosts:
            raise ApiProblem(409, f"Job <{job_id}>: the job is {job.state}: only a running "
                                  "job's output can be peeked at")
        host = next(iter(job.hosts))
        view = self.facts.view.hosts.get(host)
        if view is None or view.state not in (HostState.OK, HostState.CLOSED):
            state = view.state if view is not None else "gone"
            raise ApiProblem(409, f"Job <{job_id}>: its host {host} is {state}: its output "
                                  "cannot be fetched")
        waiting = self._waiting.get(job_id)
        if waiting is None or waiting[0] != host or waiting[1].done():
            waiting = (host, asyncio.get_running_loop().create_future())
            self._waiting[job_id] = waiting
        try:
            # shielded: another caller may wait for the same answer
            return await asyncio.wait_for(asyncio.shield(waiting[1]), self.timeout())
        except TimeoutError:
            raise ApiProblem(504, f"Job <{job_id}>: its host {host} sent no output within "
                                  f"{self.timeout():g} s") from None
        finally:  # answered or given up: the host is no longer asked
            if self._waiting.get(job_id) is waiting:
                del self._waiting[job_id]

    def wanted(self, host: str) -> list[int]:
        """The jobs whose output `host` is asked for (again until it answers)."""
        return sorted(job for job, (at, future) in self._waiting.items()
                      if at == host and not future.done())

    def answered(self, host: str, outputs: Sequence[JobOutput]) -> None:
        """`host` sent these outputs: the peeks waiting for them are answered (an
        output nobody asked that host for is ignored)."""
        for output in outputs:
            waiting = self._waiting.get(output.job)
            if waiting is not None and waiting[0] == host:
                with contextlib.suppress(asyncio.InvalidStateError):
                    waiting[1].set_result(msgspec.structs.replace(output, host=host))
