"""The controller's HTTP/JSON API: request and response bodies.

Shared by the controller (which serves them), the agent and the CLI (which send and
read them). Every error is `ApiError` with an HTTP 4xx/5xx status. Documented in
docs/api.md; the OpenAPI document at `/openapi.json` is generated from these types.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from xce.model.cluster import ResourceValue
from xce.model.jobs import MAX_USER_PRIORITY

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
# A job's user priority (`-sp`, LSF's 1..MAX_USER_PRIORITY; 0: none)
UserPriority = Annotated[int, msgspec.Meta(ge=0, le=MAX_USER_PRIORITY)]

# metrics: GET /metrics only (a Prometheus scraper's read-only token, docs/metrics.md)
ROLES = ("admin", "user", "agent", "scheduler", "provisioner", "metrics")
# The exit reason of a job ended at its run limit (by its agent, or by the controller
# when the agent did not report it in time): docs/cluster.md, "Run limits".
RUN_LIMIT_REACHED = "run limit reached"


class ApiError(msgspec.Struct, frozen=True):
    """Every error response: `{"error": "...", "status": 400}`."""

    error: str
    status: int


class NotLeader(msgspec.Struct, frozen=True):
    """A standby controller's answer to every call (503, docs/ha.md): an `ApiError`
    with the URL of the leader (empty while a takeover is under way)."""

    error: str
    status: int
    leader: str


# ---------------------------------------------------------------- jobs
class SubmitRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /jobs`. `user` may only be given by an admin (default: the caller)."""

    command: Annotated[list[str], msgspec.Meta(min_length=1)]
    n: Positive = 1
    res: str = ""
    queue: str = ""  # empty: the first configured queue
    name: str = ""
    cwd: str = ""
    env: dict[str, str] = {}
    output: str = ""  # stdout file on the execution host (%J: job id)
    error: str = ""  # stderr file (empty: with stdout)
    priority: UserPriority = 0  # `-sp`
    hold: bool = False
    user: str = ""
    # Seconds the job may run (`xce submit -W`), at most the queue's max_run_limit;
    # None: the queue's run_limit, else none.
    run_limit: float | None = None
    # GPUs on each host of the job (`xce submit -gpu "num=N:mode=...:j_exclusive=..."`,
    # parsed by xce.resreq.parse_gpu): JobSpec's gpus, gpu_mode, gpu_exclusive.
    gpus: NonNegative = 0
    gpu_mode: Literal["shared", "exclusive_process"] = "shared"
    gpu_exclusive: bool = False
    # A job array when `name` reads `name[index_list]%N` (`xce submit -J`): the answer's
    # `job` is the array's id. `depend`: the dependency condition (`-w`);
    # `end_orphan`: end the job if it can never be satisfied (`-ti`).
    depend: str = ""
    end_orphan: bool = False
    # Hosts the job may run on (`xce submit -m`): host names, host groups,
    # `template:GLOB`; empty: any host of its queue. `exclusive` (`-x`): it runs alone.
    hosts: list[str] = []
    exclusive: bool = False


class Submitted(msgspec.Struct, frozen=True):
    """`POST /jobs` answer: `Job <job> is submitted to queue <queue>.`"""

    job: int
    queue: str


class JobInfo(msgspec.Struct, frozen=True):
    """One job as `GET /jobs` and `GET /jobs/{id}` show it. `state`: PEND, PSUSP
    (held), RUN, USUSP (running, stopped: `xce stop`), DONE, EXIT."""

    id: int
    user: str
    queue: str
    state: str
    n: int
    res: str
    name: str
    command: list[str]
    submit_time: float
    start_time: float | None = None
    end_time: float | None = None
    exec_hosts: dict[str, int] = {}
    exit_code: int | None = None
    signal: int | None = None
    exit_reason: str = ""
    pend_reason: str = ""
    pend_kind: str = ""
    cwd: str = ""
    output: str = ""
    error: str = ""
    run_limit: float | None = None  # s: the job's own, else its queue's (None: none)
    # A pending job's reservation in the last session: when and where it is expected
    # to start (None, {}: it has none).
    expected_start: float | None = None
    reserved_hosts: dict[str, int] = {}
    # Why the job failed on its host, as its agent reported it (JobReport.failure);
    # and the CPU time (s) its processes used, once it ended (None: not known).
    failure: str = ""
    cpu_time: float | None = None
    # An element of a job array: the array's id and its index (shown ID[INDEX]); the
    # job's dependency condition (`-w`), if any.
    array: int = 0
    index: int = 0
    depend: str = ""
    # A running job stopped (state USUSP, `xce stop`): who stopped it (PREEMPTION: a
    # preemption), and when.
    suspended_by: str = ""
    suspended_time: float | None = None
    # Its changes since submission (`xce modify`, `top`, `bottom`, `switch`), oldest first.
    changes: list[JobChange] = []


