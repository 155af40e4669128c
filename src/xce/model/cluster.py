"""The cluster configuration as the scheduler sees it (see FORMATS.md)."""

from __future__ import annotations

from typing import Literal

import msgspec

from xce.model.policy import PolicyConfig, SimulationConfig

ResourceValue = float | bool
Choose = Literal["rank", "cost", "least-waste"]  # catalog.choose
PreemptAction = Literal["requeue", "suspend", "kill"]  # a queue's preempt_action
PREEMPT_ACTIONS: tuple[PreemptAction, ...] = ("requeue", "suspend", "kill")
CHOOSE_RULES: tuple[Choose, ...] = ("rank", "cost", "least-waste")


class ResourceDef(msgspec.Struct, frozen=True):
    """A resource name known to the cluster."""

    name: str
    type: Literal["numeric", "boolean"] = "numeric"
    consumable: bool = False
    shared: bool = False


class HostShape(msgspec.Struct, frozen=True):
    """A named host and what jobs can use of it: the first fields, in this order, of
    a static host, a template a provider offers and a host joining (`HostAdded`)."""

    name: str
    slots: int
    type: str = "X86_64"
    model: str = ""
    resources: dict[str, ResourceValue] = {}


class HostSpec(HostShape, frozen=True):
    """A static host from the `hosts:` section (name ranges already expanded)."""

    gpus: int = 0  # GPUs on the host (built in, like slots: `select[ngpus>0]`)


class SharedPool(msgspec.Struct, frozen=True):
    """One pool of a shared resource and the hosts that can reach it.

    `hosts` holds patterns: host names, name ranges, `all` (every static host),
    `template:GLOB` (hosts provisioned from matching templates). `None` means every host,
    static or provisioned (the shorthand `vcs: {total: 10}`).
    """

    resource: str
    pool: str
    total: float
    hosts: tuple[str, ...] | None = None


class Queue(msgspec.Struct, frozen=True):
    """A queue; `hosts=None` means every static host and every template."""

    name: str
    priority: int = 0
    hosts: tuple[str, ...] | None = None
    requeue_on_host_loss: bool = True
    backfill: bool = False  # its jobs may fill holes before reservations (their limit)
    run_limit: float | None = None  # s, the default limit of its jobs (None: none)
    max_run_limit: float | None = None  # s, the largest limit a job may ask for
    # s a job must pend before it asks for supply (LSF RC_DEMAND_POLICY THRESHOLD);
    # 0: at once (sched/demand_after.py)
    demand_after: float = 0.0
    # Who may submit to it (LSF USERS): user names, user groups expanded at load;
    # None: everyone (`all`, the default).
    users: tuple[str, ...] | None = None
    # `users:` and `hosts:` as the cluster file wrote them (groups by name), for display;
    # hosts_as_written is () when no group is in it (then `hosts` is as written)
    users_as_written: tuple[str, ...] = ()
    hosts_as_written: tuple[str, ...] = ()
    # LSF user-based fairshare (USER_SHARES): (user, `group:NAME` or `default`, shares)
    # as written, in order; None: the queue orders jobs without fairshare
    fairshare: tuple[tuple[str, float], ...] | None = None
    # Preemption (LSF PREEMPTION=PREEMPTIVE[low batch]): the queues whose running jobs
    # its pending jobs may take slots from, and what is done to them; whether its own
    # jobs may be preempted (PREEMPTABLE), and how long after a preemption one of its
    # jobs may be preempted again (s)
    preempt: tuple[str, ...] = ()
    preempt_action: PreemptAction = "requeue"
    preemptable: bool = True
    preempt_delay: float = 0.0


class FairshareFactors(msgspec.Struct, frozen=True):
    """The cluster's `fairshare:` setting: LSF's weights of a user's dynamic priority
    (CPU_TIME_FACTOR, RUN_TIME_FACTOR, RUN_JOB_FACTOR) and the half-life in hours of
    the historical usage (HIST_HOURS): docs/scheduling.md, "Fairshare"."""

    cpu_time_factor: float = 0.7
    run_time_factor: float = 0.7
    run_job_factor: float = 3.0
    hist_hours: float = 5.0


