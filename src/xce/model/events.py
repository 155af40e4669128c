"""Events: the facts of the controller's durable log, and what feeds the scheduler.

`Event` is every fact the controller logs. `SchedulerEvent`, a part of it, is what the
scheduler state takes (`SchedulerState.apply`): the simulator emits only these, and a
recording is a sequence of them. The rest (`ControllerRecord`: leases, provisioning
requests and instances, expected hosts, token steps, job accounting) is the
controller's own bookkeeping; the scheduler sees its effect only through the scheduler
events logged with it (a `SupplyChanged` beside an expected host or a token step), so
the controller never passes it on (`is_scheduler_event`).
"""

from __future__ import annotations

from typing import Final, TypeGuard, get_args

import msgspec

from xce.model.causes import Cause
from xce.model.cluster import ClusterConfig, HostShape
from xce.model.jobs import JobSpec

# States are stored as strings: the values of xce.model.lifecycle's enums
# (HostState, RequestState, InstanceState).


class ConfigLoaded(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    config: ClusterConfig


class JobSubmitted(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    job: JobSpec


class JobKilled(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    job: int
    time: float = 0


class JobStarted(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A dispatch applied: `hosts` maps host name to slots, `pools` maps a shared
    resource to the pool its tokens are taken from."""

    job: int
    hosts: dict[str, int]
    time: float = 0
    pools: dict[str, str] = {}


class JobFinished(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A running job ended: DONE when `exit_code` is 0 and no `signal`, else EXIT.
    `reason` says why the controller ended it (e.g. its host was lost)."""

    job: int
    time: float = 0
    exit_code: int = 0
    signal: int | None = None
    reason: str = ""

    @property
    def done(self) -> bool:
        """Whether the job ended DONE (else EXIT): exit code 0, no signal, and not
        ended by the controller for a reason."""
        return self.exit_code == 0 and self.signal is None and not self.reason


class JobRequeued(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A running job back to pending (its host was lost); `reason` says why, for
    people (`xce hist`; the live controller gives it, facts written before have none)."""

    job: int
    time: float = 0
    reason: str = ""


class JobPreempted(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A running job preempted for pending job `by` (a session's `preemptions`, carried
    out by the driver): `suspend` releases its slots at once (it stays running,
    stopped, until JobResumed); `requeue` and `kill` are followed by JobRequeued or
    JobKilled once it is stopped, its slots counting for `by` meanwhile."""

    job: int
    by: int
    action: str
    time: float = 0


class JobResumed(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A job suspended by a preemption goes on (a session's `resumes`): it holds its
    slots again."""

    job: int
    time: float = 0


class JobHeld(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    job: int
    held: bool = True


class JobSuspended(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A running job stopped (`suspended`, LSF's USUSP: its agent sends SIGSTOP to its
    process group, its slots stay taken) or resumed (SIGCONT) by `by` (`xce stop`,
    `xce resume`). The controller's record: the scheduler keeps the slots taken either
    way, so it never reaches the scheduler."""

    job: int
    suspended: bool = True
    time: float = 0
    by: str = ""


class JobModified(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A pending job changed (`xce modify`, `top`, `bottom`, `switch`: LSF's bmod,
    btop, bbot, bswitch), or a running job's run limit: `job` is `spec`'s id, `spec`
    the whole job as it is now, `change` what changed, for its history."""

    job: int
    spec: JobSpec
    time: float = 0
    change: str = ""


class HostAdded(HostShape, frozen=True, tag=True, tag_field="event"):
    """A host that is not in the static configuration (a provisioned host), or a
    static host coming back after removal."""

    template: str | None = None
    state: str = "ok"
    time: float = 0
    idle_since: float | None = None  # default: `time`
    provider: str = ""  # the provider that made it (provisioned hosts)
    # GPUs on the host; 0 for a host of a template: the template's (the scheduler)
    gpus: int = 0
    # the pending jobs it was requested for (its request's, in scheduling order): when
    # one of them starts, it takes this host before others as free (ARCHITECTURE.md
    # 2a, "hosts requested for a job go to that job"; docs/scheduling.md)
    requested_for: tuple[int, ...] = ()


class HostStateChanged(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A host's lifecycle transition (`reason`: why, for people, e.g. a close by an
    admin or for idleness; `cause`: why, for programs, e.g. `reclaim` for a host lost
    because its provider took it back; see docs/elastic.md). A fact without a cause
    (written before facts carried one) has the one its reason stands for
    (`HOST_LIFE.cause_of`)."""

    name: str
    state: str
    time: float = 0
    reason: str = ""
    cause: Cause | None = None


class HostExpected(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A host requested from a provider, not joined yet. The controller's record; the
    scheduler counts it through `SupplyChanged.in_flight`. `token_sha256`: the hash of
    its single-use join token."""

    name: str
    template: str
    provider: str
    request: str
    token_sha256: str
    deadline: float
    time: float = 0


class ExpectedHostEnded(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """An expected host that will not join: `failed` (deadline passed) or `removed`
    (cancelled, or a failed one cleared); `cause` cancelled or refused (its provider
    refused the request) for a removed one that was still expected."""

    name: str
    state: str
    reason: str = ""
    time: float = 0
    cause: Cause | None = None


class TokensChanged(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A step of borrowing or returning tokens of a countable pool (`pool`: "vcs" or
    "hspice/cloud"): `step` is borrow_requested, granted, refused, return_requested or
    returned. The controller's record; the scheduler sees the totals through
    `SupplyChanged`."""

    pool: str
    step: str
    amount: float
    time: float = 0


class HostRemoved(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    name: str
    time: float = 0


class SharedTotalChanged(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """The base total of a shared pool changed (`pool` empty: the only pool)."""

    resource: str
    total: float
    pool: str = ""


class SupplyChanged(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """Runtime supply facts from the provisioning side. Each given mapping updates
    the named entries (others keep their value). Resource keys read `vcs` (the
    countable's pool) or `hspice/cloud` (a named pool)."""

    in_flight: dict[str, int] = {}  # template -> expected hosts not yet joined
    tokens_in_flight: dict[str, float] = {}  # tokens asked for, not yet granted
    borrowed: dict[str, float] = {}  # borrowed tokens, part of the pool's total
    headroom: dict[str, float] = {}  # how much more could be borrowed now (<0: no runtime cap)
    allowance: dict[str, int] = {}  # template -> how many more hosts it allows now (<0: no cap)
    # template -> when each of its in-flight hosts was requested (replaces the list;
    # hosts in flight beyond it count as requested now)
    requested: dict[str, list[float]] = {}
    # template -> expected request-to-join time, s, observed at runtime (<0: back to
    # the configured expected_lead_time)
    lead_time: dict[str, float] = {}
    time: float = 0


class PoolHistoryRestored(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """The recent use of a countable pool, as (time, used, borrowed) snapshots: part
    of the events that rebuild a state (snapshots, recordings started mid-run), so
    that idle borrowed tokens are judged on the same history."""

    pool: str  # "vcs" or "hspice/cloud"
    history: list[tuple[float, float, float]]


class ShareUsage(msgspec.Struct, frozen=True, array_like=True):
    """A user's history in a fairshare queue: the slot-hours of their ended jobs,
    decayed to `as_of` (sched/fairshare.py)."""

    queue: str
    user: str
    hist: float
    as_of: float


class FairshareRestored(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """The fairshare queues' usage history: part of the events that rebuild a state
    (snapshots, recordings started mid-run), so that users keep their priorities."""

    usage: list[ShareUsage]


class EndedJob(msgspec.Struct, frozen=True):
    """How a job ended, as dependency conditions read it (`done`: DONE, else EXIT;
    `exit_code`: None when it has none, e.g. killed before it started), and what
    names it (its user, name, array and submit time)."""

    id: int
    time: float
    done: bool
    exit_code: int | None = None
    user: str = ""
    name: str = ""
    array: int = 0
    submit: float = 0


class EndedJobsRestored(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """The jobs the scheduler remembers as ended (for dependency conditions), oldest
    end first: part of the events that rebuild a state (snapshots, recordings
    started mid-run)."""

    jobs: list[EndedJob]


class LeaseGranted(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A provisioner instance (`holder`) holds a provider until `expires`; `token` is
    the fencing token: it grows whenever the lease changes hands, never goes back.
    The controller's record; it never reaches the scheduler."""

    provider: str
    holder: str
    token: int
    expires: float
    time: float = 0


class LeaseReleased(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """The holder gave the provider up before its lease expired."""

    provider: str
    holder: str
    token: int
    time: float = 0


class RequestRecorded(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A provisioning request of `count` hosts of `template`, made by `holder` (a
    provisioner instance or an admin), for `jobs` (the demand's jobs, in scheduling
    order; none for a request an admin made by hand). The controller's record
    (docs/requests.md); it never reaches the scheduler."""

    request: str
    provider: str
    template: str
    count: int
    holder: str
    time: float = 0
    jobs: tuple[int, ...] = ()


class RequestChanged(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A provisioning request moved to `state` (requested, in flight, fulfilled,
    partially fulfilled, failed, returning, returned) for `reason`."""

    request: str
    state: str
    reason: str
    time: float = 0


class InstanceRecorded(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """An instance of a request, made for the expected host `host` (its key)."""

    host: str
    request: str
    provider: str
    template: str
    time: float = 0


class InstanceChanged(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """An instance moved to `state` (requested, running, joined, draining, releasing,
    released, lost) for `reason`, with the `cause` of the host change it follows (if
    any; a fact without one has the one its reason stands for,
    `INSTANCE_LIFE.cause_of`); `instance_id` is the provider's id once known."""

    host: str
    state: str
    reason: str
    time: float = 0
    instance_id: str = ""
    cause: Cause | None = None


class JobAccounted(msgspec.Struct, frozen=True, tag=True, tag_field="event"):
    """A job's accounting record (LSF's lsb.acct), written in the commit of the fact
    that ends it (finished, exited or killed): who, where, when, how it ended, why it
    failed on its host (`failure`, its agent's words) and the CPU time its processes
    used (s). The controller's record (`xce acct`, `xce hist`); it never reaches the
    scheduler."""

    job: int
    user: str
    queue: str
    state: str  # DONE or EXIT
    submit: float
    end: float
    start: float | None = None  # its last start (None: it never started)
    n: int = 1
    hosts: dict[str, int] = {}
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    failure: str = ""
    cpu_time: float | None = None  # None: not known (it never ran, or ended unreported)
    time: float = 0


# What the scheduler state takes: SchedulerState.apply has an arm for each, and
# refuses anything else (a fact that is not the scheduler's must not reach it: it would
# count as a change of what fits and void the cross-session failure cache).
SchedulerEvent = (
    ConfigLoaded
    | JobSubmitted
    | JobKilled
    | JobStarted
    | JobFinished
    | JobRequeued
    | JobPreempted
    | JobResumed
    | JobHeld
    | JobModified
    | HostAdded
    | HostStateChanged
    | HostRemoved
    | SharedTotalChanged
    | SupplyChanged
    | PoolHistoryRestored
    | EndedJobsRestored
    | FairshareRestored
)

# The controller's own records: logged and replayed by the controller, never fed to
# the scheduler (a provisioner renews its lease every round: that changes nothing the
# scheduler decides on).
ControllerRecord = (
    HostExpected
    | ExpectedHostEnded
    | TokensChanged
    | LeaseGranted
    | LeaseReleased
    | RequestRecorded
    | RequestChanged
    | InstanceRecorded
    | InstanceChanged
    | JobAccounted
    | JobSuspended
)

Event = SchedulerEvent | ControllerRecord

SCHEDULER_EVENTS: Final[frozenset[type]] = frozenset(get_args(SchedulerEvent))


def is_scheduler_event(event: object) -> TypeGuard[SchedulerEvent]:
    """Whether `event` is one the scheduler state takes (a `SchedulerEvent`)."""
    return type(event) in SCHEDULER_EVENTS