# Who stopped and continued a job a preemption suspended (JobSuspended.by)
PREEMPTION: Final = "preemption"


class JobList(msgspec.Struct, frozen=True):
    jobs: list[JobInfo]


class ModifyRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /jobs/{id}/modify` (`xce modify`, LSF's bmod): the fields to change of a
    pending job (of a running one only `run_limit`); a field left out stays. `res` or
    `depend` "" removes them (-Rn, -wn); `run_limit` null removes the job's own (-Wn:
    the queue's then applies); `gpus` 0 removes its GPUs."""

    n: Positive | None = None
    res: str | None = None
    run_limit: float | msgspec.UnsetType | None = msgspec.UNSET
    queue: str | None = None
    priority: UserPriority | None = None
    depend: str | None = None
    gpus: NonNegative | None = None
    gpu_mode: Literal["shared", "exclusive_process"] | None = None
    gpu_exclusive: bool | None = None


class SwitchRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /jobs/{id}/switch` (`xce switch`, LSF's bswitch): the queue to move a
    pending job to."""

    queue: Name


class Modified(msgspec.Struct, frozen=True):
    """The answer of `modify`, `top`, `bottom` and `switch`: the job (or job array)
    named, the jobs changed (every pending element of an array) and the change as
    the job's history shows it."""

    job: int
    jobs: list[int]
    change: str


class JobChange(msgspec.Struct, frozen=True):
    """A change of a job after its submission (`JobInfo.changes`, `xce jobs -l`)."""

    time: float
    change: str


class JobSelection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /jobs/kill|stop|resume` (LSF's `bkill 0 -u USER -q QUEUE`): every
    unfinished job of `user` (empty: the caller; "all": everyone's; another user's or
    all: admins only) in `queue` (empty: any queue)."""

    user: str = ""
    queue: str = ""


class JobsChanged(msgspec.Struct, frozen=True):
    """The answer to `POST /jobs/kill|stop|resume`: the jobs acted on, in id order."""

    jobs: list[int]


class KillResult(msgspec.Struct, frozen=True):
    job: int
    state: str


# ---------------------------------------------------------------- hosts and queues
class HostInfo(msgspec.Struct, frozen=True):
    """One host: `state` ok, closed, unreach, unavail (no agent yet), ..."""

    name: str
    state: str
    slots: int
    used: int  # slots of its jobs, suspended ones (USUSP) included: bhosts' NJOBS
    type: str
    model: str
    resources: dict[str, ResourceValue]
    template: str | None = None
    last_heartbeat: float | None = None
    jobs: list[int] = []
    closed_by_admin: bool = False
    reason: str = ""  # why it is in its state: admin, idle, lifetime, reclaim, joined, ...
    status: str = ""  # as `xce hosts` shows it: ok, closed_Adm, closed_Idle, expected, ...
    provider: str = ""
    request: str = ""  # the provider request an expected host belongs to
    deadline: float | None = None  # join deadline of an expected host
    joined: float | None = None
    idle_since: float | None = None  # a provisioned host: when it last ran a job (or joined)
    suspended: int = 0  # of `used`, the slots of its suspended jobs (USUSP: xce stop, preemption)


class ExpectRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /hosts/expected` (admin, provisioner): a host requested from a provider."""

    template: Name
    provider: str = ""  # default: the template's
    request: str = ""  # the provider's request id
    deadline: Annotated[float, msgspec.Meta(gt=0, le=30 * 86400)] = 600.0  # seconds to join


class Expected(msgspec.Struct, frozen=True):
    """An expected host and its single-use join token (shown only now)."""

    name: str
    template: str
    provider: str
    request: str
    deadline: float
    join_token: str


MAX_REQUEST_JOBS = 100_000  # job ids one request records, at most (the first ones)
# The controller's refusal to decommission a host jobs run on ("host H still runs
# job(s) 1, 7: drain it first"), which a provisioner tells from its other 409s
STILL_RUNS: Final = "still runs job(s)"


class HostsRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /requests` (admin, provisioner): `count` hosts of a template from its
    provider, recorded as a request with one instance and one expected host each."""

    template: Name
    count: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 1
    provider: str = ""  # default: the template's (another is refused)
    request: str = ""  # the request id (default: made up)
    deadline: Annotated[float, msgspec.Meta(gt=0, le=30 * 86400)] = 600.0  # seconds to join
    # the jobs the hosts are for, in scheduling order (what the demand named)
    jobs: Annotated[list[Positive], msgspec.Meta(max_length=MAX_REQUEST_JOBS)] = []


class InstanceInfo(msgspec.Struct, frozen=True):
    """An instance record: `host` is the expected host it joins as."""

    host: str
    request: str
    provider: str
    template: str
    state: str  # requested, running, joined, draining, releasing, released, lost
    reason: str
    since: float
    instance_id: str = ""
    joined: bool = False


class RequestInfo(msgspec.Struct, frozen=True):
    """A request record with its instances; `hosts` (with their join tokens) only in
    the answer to `POST /requests`."""

    request: str
    provider: str
    template: str
    count: int
    holder: str
    state: str  # requested, in flight, fulfilled, partially fulfilled, failed, ...
    reason: str
    since: float
    created: float
    instances: list[InstanceInfo] = []
    hosts: list[Expected] = []
    jobs: list[int] = []  # the jobs it was made for, in scheduling order


class RequestList(msgspec.Struct, frozen=True):
    requests: list[RequestInfo]


class AcceptRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /requests/{id}/accepted`: the provider started instances (host -> id)."""

    instances: dict[str, str]


class RefuseRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /requests/{id}/refused`: the provider refused the request."""

    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]


class VanishedInstance(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /instances/{host}/vanished`: the provider no longer has the instance."""

    reason: Annotated[str, msgspec.Meta(max_length=1000)] = ""


class HistoryEntry(msgspec.Struct, frozen=True):
    """A durable fact about supply, told as one line (`GET /history`)."""

    seq: int
    time: float
    kind: str  # the fact's type: RequestChanged, HostStateChanged, LeaseGranted, ...
    text: str


class HistoryList(msgspec.Struct, frozen=True):
    history: list[HistoryEntry]


class HostList(msgspec.Struct, frozen=True):
    hosts: list[HostInfo]


class QueueInfo(msgspec.Struct, frozen=True):
    name: str
    priority: int
    status: str  # Open:Active
    njobs: int
    pend: int
    run: int
    hosts: list[str] | None = None
    # `xce queues -l` (bqueues -l): suspended jobs; who may submit (None: all, the
    # list as configured: names and group:NAME); its hosts as configured (host groups
    # by name; None: as `hosts`); run limits (s); the limits that count its jobs.
    susp: int = 0
    users: list[str] | None = None
    hosts_as_written: list[str] | None = None
    run_limit: float | None = None
    max_run_limit: float | None = None
    backfill: bool = False
    requeue_on_host_loss: bool = True
    limits: list[dict[str, Any]] = []
    fairshare: list[tuple[str, float]] | None = None  # its shares as written (None: none)
    demand_after: float = 0.0  # s a job pends before it asks for supply (0: at once)
    # Preemption (configuration.md): the queues its jobs preempt, how, whether its
    # own jobs may be preempted, and the time between two preemptions of one (s).
    preempt: list[str] = []
    preempt_action: str = "requeue"
    preemptable: bool = True
    preempt_delay: float = 0.0


class QueueList(msgspec.Struct, frozen=True):
    queues: list[QueueInfo]


class ShareRow(msgspec.Struct, frozen=True):
    """One user of a fairshare queue (`xce fairshare`, LSF's bhpart): their account
    (themselves or `group:NAME`), its shares and theirs, what the account has used
    (slot-hours of ended jobs, decayed; slot-hours its running jobs have run; running
    slots) and its dynamic priority; a group member's own priority within the group
    in `priority_within` (None: an account of their own)."""

    user: str
    account: str
    shares: float
    user_shares: float
    cpu_time: float
    run_time: float
    started: int
    priority: float
    priority_within: float | None = None
    pending: int = 0  # their jobs pending in the queue


class QueueShares(msgspec.Struct, frozen=True):
    """A fairshare queue's shares as written, the factors and its users."""

    queue: str
    shares: list[tuple[str, float]]
    cpu_time_factor: float
    run_time_factor: float
    run_job_factor: float
    hist_hours: float
    users: list[ShareRow]


class FairshareList(msgspec.Struct, frozen=True):
    """`GET /fairshare`: every fairshare queue (or the one asked for), as of `now`."""

    now: float
    queues: list[QueueShares]


class SessionOutput(msgspec.Struct, frozen=True, omit_defaults=True):
    """`GET /demand` and `GET /idle`: the last session's output (FORMATS.md shapes).
    `failure_cache_hits`: how often a session reused a bucket's failure found by an
    earlier one on unchanged capacity, over every session since the controller
    started (absent: none); the simulator's core counts the same on the same events."""

    session: int
    time: float | None
    demand: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None
    failure_cache_hits: int = 0


# ---------------------------------------------------------------- shared pools, runtime catalog
Tokens = Annotated[float, msgspec.Meta(gt=0)]


class TokensRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /resources/{pool}/borrow|grant|refuse|return`: how many tokens."""

    amount: Tokens


class PoolInfo(msgspec.Struct, frozen=True):
    """One pool of a shared resource. `pool` is its key ("vcs", the resource's only
    pool, or "hspice/cloud"); the total jobs may be given is `base + borrowed`;
    `returning` tokens left the total and are given back once no job holds them;
    `free` is the total less `in_use`; `headroom` how many more may be borrowed now;
    `max_borrow` is None for a pool without a catalog countable (no borrowing)."""

    resource: str
    pool: str
    base: float
    borrowed: float
    in_flight: float
    returning: float
    in_use: float
    free: float
    headroom: float
    max_borrow: float | None = None


class ResourceList(msgspec.Struct, frozen=True):
    """`GET /resources`: every pool of every shared resource."""

    resources: list[PoolInfo]


class CatalogRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /catalog`: runtime caps. `allowance`: template -> how many more hosts it
    may get now (null: no runtime cap); `headroom`: pool -> how many more tokens may be
    borrowed now (null: back to what max_borrow leaves); `lead_time`: template -> the
    seconds a new host is expected to take from request to join, as observed (null:
    back to the template's expected_lead_time)."""

    allowance: dict[str, Annotated[int, msgspec.Meta(ge=0)] | None] = {}
    headroom: dict[str, Annotated[float, msgspec.Meta(ge=0)] | None] = {}
    # template -> observed request-to-join seconds (null: back to expected_lead_time)
    lead_time: dict[str, Annotated[float, msgspec.Meta(ge=0, le=30 * 86400)] | None] = {}


class TemplateInfo(msgspec.Struct, frozen=True):
    """A host template: `alive` hosts of it, `in_flight` (requested, not joined),
    `allowance` (the runtime cap, None: none) and `available`: how many more hosts the
    scheduler may ask for now (max less alive and in flight, within the allowance);
    `lead_time`: the request-to-join seconds the scheduler plans with (the observed
    `runtime_lead_time` when one was set, else the configured expected_lead_time,
    else 300); `price`: the configured price per host-hour."""

    name: str
    provider: str
    slots: int
    max: int
    rank: int
    alive: int
    in_flight: int
    allowance: int | None
    available: int
    lead_time: float = 300.0
    runtime_lead_time: float | None = None
    price: float = 0.0  # per host-hour (0: none)


class CountableInfo(msgspec.Struct, frozen=True):
    """A countable pool: `headroom` in force (the runtime value when one was set, else
    max_borrow less borrowed and in flight) and `runtime_headroom` (None: not set)."""

    resource: str
    pool: str
    max_borrow: float
    idle_time: float
    in_flight: float
    borrowed: float
    returning: float
    headroom: float
    runtime_headroom: float | None = None


class CatalogInfo(msgspec.Struct, frozen=True):
    """`GET /catalog`, `POST /catalog`: the catalog as the scheduler uses it now."""

    templates: list[TemplateInfo]
    countables: list[CountableInfo]


# ---------------------------------------------------------------- leases
FENCING_HEADER = "X-XCE-Fencing-Token"  # a provisioner's changes carry its lease's token


class LeaseRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /leases/{provider}`: take or renew the lease for `ttl` seconds."""

    ttl: Annotated[float, msgspec.Meta(ge=1, le=3600)] = 30.0


class LeaseRelease(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    token: Annotated[int, msgspec.Meta(ge=0, le=2**62)]


class LeaseInfo(msgspec.Struct, frozen=True):
    provider: str
    holder: str
    token: int  # the fencing token: grows when the lease changes hands
    expires: float
    released: bool = False


class LeaseList(msgspec.Struct, frozen=True):
    leases: list[LeaseInfo]


# ---------------------------------------------------------------- agents
class RegisterRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /agents/{name}/register`. For a host of the configuration, the
    configured slots and resources are authoritative; for another host these are
    taken. `running`: jobs the agent still runs (after its own restart)."""

    slots: Positive = 1
    type: str = "X86_64"
    model: str = ""
    resources: dict[str, ResourceValue] = {}
    running: list[int] = []
    # GPUs the agent found (`nvidia-smi -L`), else those its host spec gives (--gpus)
    gpus: NonNegative = 0


class Registered(msgspec.Struct, frozen=True):
    heartbeat_interval: float
    kill: list[int] = []  # jobs the agent reported that the controller no longer runs there


class JobReport(msgspec.Struct, frozen=True):
    """A job process that ended on the agent: exit code, or the signal that ended it."""

    job: int
    exit_code: int
    signal: int | None = None
    run_time: float = 0
    end_time: float = 0
    reason: str = ""  # why the agent ended it: RUN_LIMIT_REACHED, else empty
    # Why the job failed there, one line for people (its user does not exist on the
    # host, its command was not found, a signal it did not get from XCE, ...: see
    # docs/agent.md); empty when it ran and exited (whatever its status) or was ended
    # by XCE. At most MAX_FAILURE characters are kept.
    failure: str = ""
    cpu_time: float = 0  # s of CPU (user + system) the job's processes used


class Heartbeat(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """`POST /agents/{name}/heartbeat`: what the agent runs, and what ended (sent
    again until acknowledged). Fields at their defaults are left out, so that a
    controller of the release before a field was added still takes the heartbeat."""

    running: list[int] = []
    finished: list[JobReport] = []
    # The provider announced it takes the machine back then (epoch seconds: EC2's spot
    # interruption notice, read by the agent): the controller closes the host at once
    # (closed_Recl) and requeues its running jobs, or exits them, as its queue says.
    reclaim_at: Annotated[float, msgspec.Meta(ge=0)] | None = None
    # The output so far of the jobs the controller asked to peek at (HeartbeatReply.peek)
    output: list[JobOutput] = []


class Launch(msgspec.Struct, frozen=True):
    """A job the agent must start. Only the first execution host runs the command
    (`run` true); the others hold the slots (LSB_HOSTS lists all of them)."""

    job: int
    user: str
    command: list[str]
    hosts: dict[str, int]
    run: bool
    cwd: str = ""
    env: dict[str, str] = {}
    output: str = ""
    error: str = ""
    name: str = ""
    queue: str = ""
    # Seconds the job may run, counted from its start on the host: the agent ends it
    # then (SIGTERM, SIGKILL after its kill grace). None: no limit.
    run_limit: float | None = None
    # GPUs the job has on this host (the agent picks the devices: CUDA_VISIBLE_DEVICES),
    # their mode ("shared" | "exclusive_process", XCE_GPU_MODE) and LSF's j_exclusive.
    gpus: int = 0
    gpu_mode: str = "shared"
    gpu_exclusive: bool = False
    # An element of a job array: the array's id and its index (LSB_JOBINDEX, %I)
    array: int = 0
    index: int = 0


class HeartbeatReply(msgspec.Struct, frozen=True):
    start: list[Launch] = []
    kill: list[int] = []
    ack: list[int] = []  # finished reports now durable: forget them
    heartbeat_interval: float = 1.0
    # Jobs whose output so far a user asked for (`xce peek`): the agent sends it at once
    # in a heartbeat (Heartbeat.output)
    peek: list[int] = []
    # Running jobs of the host whose run limit changed since their launch (`xce modify
    # -W`): job -> its run limit now in seconds (None: none); the agent keeps it.
    limits: dict[int, float | None] = {}
    # Jobs of the host that must be stopped (`xce stop`: SIGSTOP to the job's process
    # group); the agent continues (SIGCONT) any job it stopped that is no longer listed.
    suspended: list[int] = []


# ---------------------------------------------------------------- a job's output, life, accounting
PEEK_BYTES = 256 * 1024  # the last bytes of a job's output file that `xce peek` shows
MAX_FAILURE = 1000  # characters of a failure reason the controller keeps


class OutputTail(msgspec.Struct, frozen=True):
    """The end of one output file of a running job: its path on the host, its size in
    bytes and its last bytes (at most PEEK_BYTES, decoded as UTF-8); `unreadable`: why
    it cannot be shown (then `text` is empty)."""

    path: str
    size: int = 0
    text: str = ""
    unreadable: str = ""


class JobOutput(msgspec.Struct, frozen=True):
    """`GET /jobs/{id}/peek` (LSF's bpeek): the output so far of a running job, as its
    first execution host read it. `stderr` only when the job's error file is not its
    output file; `unreadable`: why the host has none of it (the job is not running
    there)."""

    job: int
    host: str = ""
    stdout: OutputTail | None = None
    stderr: OutputTail | None = None
    unreadable: str = ""


class JobEvent(msgspec.Struct, frozen=True, omit_defaults=True):
    """One fact of a job's life (`GET /jobs/{id}/history`, LSF's bhist): `kind` is
    submitted, modified (`reason`: the change), held, released, started, suspended,
    resumed (a running job stopped and continued, `reason`: by whom), requeued, killed
    or finished; `hosts` where it started (started) or ran (requeued); a finished
    job's state, exit status, exit reason, failure and CPU time."""

    seq: int
    time: float
    kind: str
    hosts: dict[str, int] = {}
    state: str = ""
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    failure: str = ""
    cpu_time: float | None = None


class JobHistory(msgspec.Struct, frozen=True):
    """A job's life from the durable log, and the seconds it spent pending (`pend`),
    held (`psusp`) and running (`run`) up to `until` (its end, else now)."""

    job: int
    user: str
    queue: str
    name: str
    command: list[str]
    n: int
    cwd: str
    events: list[JobEvent]
    pend: float
    psusp: float
    run: float
    until: float


class AcctRow(msgspec.Struct, frozen=True):
    """Accounting of the jobs of one user in one queue that ended in a window (the
    total: user and queue empty): how many ended DONE and EXIT; their CPU time and the
    run (wall) time of those that started, in seconds; the mean and largest wait
    (submission to the last start; None: none started) and turnaround (submission to
    end)."""

    user: str
    queue: str
    done: int
    exited: int
    cpu_time: float
    wall_time: float
    wait_mean: float | None
    wait_max: float | None
    turnaround_mean: float
    turnaround_max: float


class AcctSummary(msgspec.Struct, frozen=True):
    """`GET /acct` (LSF's bacct): the jobs that ended in [since, until) (None: open),
    per user and queue, and all of them together."""

    since: float | None
    until: float | None
    rows: list[AcctRow]
    total: AcctRow