class Limit(msgspec.Struct, frozen=True):
    """A resource-allocation limit (LSF `Limit` section).

    `users`/`queues`: `None` = not a dimension (applies to every user/queue, counted
    together); `"each"` = one counter per user/queue; a tuple = only those, counted
    together.
    """

    name: str
    slots: int | None = None
    jobs: int | None = None
    users: Literal["each"] | tuple[str, ...] | None = None
    queues: Literal["each"] | tuple[str, ...] | None = None


class HostTemplate(msgspec.Struct, frozen=True):
    """The shape of a host a provider can create."""

    name: str
    provider: str
    slots: int
    type: str = "X86_64"
    model: str = ""
    resources: dict[str, ResourceValue] = {}
    max: int = 0
    rank: int = 0
    idle_time: float | None = None  # overrides catalog.idle_time for this template
    # s from request to join, for planning (None: 300 live; in the simulator the mean
    # of its provider's lead-time model); a runtime estimate replaces it
    expected_lead_time: float | None = None
    price: float = 0.0  # per host-hour (catalog.choose: cost; the cost shown); >= 0
    gpus: int = 0  # GPUs per host (the built-in per-host `gpus`)


class Countable(msgspec.Struct, frozen=True):
    """A shared resource whose total can grow by borrowing tokens."""

    resource: str
    pool: str | None = None
    max_borrow: float = 0
    idle_time: float = 300
    provider: str = ""  # who lends its tokens ("": any provisioner, no lease needed)


class Catalog(msgspec.Struct, frozen=True):
    """What could be provisioned: host templates and countable resources."""

    idle_time: float = 600
    max_jobs_per_session: int = 10000
    templates: tuple[HostTemplate, ...] = ()
    countables: tuple[Countable, ...] = ()
    # Where new hosts come from (docs/scheduling.md, "Choosing the template"):
    # rank | cost | least-waste
    choose: Choose = "rank"
    # Among hosts as free: provisioned hosts idle since they joined (and requested for
    # no job) first, then static hosts, then the other provisioned hosts; false: by
    # name alone (sched/labels.py, docs/scheduling.md "Static hosts first").
    static_first: bool = True


class ClusterConfig(msgspec.Struct, frozen=True):
    """A whole, validated cluster configuration."""

    cluster: str = "xce"
    session_interval: float = 10
    resources: dict[str, ResourceDef] = {}
    hosts: tuple[HostSpec, ...] = ()
    shared: dict[str, tuple[SharedPool, ...]] = {}
    queues: tuple[Queue, ...] = (Queue(name="normal", priority=30),)
    limits: tuple[Limit, ...] = ()
    reserve_depth: int = 0  # blocked jobs given a reservation per session (LSF: none)
    # Job arrays: most elements (and largest index) of one array (LSF's
    # MAX_JOB_ARRAY_SIZE); s after which a pending job whose dependency condition can
    # never be satisfied is ended (LSF's ORPHAN_JOB_TERM_TIMEOUT; None: never).
    max_job_array_size: int = 1000
    orphan_job_term_timeout: float | None = None
    catalog: Catalog = Catalog()
    # LSF's HostGroup / UserGroup: group -> host-list entries (host names, `all`,
    # `template:GLOB`) / user names, nested groups expanded (`xce submit -m` names them)
    host_groups: dict[str, tuple[str, ...]] = {}
    user_groups: dict[str, tuple[str, ...]] = {}
    fairshare: FairshareFactors = FairshareFactors()
    # Whether a pending job of a preempting queue preempts before a template is bought
    # for it (True), or only when no template could host it (False, the default)
    preempt_before_burst: bool = False
    policy: PolicyConfig = PolicyConfig()
    simulation: SimulationConfig = SimulationConfig()
