"""A job's life from the durable log (`GET /jobs/{id}/history`, `xce hist`: LSF's
bhist): each fact about the job with its time (submitted, held and released, started
on its hosts, stopped and resumed while running, requeued and why, killed, finished
with its exit status, its failure and CPU time), and the time it spent pending, held
and running (stopped while running counts as running). Pend reasons are not facts
(they are recomputed every session), so they are not part of it.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from xce.controller.store import Fact
from xce.controller.view import PEND, PSUSP, RUN, end_state
from xce.model.api import JobEvent, JobHistory
from xce.model.events import (
    JobAccounted,
    JobFinished,
    JobHeld,
    JobKilled,
    JobModified,
    JobRequeued,
    JobStarted,
    JobSubmitted,
    JobSuspended,
)
from xce.model.jobs import JobSpec

ENDED = "ended"


class _Life:
    """A job's events so far, its state and the seconds spent in each state."""

    def __init__(self, spec: JobSpec, seq: int) -> None:
        self.spec = spec
        self.state = PSUSP if spec.hold else PEND
        self.since = spec.submit
        self.spent = {PEND: 0.0, PSUSP: 0.0, RUN: 0.0}
        self.hosts: dict[str, int] = {}
        self.events = [JobEvent(seq, spec.submit, "submitted")]

    def to(self, state: str, time: float) -> None:
        if self.state in self.spent:
            self.spent[self.state] += max(0.0, time - self.since)
        self.state, self.since = state, max(self.since, time)

    def take(self, fact: Fact) -> bool:
        """Follow one fact about the job; True once its accounting record is read (the
        job has ended for good: nothing more about it follows)."""
        at = fact.time
        match fact.event:
            case JobHeld(held=held) if self.state in (PEND, PSUSP):
                if (self.state == PSUSP) != held:
                    self.to(PSUSP if held else PEND, at)
                    self.events.append(JobEvent(fact.seq, at, "held" if held else "released"))
            case JobModified(spec=spec, time=time, change=change):
                self.spec = spec
                self.events.append(JobEvent(fact.seq, time or at, "modified", reason=change))
            case JobStarted(hosts=hosts, time=time):
                self.to(RUN, time or at)
                self.hosts = dict(hosts)
                self.events.append(JobEvent(fact.seq, time or at, "started", dict(hosts)))
            case JobSuspended(suspended=stopped, time=time, by=by) if self.state == RUN:
                self.events.append(JobEvent(fact.seq, time or at,
                                            "suspended" if stopped else "resumed",
                                            self.hosts, reason=f"by {by}" if by else ""))
            case JobRequeued(time=time, reason=reason):
                self.to(PEND, time or at)
                self.events.append(JobEvent(fact.seq, time or at, "requeued", self.hosts,
                                            reason=reason))
                self.hosts = {}
            case JobKilled(time=time):
                self.to(ENDED, time or at)
                self.events.append(JobEvent(fact.seq, time or at, "killed", self.hosts,
                                            state="EXIT", reason="killed"))
            case JobFinished(time=time) as finished:
                self.to(ENDED, time or at)
                self.events.append(JobEvent(
                    fact.seq, time or at, "finished", self.hosts, state=end_state(finished),
                    exit_code=finished.exit_code, signal=finished.signal,
                    reason=finished.reason))
            case JobAccounted(failure=failure, cpu_time=cpu_time):
                self.events[-1] = msgspec.structs.replace(self.events[-1], failure=failure,
                                                          cpu_time=cpu_time)
                return True
        return False

    def history(self, now: float) -> JobHistory:
        if self.state != ENDED:
            self.to(self.state, now)
        spec = self.spec
        return JobHistory(
            spec.id, spec.user, spec.queue, spec.name, list(spec.command), spec.n, spec.cwd,
            self.events, self.spent[PEND], self.spent[PSUSP], self.spent[RUN], self.since,
        )


def _job_of(event: object) -> int | None:
    match event:
        case (JobHeld(job=job) | JobStarted(job=job) | JobRequeued(job=job)
              | JobKilled(job=job) | JobFinished(job=job) | JobAccounted(job=job)
              | JobSuspended(job=job) | JobModified(job=job)):
            return job
    return None


def job_history(facts: Iterable[Fact], job_id: int, now: float) -> JobHistory | None:
    """The life of `job_id` told by `facts` (the log from before its submission on),
    up to its accounting record, else to the end of `facts` (`now`: the end of the
    time spent in its state then); None when `facts` do not submit it."""
    life: _Life | None = None
    for fact in facts:
        event = fact.event
        if life is None:
            if isinstance(event, JobSubmitted) and event.job.id == job_id:
                life = _Life(event.job, fact.seq)
        elif _job_of(event) == job_id and life.take(fact):
            break
    return life.history(now) if life is not None else None
