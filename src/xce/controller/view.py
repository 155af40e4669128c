"""The controller's view of jobs and hosts, built from the same facts as the scheduler
state: what the API shows and what decisions are checked against (a session's
dispatch is dropped when a fact about its job or hosts arrived while the session ran:
SessionRunner.run, from the facts that waited in the backlog).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from typing import Any, cast

import msgspec

from xce.controller.job_counts import JobCounts
from xce.model.causes import Cause
from xce.model.cluster import ClusterConfig, HostShape, ResourceValue
from xce.model.events import (
    ConfigLoaded,
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostExpected,
    HostRemoved,
    HostStateChanged,
    JobAccounted,
    JobFinished,
    JobHeld,
    JobKilled,
    JobModified,
    JobPreempted,
    JobRequeued,
    JobStarted,
    JobSubmitted,
)
from xce.model.jobs import JobSpec
from xce.model.lifecycle import HOST_LIFE, HostState

PEND, PSUSP, RUN, DONE, EXIT = "PEND", "PSUSP", "RUN", "DONE", "EXIT"
FINISHED = (DONE, EXIT)
# the facts that change a job the view keeps (its state or queue: JobCounts)
# (a set of exact types: an isinstance over six classes for every fact cost recovery
# time, bench_controller.py)
_JobFact = JobStarted | JobFinished | JobKilled | JobRequeued | JobModified | JobHeld
_JOB_CHANGES = frozenset(
    (JobStarted, JobFinished, JobKilled, JobRequeued, JobModified, JobHeld)
)


def end_state(event: JobFinished) -> str:
    """DONE for a job that exited 0 on its own, else EXIT (a reason: the controller or
    the agent ended it, e.g. its host was lost or it reached its run limit)."""
    return DONE if event.done else EXIT


class JobRecord(msgspec.Struct):
    """One job as the controller knows it (kept in snapshots when finished)."""

    spec: JobSpec
    state: str
    start_time: float | None = None
    end_time: float | None = None
    hosts: dict[str, int] = {}
    exit_code: int | None = None
    signal: int | None = None
    exit_reason: str = ""
    failure: str = ""  # why it failed on its host (its agent's words; JobAccounted)
    cpu_time: float | None = None  # s of CPU it used (None: not known)
    changes: list[tuple[float, str]] = []  # (time, change): xce modify, top, switch


class ExpectedHost(msgspec.Struct):
    """A host requested from a provider that has not joined: `expected`, or `failed`
    once its join deadline passed."""

    name: str
    template: str
    provider: str
    request: str
    token_sha256: str
    deadline: float
    since: float
    state: str = HostState.EXPECTED
    reason: str = ""


class HostView:
    """One host as the controller knows it. `last_heartbeat` and `unreach_since` are
    memory only: after a restart every agent gets a fresh grace period."""

    __slots__ = (
        "cause",
        "jobs",
        "joined",
        "last_heartbeat",
        "model",
        "name",
        "provider",
        "reason",
        "request",
        "resources",
        "resume",
        "slots",
        "state",
        "static",
        "template",
        "token_sha256",
        "type",
        "unreach_since",
        "used",
    )

    def __init__(self, shape: HostShape, template: str | None, state: str,
                 static: bool) -> None:
        """A host of `shape` (a static host's spec, or the fact of a host joining)."""
        self.name = shape.name
        self.slots = shape.slots
        self.type = shape.type
        self.model = shape.model
        self.resources: dict[str, ResourceValue] = dict(shape.resources)
        self.template = template
        self.state = state
        self.static = static
        self.reason = ""  # why it is in its state (the last transition's reason)
        self.cause: Cause | None = None  # and the cause of that transition, if any
        self.provider = ""
        self.request = ""  # the provider request it came from
        self.token_sha256 = ""  # the join token it joined with (its agent's credential)
        self.joined = 0.0
        # state, reason and cause to return to when the agent is back
        self.resume: tuple[str, str, Cause | None] = (HostState.OK, "", None)
        self.jobs: dict[int, int] = {}  # job -> slots here
        self.used = 0  # the slots of `jobs`, kept as they change (ClusterView)
        self.last_heartbeat: float | None = None
        self.unreach_since: float | None = None

    @property
    def closed_by_admin(self) -> bool:
        return self.state == HostState.CLOSED and self.cause is Cause.ADMIN


class ClusterView:
    """Jobs and hosts, kept by applying facts in log order."""

    def __init__(self) -> None:
        self.config = ClusterConfig()
        self.jobs: dict[int, JobRecord] = {}
        self.by_user: dict[str, dict[int, JobRecord]] = {}  # user -> jobs, in id order
        self.arrays: dict[int, dict[int, None]] = {}  # job array -> its elements' ids
        self.hosts: dict[str, HostView] = {}
        self.expected: dict[str, ExpectedHost] = {}
        self.last_job_id = 0
        # running jobs whose run limit changed since they started: their agents are told
        self.relimited: set[int] = set()
        self.last_host_number = 0  # names of expected hosts: <template>-<number>
        self.counts = JobCounts()  # jobs per (state, queue), kept as facts apply

    def hosts_by_template_and_state(self) -> Counter[tuple[str, str]]:
        """How many hosts of each (template, state), the expected (requested, not
        joined) ones included; static hosts under the template "" (the metrics' and
        the status page's host counts)."""
        counts: Counter[tuple[str, str]] = Counter()
        for host in self.hosts.values():
            counts[(host.template or "", str(host.state))] += 1
        for expected in self.expected.values():
            counts[(expected.template, str(expected.state))] += 1
        return counts

    def apply(self, event: Event, time: float) -> None:
        """Follow one fact; a job it changes leaves its count before and joins it after.
        (One method per kind of fact, found by its exact type: a `match` over the
        kinds cost recovery time, bench_controller.py.)"""
        follow = _FOLLOW.get(type(event))
        if follow is None:
            return  # (not a fact the view keeps)
        job = None
        if type(event) in _JOB_CHANGES:
            job = self.jobs.get(cast(_JobFact, event).job)
        if job is None:
            follow(self, event, time)
            return
        self.counts.drop(job.state, job.spec)
        try:
            follow(self, event, time)
        finally:
            self.counts.put(job.state, job.spec)

    def _submitted(self, event: JobSubmitted, time: float) -> None:
        spec = event.job
        self._add(JobRecord(spec, PSUSP if spec.hold else PEND))

    def _started(self, event: JobStarted, time: float) -> None:
        job_id = event.job
        job = self.jobs[job_id]
        job.state, job.start_time, job.hosts = RUN, event.time, dict(event.hosts)
        for name, slots in event.hosts.items():
            host = self.hosts[name]
            host.used += slots - host.jobs.get(job_id, 0)
            host.jobs[job_id] = slots

    def _finished(self, event: JobFinished, time: float) -> None:
        job = self._end(event.job, event.time)
        job.state = end_state(event)
        job.exit_code, job.signal, job.exit_reason = event.exit_code, event.signal, event.reason

    def _killed(self, event: JobKilled, time: float) -> None:
        job = self._end(event.job, event.time)
        job.state, job.exit_reason = EXIT, "killed"

    def _requeued(self, event: JobRequeued, time: float) -> None:
        job = self._end(event.job, None)
        job.state, job.start_time, job.hosts = PEND, None, {}

    def _accounted(self, event: JobAccounted, time: float) -> None:
        job = self.jobs.get(event.job)
        if job is not None:
            job.failure, job.cpu_time = event.failure, event.cpu_time

    def _preempted(self, event: JobPreempted, time: float) -> None:
        # (both sides' history, as xce jobs -l shows it; the state changes with the
        # requeue, kill or stop that follows)
        job_id, by, action = event.job, event.by, event.action
        for one, change in ((job_id, f"preempted by job {by} ({action})"),
                            (by, f"preempted job {job_id} ({action})")):
            if one in self.jobs:
                self.jobs[one].changes = [*self.jobs[one].changes, (event.time, change)]

    def _modified(self, event: JobModified, time: float) -> None:
        job = self.jobs[event.job]
        job.spec = event.spec
        job.changes = [*job.changes, (event.time, event.change)]
        if job.state == RUN:
            self.relimited.add(event.job)

    def _held(self, event: JobHeld, time: float) -> None:
        job = self.jobs[event.job]
        if job.state in (PEND, PSUSP):
            job.state = PSUSP if event.held else PEND

    def _host_added(self, event: HostAdded, time: float) -> None:
        host = HostView(event, event.template, event.state, static=False)
        host.provider, host.joined = event.provider, event.time
        expected = self.expected.pop(event.name, None)
        if expected is not None:
            host.token_sha256, host.reason = expected.token_sha256, "joined"
            host.request = expected.request
        self.hosts[event.name] = host

    def _host_state_changed(self, event: HostStateChanged, time: float) -> None:
        host, state, reason = self.hosts[event.name], event.state, event.reason
        if state == HostState.CLOSED and not reason:
            reason = Cause.ADMIN  # facts written before transitions had reasons
        away = (HostState.UNREACH, HostState.LOST)
        host.unreach_since = time if state == HostState.UNREACH else host.unreach_since
        if state not in away:
            host.unreach_since = None
        if state in away and host.state in (HostState.OK, HostState.CLOSED):
            host.resume = (host.state, host.reason, host.cause)
        host.state, host.reason = state, reason
        host.cause = HOST_LIFE.cause_of(state, reason, event.cause)

    def _host_expected(self, event: HostExpected, time: float) -> None:
        self.expected[event.name] = ExpectedHost(
            event.name, event.template, event.provider, event.request,
            event.token_sha256, event.deadline, event.time,
        )
        self.last_host_number += 1

    def _expected_ended(self, event: ExpectedHostEnded, time: float) -> None:
        if event.state == HostState.REMOVED:
            del self.expected[event.name]
        else:
            self.expected[event.name].state = event.state
            self.expected[event.name].reason = event.reason

    def _host_removed(self, event: HostRemoved, time: float) -> None:
        del self.hosts[event.name]

    def _config_loaded(self, event: ConfigLoaded, time: float) -> None:
        self._load(event.config)

    def _load(self, config: ClusterConfig) -> None:
        self.config = config
        for spec in config.hosts:
            if spec.name not in self.hosts:
                self.hosts[spec.name] = HostView(spec, None, HostState.OK, static=True)

    def _end(self, job_id: int, end: float | None) -> JobRecord:
        job = self.jobs[job_id]
        self.relimited.discard(job_id)
        for name in job.hosts:
            host = self.hosts.get(name)
            if host is not None:
                host.used -= host.jobs.pop(job_id, 0)
        job.end_time = end
        return job

    def in_flight(self, template: str) -> int:
        """Expected hosts of `template` that may still join."""
        return sum(1 for e in self.expected.values()
                   if e.template == template and e.state == HostState.EXPECTED)

    def requested(self, template: str, leaving: Collection[str] = ()) -> list[float]:
        """When each expected host of `template` that may still join (but `leaving`)
        was requested, earliest first."""
        return sorted(e.since for e in self.expected.values()
                      if e.template == template and e.state == HostState.EXPECTED
                      and e.name not in leaving)

    def forget_finished(self, before: float) -> None:
        """Drop jobs that finished before `before` (LSF's CLEAN_PERIOD)."""
        old = [
            job for job in self.jobs.values()
            if job.state in FINISHED and job.end_time is not None and job.end_time < before
        ]
        for job in old:
            self.counts.drop(job.state, job.spec)
            del self.jobs[job.spec.id]
            del self.by_user[job.spec.user][job.spec.id]
            if job.spec.array:
                elements = self.arrays[job.spec.array]
                del elements[job.spec.id]
                if not elements:
                    del self.arrays[job.spec.array]

    def finished(self) -> list[JobRecord]:
        return [j for j in self.jobs.values() if j.state in FINISHED]

    def restore_finished(self, records: list[JobRecord]) -> None:
        for record in records:
            self._add(record)

    def _add(self, job: JobRecord) -> None:
        old = self.jobs.get(job.spec.id)
        if old is not None:
            self.counts.drop(old.state, old.spec)
        self.counts.put(job.state, job.spec)
        self.jobs[job.spec.id] = job
        self.by_user.setdefault(job.spec.user, {})[job.spec.id] = job
        if job.spec.array:
            self.arrays.setdefault(job.spec.array, {})[job.spec.id] = None
        self.last_job_id = max(self.last_job_id, job.spec.id)


# How the view follows each kind of fact it keeps (ClusterView.apply)
_FOLLOW: dict[type, Callable[[ClusterView, Any, float], None]] = {
    JobSubmitted: ClusterView._submitted,
    JobStarted: ClusterView._started,
    JobFinished: ClusterView._finished,
    JobKilled: ClusterView._killed,
    JobRequeued: ClusterView._requeued,
    JobAccounted: ClusterView._accounted,
    JobPreempted: ClusterView._preempted,
    JobModified: ClusterView._modified,
    JobHeld: ClusterView._held,
    HostAdded: ClusterView._host_added,
    HostStateChanged: ClusterView._host_state_changed,
    HostExpected: ClusterView._host_expected,
    ExpectedHostEnded: ClusterView._expected_ended,
    HostRemoved: ClusterView._host_removed,
    ConfigLoaded: ClusterView._config_loaded,
}
