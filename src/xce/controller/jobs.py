"""Jobs in the live controller: submitted, killed, held and released through the API,
looked up, and ended by the controller when past their run limit."""

from __future__ import annotations

import logging

from xce.controller.arrays import kill_array, submit_array
from xce.controller.auth import Identity
from xce.controller.kernel import FactKernel
from xce.controller.problems import ApiProblem
from xce.controller.runlimits import overdue
from xce.controller.view import FINISHED, PEND, PSUSP, RUN, JobRecord
from xce.model.api import RUN_LIMIT_REACHED, SubmitRequest
from xce.model.events import Event, JobFinished, JobHeld, JobKilled, JobSubmitted
from xce.model.jobs import JobSpec
from xce.resreq.arrays import is_array
from xce.sched.loss import LOST_EXIT_CODE
from xce.sched.runlimit import run_limit
from xce.sched.state import SubmitError

log = logging.getLogger("xce.controller")


class JobDesk:
    """What users (and admins) ask of jobs, and the run-limit watch."""

    def __init__(self, facts: FactKernel) -> None:
        self.facts = facts

    async def submit(self, who: Identity, request: SubmitRequest) -> tuple[int, str]:
        facts = self.facts
        user = request.user or who.name
        if user != who.name and who.role != "admin":
            raise ApiProblem(403, f"only an admin may submit as another user ({user})")
        now = facts.clock()
        spec = JobSpec(
            id=facts.view.last_job_id + 1, user=user, queue=request.queue, n=request.n,
            res=request.res, submit=now, priority=request.priority, name=request.name,
            hold=request.hold, command=list(request.command), cwd=request.cwd,
            env=dict(request.env), output=request.output, error=request.error,
            run_limit=request.run_limit, gpus=request.gpus, gpu_mode=request.gpu_mode,
            gpu_exclusive=request.gpu_exclusive, depend=request.depend,
            end_orphan=request.end_orphan, hosts=tuple(request.hosts),
            exclusive=request.exclusive,
        )
        if is_array(request.name):  # -J "name[1-10]%2" (controller/arrays.py)
            return await submit_array(facts, spec)
        try:
            spec = facts.state.resolve(spec)
        except SubmitError as err:
            raise ApiProblem(400, str(err)) from err
        too_large = facts.state.refusal(spec)
        if too_large is not None:
            raise ApiProblem(400, too_large)
        facts.view.last_job_id = spec.id  # reserved even if the commit fails
        await facts.commit(now, [JobSubmitted(spec)])
        return spec.id, spec.queue

    def job(self, job_id: int) -> JobRecord:
        job = self.facts.view.jobs.get(job_id)
        if job is None:
            raise ApiProblem(404, f"Job <{job_id}>: No matching job found")
        return job

    def _owned(self, who: Identity, job_id: int) -> JobRecord:
        """The job, if `who` may change it: its owner, or an admin."""
        job = self.job(job_id)
        if who.role != "admin" and job.spec.user != who.name:
            raise ApiProblem(403, f"Job <{job_id}>: not the owner of the job")
        return job

    def owned(self, who: Identity, job_id: int) -> JobRecord:
        """The job, if `who` may see its output (`xce peek`): its owner, or an admin."""
        return self._owned(who, job_id)

    async def kill(self, who: Identity, job_id: int) -> JobRecord:
        if job_id not in self.facts.view.jobs and job_id in self.facts.view.arrays:
            return await kill_array(self.facts, who, job_id)  # every element
        job = self._owned(who, job_id)
        if job.state in FINISHED:
            raise ApiProblem(409, f"Job <{job_id}>: Job has already finished")
        await self.facts.commit(self.facts.clock(), [JobKilled(job_id, self.facts.clock())])
        return job

    async def hold(self, who: Identity, job_id: int, held: bool) -> JobRecord:
        job = self._owned(who, job_id)
        if job.state not in (PEND, PSUSP):
            raise ApiProblem(409, f"Job <{job_id}>: only a pending job can be held or released")
        await self.facts.commit(self.facts.clock(), [JobHeld(job_id, held)])
        return job

    def run_limit(self, spec: JobSpec) -> float | None:
        """The job's run limit in seconds: its own, else its queue's (None: none)."""
        return run_limit(spec, self.facts.state.queues.get(spec.queue))

    async def watch_limits(self) -> None:
        """End the running jobs past their run limit by more than `limit_grace` that
        their agent has not reported ended (it ends them at the limit): EXIT with
        RUN_LIMIT_REACHED and no exit status; the agent is then told to kill them."""
        facts = self.facts
        now = facts.clock()
        ended: list[Event] = []
        for job in self._running():
            assert job.start_time is not None
            limit = self.run_limit(job.spec)
            if overdue(job.start_time, limit, facts.settings.limit_grace, now, facts.up_since):
                log.warning("job %d: past its run limit and not reported ended: ending it",
                            job.spec.id)
                ended.append(JobFinished(job.spec.id, now, LOST_EXIT_CODE, None,
                                         RUN_LIMIT_REACHED))
        if ended:
            await facts.commit(now, ended)

    def _running(self) -> list[JobRecord]:
        """The running jobs, found through the hosts (never a scan of every job)."""
        view = self.facts.view
        found: dict[int, JobRecord] = {}
        for host in view.hosts.values():
            for job_id in host.jobs:
                job = view.jobs.get(job_id)
                if job is not None and job.state == RUN and job.start_time is not None:
                    found[job_id] = job
        return list(found.values())
