"""What drivers and the API may know of the scheduler's state: a read-only protocol.

The simulator and the controller hold a `SchedulerState`, change it only with
`apply(SchedulerEvent)` and `run_session`, and read it only through this protocol
(`SchedulerState` satisfies it). Its members are read-only views: a driver that
tried to change one, or read anything else of the state, fails `mypy --strict`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from xce.model.api import QueueShares
from xce.model.cluster import ClusterConfig, HostTemplate, Queue
from xce.model.jobs import JobSpec
from xce.sched.buckets import PendingJob
from xce.sched.hosts import HostRecord
from xce.sched.pools import PoolRecord
from xce.sched.preempted import PreemptBook
from xce.sched.running import RunningJob


class SchedulerQueries(Protocol):
    """The scheduler's state as a driver reads it."""

    @property
    def config(self) -> ClusterConfig:
        """The configuration loaded last."""

    @property
    def queues(self) -> Mapping[str, Queue]:
        """Queues by name."""

    @property
    def templates(self) -> Mapping[str, HostTemplate]:
        """The catalog's host templates by name."""

    @property
    def pending(self) -> Mapping[int, PendingJob]:
        """Jobs waiting to run (not held), by id."""

    @property
    def held(self) -> Mapping[int, PendingJob]:
        """Held jobs, by id."""

    @property
    def waiting(self) -> Mapping[int, PendingJob]:
        """Pending jobs waiting for a dependency condition or for room under their
        array's limit (in no bucket), by id."""

    @property
    def running(self) -> Mapping[int, RunningJob]:
        """Running jobs, by id: where they run and since when."""

    @property
    def hosts(self) -> Sequence[HostRecord | None]:
        """Hosts by index (None where a host was removed): `RunningJob.hosts` keys."""

    @property
    def host_by_name(self) -> Mapping[str, HostRecord]:
        """Hosts present, by name."""

    @property
    def provisioned(self) -> Mapping[int, HostRecord]:
        """Hosts present that came from a template, by index."""

    @property
    def idle_provisioned(self) -> Mapping[int, HostRecord]:
        """Hosts present that came from a template and run nothing (open or drained),
        by index."""

    @property
    def alive(self) -> Mapping[str, int]:
        """Template -> hosts of it present (joined, whatever their state)."""

    @property
    def in_flight(self) -> Mapping[str, int]:
        """Template -> expected hosts not yet joined."""

    @property
    def requested(self) -> Mapping[str, Sequence[float]]:
        """Template -> when its in-flight hosts were requested, sorted."""

    @property
    def allowance(self) -> Mapping[str, int]:
        """Template -> its runtime cap on new hosts, where one is set."""

    @property
    def lead_times(self) -> Mapping[str, float]:
        """Template -> its runtime lead-time estimate, where one is known."""

    @property
    def busy_slots(self) -> int:
        """Slots held by running jobs."""

    @property
    def failure_cache_hits(self) -> int:
        """Bucket failures reused from an earlier session, over every session."""

    @property
    def pools(self) -> Mapping[str, Sequence[PoolRecord]]:
        """Shared resource -> its pools, in configured order."""

    @property
    def countable_pools(self) -> Sequence[PoolRecord]:
        """Pools tokens can be borrowed for."""

    def pool_by_key(self, key: str) -> PoolRecord:
        """A pool named as in scenarios and demand (`vcs`, `hspice/cloud`)."""

    def lead_time(self, template: str) -> float:
        """How long a new host of `template` is expected to take to join."""

    def new_hosts_allowed(self, template: HostTemplate) -> int:
        """How many new hosts of `template` may be requested now (`xce.sched.room`)."""

    def template_alive(self, template: str) -> int:
        """Hosts of `template` present now."""

    def live_hosts(self) -> list[HostRecord]:
        """The hosts present."""

    @property
    def preemptions(self) -> PreemptBook:
        """The preemptions under way (sched/preempted.py)."""

    def preemption_of(self, job: int) -> int | None:
        """The job `job` is suspended for by a preemption, if it is."""

    def fairshare_table(self, queue: str | None, now: float) -> list[QueueShares]:
        """The fairshare queues (or `queue`) as of `now`: users, shares, usage and
        dynamic priorities (sched/fairshare.py)."""

    def resolve(self, spec: JobSpec) -> JobSpec:
        """A submission checked, defaults filled (SubmitError if refused); no change."""

    def modified(self, spec: JobSpec) -> JobSpec:
        """The new spec of a pending or running job checked as a JobModified event
        would be, defaults filled (SubmitError if refused); no change (sched/modify.py)."""

    def refusal(self, spec: JobSpec) -> str | None:
        """Why a resolved job could never run on this cluster, or None
        (sched/admission.py); fills caches only."""

    def moved_order(self, job_id: int, top: bool, user: str | None) -> float:
        """The `order` that puts a pending job first (`top`) or last among the pending
        jobs of its queue and priority (of `user`; None: of everyone) (SubmitError)."""
