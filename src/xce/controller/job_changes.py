"""Changing jobs after their submission in the live controller: `xce modify` (LSF's
bmod), `xce top` / `bottom` (btop / bbot) and `xce switch` (bswitch).

The scheduler core decides (xce.sched.modify: the new spec checked as a submission
is, a job's new place in its queue); the controller checks who asks and what state
the job is in, and logs one `JobModified` fact per job changed, all in one commit or
none (a refused request changes nothing). A job array's id changes every pending
element (and, for a change of the run limit only, every running one).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import msgspec

from xce.controller.auth import Identity
from xce.controller.jobs import JobDesk
from xce.controller.kernel import FactKernel
from xce.controller.problems import ApiProblem
from xce.controller.view import FINISHED, PEND, PSUSP, RUN, JobRecord
from xce.model.api import Modified, ModifyRequest
from xce.model.events import JobModified
from xce.model.jobs import JobSpec
from xce.sched.errors import SubmitError

Edit = Callable[[JobSpec], JobSpec]


# Why a running job is refused: bmod changes only its run limit; bswitch, btop and
# bbot take pending jobs (LSF's bbot says "Job has already started").
MODIFY_STARTED = "the job is running: only its run limit can be changed (-W)"
SWITCH_STARTED = "the job is running: only a pending job changes queue (requeue it first)"
MOVE_STARTED = "Job has already started: only a pending job moves in its queue"


class JobChanges:
    """What users (and admins) may change of their jobs once submitted."""

    def __init__(self, facts: FactKernel, jobs: JobDesk) -> None:
        self.facts = facts
        self.jobs = jobs

    async def modify(self, who: Identity, job_id: int, request: ModifyRequest) -> Modified:
        """bmod: the fields `request` gives; a running job only its run limit."""
        change = change_text(request)
        if not change:
            raise ApiProblem(400, f"Job <{job_id}>: nothing to change: give a field to change")
        limit_only = msgspec.structs.replace(request, run_limit=msgspec.UNSET) == ModifyRequest()
        return await self._change(who, job_id, change, lambda spec: edited(spec, request),
                                  running=limit_only)

    async def switch(self, who: Identity, job_id: int, queue: str) -> Modified:
        """bswitch: a pending job to another queue (a running one is refused)."""
        return await self._change(who, job_id, f"switched to queue {queue}",
                                  lambda spec: msgspec.structs.replace(spec, queue=queue),
                                  running=False, started=SWITCH_STARTED)

    async def move(self, who: Identity, job_id: int, top: bool) -> Modified:
        """btop / bbot: a pending job before the first (after the last) pending job of
        its queue and priority: among the caller's own jobs, an admin's among all."""
        state = self.facts.state
        user = None if who.role == "admin" else who.name

        def moved(spec: JobSpec) -> JobSpec:
            return msgspec.structs.replace(spec, order=state.moved_order(spec.id, top, user))

        return await self._change(who, job_id, "top" if top else "bottom", moved,
                                  running=False, started=MOVE_STARTED)

    def limits(self, host: str) -> dict[int, float | None]:
        """The run limits now of the running jobs whose first host is `host` that
        changed since they started (HeartbeatReply.limits: the agent ends the job at
        it; the controller's run-limit watch reads the same limit)."""
        view = self.facts.view
        found: dict[int, float | None] = {}
        for job_id in view.relimited:
            job = view.jobs[job_id]
            if job.hosts and next(iter(job.hosts)) == host:
                found[job_id] = self.jobs.run_limit(job.spec)
        return found

    async def _change(self, who: Identity, job_id: int, change: str, edit: Edit,
                      running: bool, started: str = MODIFY_STARTED) -> Modified:
        """Apply `edit` to the job (or the array's elements) and commit the changes:
        every one checked first, on a state that has every fact so far (no await
        between the checks and the commit)."""
        facts = self.facts
        await facts.quiet()
        now = facts.clock()
        events = []
        for job in self._targets(who, job_id, running, started):
            spec = self._checked(job, edit)
            if spec != job.spec:
                events.append(JobModified(spec.id, spec, now, change))
        if events:
            await facts.commit(now, events)
        return Modified(job_id, [event.job for event in events], change)

    def _checked(self, job: JobRecord, edit: Edit) -> JobSpec:
        """The job's new spec, checked by the scheduler core (400 when refused)."""
        state = self.facts.state
        shown = f"{job.spec.array}[{job.spec.index}]" if job.spec.index else str(job.spec.id)
        try:
            spec = state.modified(edit(job.spec))
        except SubmitError as err:
            raise ApiProblem(400, f"Job <{shown}>: {err}") from err
        old = job.spec
        if job.state != RUN and old != msgspec.structs.replace(
                spec, order=old.order, priority=old.priority, depend=old.depend,
                run_limit=old.run_limit):  # (what it asks for changed: can it ever run?)
            never = state.refusal(spec)
            if never is not None:
                raise ApiProblem(400, f"Job <{shown}>: {never}")
        return spec

    def _targets(self, who: Identity, job_id: int, running: bool,
                 started: str) -> list[JobRecord]:
        """The job `who` may change (403 if not the owner nor an admin; 409 once it
        finished, or running when `running` is false), or an array's elements that
        can be changed (409 when none can)."""
        view = self.facts.view
        changeable = (PEND, PSUSP, RUN) if running else (PEND, PSUSP)
        if job_id not in view.jobs and job_id in view.arrays:
            elements = [view.jobs[job] for job in view.arrays[job_id]]
            if who.role != "admin" and elements[0].spec.user != who.name:
                raise ApiProblem(403, f"Job <{job_id}>: not the owner of the job")
            found = [job for job in elements if job.state in changeable]
            if not found:
                raise ApiProblem(409, f"Job <{job_id}>: no element of the array is "
                                      + ("unfinished" if running else "pending"))
            return found
        job = self.jobs.owned(who, job_id)
        if job.state in FINISHED:
            raise ApiProblem(409, f"Job <{job_id}>: Job has already finished")
        if job.state not in changeable:
            raise ApiProblem(409, f"Job <{job_id}>: {started}")
        return [job]


def edited(spec: JobSpec, request: ModifyRequest) -> JobSpec:
    """`spec` with the fields `request` gives."""
    fields: dict[str, object] = {
        name: value for name in ("n", "res", "queue", "priority", "depend", "gpus",
                                 "gpu_mode", "gpu_exclusive")
        if (value := getattr(request, name)) is not None
    }
    if request.run_limit is not msgspec.UNSET:
        fields["run_limit"] = request.run_limit
    return msgspec.structs.replace(spec, **fields)


def change_text(request: ModifyRequest) -> str:
    """The change as the job's history shows it, in `xce modify`'s options."""
    parts = []
    if request.n is not None:
        parts.append(f"-n {request.n}")
    if request.res is not None:
        parts.append(f"-R {shlex.quote(request.res)}" if request.res else "-Rn")
    if request.run_limit is not msgspec.UNSET:
        parts.append("-Wn" if request.run_limit is None else f"-W {_minutes(request.run_limit)}")
    if request.queue is not None:
        parts.append(f"-q {shlex.quote(request.queue)}")
    if request.priority is not None:
        parts.append(f"-sp {request.priority}")
    if request.depend is not None:
        parts.append(f"-w {shlex.quote(request.depend)}" if request.depend else "-wn")
    gpu = [f"{key}={value}" for key, value in (
        ("num", request.gpus), ("mode", request.gpu_mode),
        ("j_exclusive", None if request.gpu_exclusive is None
         else "yes" if request.gpu_exclusive else "no"),
    ) if value is not None]
    if gpu:
        parts.append(f"-gpu {':'.join(gpu)}")
    return " ".join(parts)


def _minutes(seconds: float) -> str:
    """A run limit as -W takes it ([hh:]mm), or in seconds when not whole minutes."""
    if seconds % 60:
        return f"{seconds:g}s"
    minutes = int(seconds // 60)
    return f"{minutes // 60}:{minutes % 60:02d}" if minutes >= 60 else str(minutes)
