"""Scheduling sessions in the live controller, and what the last one said.

A session runs off the event loop on the scheduler state; facts that arrive meanwhile
wait in the backlog (kernel.py). Its dispatches are then checked against what those
facts changed and dropped when stale, never applied half; the others are applied and
logged, and their agents are told to start them once they are durable (hosts.py).
"""

from __future__ import annotations

import logging

from xce.controller.hosts import HostDesk
from xce.controller.kernel import FactKernel
from xce.controller.old_runs import WAITING
from xce.controller.runlimits import session_delay
from xce.controller.view import PEND
from xce.model.api import PREEMPTION
from xce.model.events import (
    Event,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobHeld,
    JobKilled,
    JobModified,
    JobPreempted,
    JobRequeued,
    JobResumed,
    JobStarted,
    JobSubmitted,
    JobSuspended,
    SchedulerEvent,
)
from xce.model.lifecycle import HostState
from xce.model.result import Dispatch, Reservation, SessionResult
from xce.sched import SchedulerState, run_session
from xce.sched.loss import LOST_EXIT_CODE
from xce.sched.reasons import ORPHAN_ENDED
from xce.sched.state import SchedulerInputError

log = logging.getLogger("xce.controller")


class SessionRunner:
    """Runs the sessions; keeps the last one's result, pend reasons and reservations."""

    def __init__(self, facts: FactKernel, hosts: HostDesk) -> None:
        self.facts = facts
        self.hosts = hosts
        self.count = 0  # sessions run since the controller started
        # the scheduler state's failure-cache hits as of the end of the last session
        self.failure_cache_hits = 0
        self.last_result: SessionResult | None = None
        self._reasons: dict[int, tuple[str, str]] = {}  # pend reasons of the last session
        self._reservations: dict[int, Reservation] = {}  # of the last session, by job

    async def run(self) -> SessionResult | None:
        """One scheduling session on the scheduler state, off the event loop."""
        facts = self.facts
        if facts.busy:
            return None
        now = facts.clock()
        facts.reading()
        try:
            result, reasons = await facts.off_loop(lambda state: _session(state, now))
        except BaseException:
            facts.done_reading()
            raise
        facts.record_session(now, result)  # (before the facts that waited: it did not see them)
        backlog = facts.done_reading()
        self.count += 1
        self.failure_cache_hits = facts.state.failure_cache_hits
        self.last_result = result
        self._reasons = reasons
        self._reservations = {found.job: found for found in result.reservations}
        stale_jobs: set[int] = set()
        stale_hosts: set[str] = set()
        for _time, event in backlog:
            _touched(event, stale_jobs, stale_hosts)
        started: list[JobStarted] = []
        for decision in result.dispatch:
            if self.hosts.old_runs.blocks(decision.job, facts.view):
                self._reasons[decision.job] = (WAITING, "requeue")  # (next session again)
                continue
            if not self._still_valid(decision, stale_jobs, stale_hosts):
                log.info("session %d: dispatch of job %d dropped (changed meanwhile)",
                         self.count, decision.job)
                continue
            event = JobStarted(decision.job, dict(decision.hosts), now, dict(decision.pools))
            try:
                facts.apply_dispatch(now, event)
            except SchedulerInputError as err:  # should not happen: checked above
                log.error("session %d: dispatch of job %d refused: %s",
                          self.count, decision.job, err)
                continue
            started.append(event)
        if started:
            durable = facts.append(now, started)
            self.hosts.launch_when_durable(durable, [e.job for e in started])
        # Pending jobs whose dependency condition can never be satisfied, to end (-ti,
        # orphan_job_term_timeout): EXIT, never run.
        orphans = [JobFinished(job, now, LOST_EXIT_CODE, None, ORPHAN_ENDED)
                   for job in result.orphans
                   if job not in stale_jobs and job in facts.state.waiting]
        if orphans:
            log.info("session %d: %d job(s) ended: %s", self.count, len(orphans),
                     ORPHAN_ENDED)
            await facts.commit(now, orphans)
        preempted = self._preempt(result, stale_jobs, now)
        if preempted:
            await facts.commit(now, preempted)
        await facts.snapshot_when_due()
        return result

    def _preempt(self, result: SessionResult, stale: set[int], now: float) -> list[Event]:
        """The facts that carry out the session's preemptions and resumes (those whose
        jobs no fact changed meanwhile): a requeued victim is killed on its hosts and
        pends again, a killed one ends, a suspended one is stopped (SIGSTOP, USUSP)
        and its slots go to its preemptor; a resumed one is continued (SIGCONT)."""
        state, view = self.facts.state, self.facts.view
        facts: list[Event] = []
        for job in result.resumes:
            if job not in stale and state.preemption_of(job) is not None:
                facts += [JobResumed(job, now), JobSuspended(job, False, now, PREEMPTION)]
        for found in result.preemptions:
            victim = view.jobs.get(found.job)
            if found.job in stale or found.by in stale or victim is None or (
                found.job not in state.running
            ):
                continue
            log.info("session %d: job %d preempted by job %d (%s)", self.count, found.job,
                     found.by, found.action)
            facts.append(JobPreempted(found.job, found.by, found.action, now))
            why = f"preempted by job {found.by}"
            if found.action == "suspend":
                facts.append(JobSuspended(found.job, True, now, PREEMPTION))
            elif found.action == "kill":
                facts.append(JobFinished(found.job, now, LOST_EXIT_CODE, None, why))
            else:
                self.hosts.forget_run(victim)
                facts.append(JobRequeued(found.job, now, why))
        return facts

    def _still_valid(self, decision: Dispatch, stale_jobs: set[int],
                     stale_hosts: set[str]) -> bool:
        """Whether a dispatch still holds: no fact about its job or hosts waited for
        the session, its job is pending and its hosts are ok."""
        job = self.facts.view.jobs.get(decision.job)
        return not (
            decision.job in stale_jobs
            or job is None
            or decision.job not in self.facts.state.pending  # (a condition no longer met)
            or job.state != PEND
            or any(h in stale_hosts for h in decision.hosts)
            or any(self._host_state(h) != HostState.OK for h in decision.hosts)
        )

    def _host_state(self, name: str) -> str:
        host = self.facts.view.hosts.get(name)
        return "gone" if host is None else host.state

    def pend_reason(self, job: int) -> tuple[str, str]:
        return self._reasons.get(job, ("New job is waiting for scheduling", "new"))

    def reservation(self, job: int) -> Reservation | None:
        """The pending job's reservation in the last session, if it got one."""
        return self._reservations.get(job)

    def delay(self) -> float:
        """Seconds until the next session: `session_interval`, or sooner when the last
        session's `next_due` says its decisions could change before then."""
        due = self.last_result.next_due if self.last_result is not None else float("inf")
        return session_delay(self.facts.config.session_interval, self.facts.clock(), due)


def _session(state: SchedulerState, now: float) -> tuple[SessionResult, dict[int, tuple[str, str]]]:
    """A session and its pend reasons by job (built here, off the event loop)."""
    result = run_session(state, now)
    reasons = {m.id: (g.reason, g.kind) for g in result.pending for m in g.members}
    return result, reasons


def _touched(event: SchedulerEvent, jobs: set[int], hosts: set[str]) -> None:
    """Record which job or host an event changed (decisions about them are stale)."""
    match event:
        case JobSubmitted():
            pass
        case (JobKilled(job=job) | JobFinished(job=job) | JobRequeued(job=job) | JobHeld(job=job)
              | JobModified(job=job)):
            jobs.add(job)
        case JobStarted(job=job, hosts=used):
            jobs.add(job)
            hosts.update(used)
        case HostStateChanged(name=name) | HostRemoved(name=name):
            hosts.add(name)
        case _:
            pass
