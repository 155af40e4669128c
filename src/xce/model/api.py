"""The controller's HTTP/JSON API: request and response bodies.

Shared by the controller (which serves them), the agent and the CLI (which send and
read them). Every error is `ApiError` with an HTTP 4xx/5xx status. Documented in
docs/api.md; the OpenAPI document at `/openapi.json` is generated from these types.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from xce.model.cluster import ResourceValue

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]

ROLES = ("admin", "user", "agent", "scheduler", "provisioner")


class ApiError(msgspec.Struct, frozen=True):
    """Every error response: `{"error": "...", "status": 400}`."""

    error: str
    status: int


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
    priority: int = 0
    hold: bool = False
    user: str = ""


class Submitted(msgspec.Struct, frozen=True):
    """`POST /jobs` answer: `Job <job> is submitted to queue <queue>.`"""

    job: int
    queue: str


class JobInfo(msgspec.Struct, frozen=True):
    """One job as `GET /jobs` and `GET /jobs/{id}` show it. `state`: PEND, PSUSP
    (held), RUN, DONE, EXIT."""

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


class JobList(msgspec.Struct, frozen=True):
    jobs: list[JobInfo]


class KillResult(msgspec.Struct, frozen=True):
    job: int
    state: str


# ---------------------------------------------------------------- hosts and queues
class HostInfo(msgspec.Struct, frozen=True):
    """One host: `state` ok, closed, unreach, unavail (no agent yet), ..."""

    name: str
    state: str
    slots: int
    used: int
    type: str
    model: str
    resources: dict[str, ResourceValue]
    template: str | None = None
    last_heartbeat: float | None = None
    jobs: list[int] = []
    closed_by_admin: bool = False


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


class QueueList(msgspec.Struct, frozen=True):
    queues: list[QueueInfo]


class SessionOutput(msgspec.Struct, frozen=True, omit_defaults=True):
    """`GET /demand` and `GET /idle`: the last session's output (FORMATS.md shapes)."""

    session: int
    time: float | None
    demand: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None


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


class Heartbeat(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /agents/{name}/heartbeat`: what the agent runs, and what ended (sent
    again until acknowledged)."""

    running: list[int] = []
    finished: list[JobReport] = []


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


class HeartbeatReply(msgspec.Struct, frozen=True):
    start: list[Launch] = []
    kill: list[int] = []
    ack: list[int] = []  # finished reports now durable: forget them
    heartbeat_interval: float = 1.0
