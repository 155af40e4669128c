"""Stopping, resuming and requeuing jobs (LSF's bstop, bresume, brequeue), one at a
time or every unfinished job of a user and queue at once (`bkill 0 -u USER -q QUEUE`).

* stop: a pending job is held (PSUSP, `JobHeld`); a running one is stopped (USUSP,
  `JobSuspended`: its agent sends SIGSTOP to its process group; its slots stay taken).
* resume: the reverse (PSUSP -> PEND; USUSP -> RUN: SIGCONT).
* requeue: a running (or stopped) job is killed on its hosts and pends again with the
  same id, priority and submit time (`JobRequeued`); it is not dispatched again until
  its old run has ended (old_runs.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from xce.controller.auth import Identity
from xce.controller.hosts import HostDesk
from xce.controller.jobs import JobDesk
from xce.controller.kernel import FactKernel
from xce.controller.problems import ApiProblem
from xce.controller.suspend import SuspendBook
from xce.controller.view import FINISHED, PEND, PSUSP, RUN, JobRecord
from xce.model.api import JobSelection
from xce.model.events import Event, JobHeld, JobKilled, JobRequeued, JobSuspended

ACTIONS = ("kill", "stop", "resume")


class JobControl:
    """Stop, resume and requeue, and the actions on many jobs at once."""

    def __init__(self, facts: FactKernel, jobs: JobDesk, hosts: HostDesk,
                 suspends: SuspendBook) -> None:
        self.facts = facts
        self.jobs = jobs
        self.hosts = hosts
        self.suspends = suspends

    def suspended(self, job: JobRecord) -> JobSuspended | None:
        """The fact that stopped `job`, if it runs stopped (USUSP)."""
        return self.suspends.stopped.get(job.spec.id) if job.state == RUN else None

    async def stop(self, who: Identity, job_id: int) -> JobRecord:
        """bstop: hold a pending job, stop a running one (already stopped: nothing)."""
        job = self.jobs.owned(who, job_id)
        if job.state in (PEND, PSUSP):
            return await self.jobs.hold(who, job_id, True)
        if job.state != RUN:
            raise ApiProblem(409, f"Job <{job_id}>: only a pending job can be held, or a "
                                  "running one stopped: the job has already finished")
        if self.suspended(job) is None:
            await self._commit(self._suspend(job, True, who))
        return job

    async def resume(self, who: Identity, job_id: int) -> JobRecord:
        """bresume: release a held job, continue a stopped one."""
        job = self.jobs.owned(who, job_id)
        if job.state in (PEND, PSUSP):
            return await self.jobs.hold(who, job_id, False)
        if job.state != RUN:
            raise ApiProblem(409, f"Job <{job_id}>: only a held or stopped job can be "
                                  "resumed: the job has already finished")
        if self.suspended(job) is None:
            raise ApiProblem(409, f"Job <{job_id}>: Job is not suspended (it runs)")
        preempted = self.facts.state.preemption_of(job_id)
        if preempted is not None:
            raise ApiProblem(409, f"Job <{job_id}>: suspended by a preemption for job "
                                  f"<{preempted}>: it resumes when that job ends")
        await self._commit(self._suspend(job, False, who))
        return job

    async def requeue(self, who: Identity, job_id: int) -> JobRecord:
        """brequeue: a running or stopped job is killed where it runs and pends again
        (same id, priority and submit time)."""
        job = self.jobs.owned(who, job_id)
        if job.state in FINISHED:
            raise ApiProblem(409, f"Job <{job_id}>: Job has already finished: only a "
                                  "running or stopped job can be requeued (submit it again)")
        if job.state != RUN:
            raise ApiProblem(409, f"Job <{job_id}>: the job is pending: only a running or "
                                  "stopped job can be requeued")
        await self._commit(self._requeue(job, who))
        return job

    def _requeue(self, job: JobRecord, who: Identity) -> list[Event]:
        """The fact of a requeue; the job is held back from dispatch until its old run
        ended on its hosts (before the fact: a session may follow at once)."""
        self.hosts.forget_run(job)
        return [JobRequeued(job.spec.id, self.facts.clock(), f"requeued by {who.name}")]

    def _suspend(self, job: JobRecord, stop: bool, who: Identity) -> list[Event]:
        return [JobSuspended(job.spec.id, stop, self.facts.clock(), who.name)]

    async def _commit(self, events: list[Event]) -> None:
        if events:
            await self.facts.commit(self.facts.clock(), events)

    # ------------------------------------------------------------------ many jobs
    async def act(self, who: Identity, action: str, selection: JobSelection) -> list[int]:
        """`action` (kill, stop or resume) on every unfinished job of the selection
        that it changes, in one commit; the ids of those jobs, in id order."""
        events: list[Event] = []
        changed: list[int] = []
        now = self.facts.clock()
        for job in self._selected(who, selection):
            found = self._action(job, action, who, now)
            if found is not None:
                events.append(found)
                changed.append(job.spec.id)
        await self._commit(events)
        return changed

    def _action(self, job: JobRecord, action: str, who: Identity, now: float) -> Event | None:
        """The fact `action` makes of one selected job, if it changes it."""
        job_id, stopped = job.spec.id, self.suspended(job) is not None
        if action == "kill":
            return JobKilled(job_id, now)
        if job.state in (PEND, PSUSP):
            held = action == "stop"
            return JobHeld(job_id, held) if (job.state == PSUSP) != held else None
        if (action == "stop") != stopped:
            return JobSuspended(job_id, action == "stop", now, who.name)
        return None

    def _selected(self, who: Identity, selection: JobSelection) -> Iterable[JobRecord]:
        """The unfinished jobs of the selection's user (the caller, another: admins
        only) and queue, in id order."""
        view = self.facts.view
        user = selection.user or who.name
        if user != who.name and who.role != "admin":
            whose = "every user's jobs" if user == "all" else f"the jobs of {user}"
            raise ApiProblem(403, f"only an admin may act on {whose} (-u {user})")
        queue = selection.queue
        if queue and queue not in {q.name for q in view.config.queues}:
            raise ApiProblem(404, f"{queue}: No such queue")
        pool = view.jobs if user == "all" else view.by_user.get(user, {})
        return sorted(
            (job for job in pool.values()
             if job.state not in FINISHED and (not queue or job.spec.queue == queue)),
            key=lambda job: job.spec.id,
        )
