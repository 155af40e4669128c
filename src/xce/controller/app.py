"""The controller's HTTP/JSON API (aiohttp): routes, authentication, roles, errors.

Every request but `GET /openapi.json` carries `Authorization: Bearer <token>`. Every
error is JSON `{"error": "...", "status": N}`; a refused request changes nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import msgspec
from aiohttp import web

from xce.controller import history, job_life, supply
from xce.controller.auth import Identity, TokenStore
from xce.controller.core import Controller
from xce.controller.ha_metrics import LeadershipCollector
from xce.controller.journal import JournalFailed
from xce.controller.leases import Lease
from xce.controller.metrics import METRICS, ControllerMetrics
from xce.controller.openapi import openapi_document
from xce.controller.problems import ApiProblem, refuse
from xce.controller.queue_info import queue_infos
from xce.controller.records import INSTANCE_FINAL, REQUEST_FINAL, RequestRecord
from xce.controller.suspend import USUSP
from xce.controller.tokens import API_STEPS
from xce.controller.ui import is_ui_path
from xce.controller.view import FINISHED, PEND, PSUSP, RUN, JobRecord
from xce.model.api import (
    FENCING_HEADER,
    AcceptRequest,
    ApiError,
    CatalogRequest,
    Expected,
    ExpectRequest,
    FairshareList,
    Heartbeat,
    HistoryEntry,
    HistoryList,
    HostInfo,
    HostList,
    HostsRequest,
    InstanceInfo,
    JobChange,
    JobInfo,
    JobList,
    JobsChanged,
    JobSelection,
    KillResult,
    LeaseInfo,
    LeaseList,
    LeaseRelease,
    LeaseRequest,
    ModifyRequest,
    NotLeader,
    QueueList,
    RefuseRequest,
    RegisterRequest,
    RequestInfo,
    RequestList,
    SessionOutput,
    SubmitRequest,
    Submitted,
    SwitchRequest,
    TokensRequest,
    VanishedInstance,
)
from xce.model.lifecycle import CLOSE_REASONS, status_label
from xce.model.result import SessionResult, demand_json, idle_json

log = logging.getLogger("xce.controller.api")

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]



class Standby(Protocol):
    """What the API asks of the leadership when controllers share a PostgreSQL log
    (leadership.py): whether this one leads, where the leader is, and to wait until
    this one leads (the last fact applied then)."""

    @property
    def leading(self) -> bool: ...

    def leader_url(self) -> str: ...

    def leader_term(self) -> int: ...

    def lags(self) -> dict[str, int]: ...

    async def lead(self) -> int: ...


CONTROLLER = web.AppKey("controller", Controller)
TOKENS = web.AppKey("tokens", TokenStore)
LEADERSHIP = web.AppKey("leadership", Standby)
STANDBY_SERVES = frozenset({"/openapi.json", "/metrics"})  # (a standby: 503 to the rest)
IDENTITY = "xce.identity"

READERS = frozenset({"admin", "user", "scheduler", "provisioner"})
USERS = frozenset({"admin", "user"})
ADMINS = frozenset({"admin"})
MANAGERS = frozenset({"admin", "provisioner"})  # hosts: a provisioner only template hosts
SCRAPERS = frozenset({"admin", "metrics"})  # GET /metrics (the metrics role: nothing else)
STATE_FILTERS = {
    "all": None,
    "pend": (PEND, PSUSP),
    "run": (RUN,),
    "done": ("DONE",),
    "exit": ("EXIT",),
    "unfinished": (PEND, PSUSP, RUN),
    "finished": FINISHED,
}

_encoder = msgspec.json.Encoder()


def reply(body: object, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(body), status=status,
                        content_type="application/json")


def problem(status: int, message: str) -> web.Response:
    return reply(ApiError(message, status), status)


# Every fact goes into the durable log as msgpack, which holds 64-bit integers only:
# a larger one (JSON allows any) would fail the log and stop all writes.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# Such an integer is written with at least 19 digits in a row (2**63 has 19): a body
# without a run of 19 digits is not walked (bench_controller.py submit: ~5 % a request).
LONG_DIGITS = re.compile(rb"[0-9]{19}")


async def body_of(request: web.Request, kind: type[T]) -> T:
    raw = await request.read()
    try:
        body = msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as err:  # includes ValidationError
        raise ApiProblem(400, f"bad request body: {err}") from err
    if LONG_DIGITS.search(raw) is None:
        return body
    where = _huge_int(msgspec.to_builtins(body), "$")
    if where is not None:
        raise ApiProblem(400, f"bad request body: Integer out of the 64-bit range - at `{where}`")
    return body


def _huge_int(value: object, path: str) -> str | None:
    """The path of the first integer in `value` outside the 64-bit range, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT_MIN <= value <= INT_MAX else path
    if isinstance(value, dict):
        for key, item in value.items():
            found = _huge_int(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _huge_int(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def caller(request: web.Request, roles: frozenset[str]) -> Identity:
    who: Identity = request[IDENTITY]
    if who.role not in roles:
        refuse(who, 403, f"role {who.role} may not {request.method} {request.path}")
    return who


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Authenticate, then turn every failure into a JSON error."""
    gate = request.app.get(LEADERSHIP)
    if gate is not None and not gate.leading and request.path not in STANDBY_SERVES:
        return not_leader(gate.leader_url())
    try:
        if request.path != "/openapi.json" and not is_ui_path(request.path):
            request[IDENTITY] = authenticate(request)  # (the page's handlers: their own)
        return await handler(request)
    except ApiProblem as err:
        return problem(err.status, err.message)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        response = problem(err.status, err.reason)
        if "Allow" in err.headers:  # 405 must say which methods are allowed (RFC 9110)
            response.headers["Allow"] = err.headers["Allow"]
        return response
    except JournalFailed as err:
        fatal(err)
        return problem(503, str(err))
    except Exception:
        log.exception("internal error on %s %s", request.method, request.path)
        return problem(500, "internal error (see the controller's log)")


def not_leader(leader: str) -> web.Response:
    """A standby's answer to every call: 503, and where the leader is."""
    where = f"the leader is {leader}" if leader else "no controller leads yet (a takeover)"
    return reply(NotLeader(f"this controller is a standby: {where}", 503, leader), 503)


def fatal(err: JournalFailed) -> None:
    """The log is behind memory: stop at once (a restart recovers from the log)."""
    log.critical("%s: stopping", err)
    asyncio.get_running_loop().call_later(0.1, os._exit, 75)


def authenticate(request: web.Request) -> Identity:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiProblem(401, "authentication required: Authorization: Bearer <token>")
    who = request.app[TOKENS].identify(token.strip())
    if who is None:
        who = request.app[CONTROLLER].join_identity(token.strip())
    if who is None:
        raise ApiProblem(401, "unknown or revoked token")
    fence = request.headers.get(FENCING_HEADER)
    if fence is not None:
        if not fence.isdigit() or len(fence) > 18:
            raise ApiProblem(400, f"{FENCING_HEADER} must be a whole number")
        who = Identity(who.name, who.role, int(fence))
    return who


# ---------------------------------------------------------------- jobs
def job_info(ctl: Controller, job: JobRecord) -> JobInfo:
    spec = job.spec
    pending = job.state in (PEND, PSUSP)
    reason, kind = ctl.sessions.pend_reason(spec.id) if pending else ("", "")
    reserved = ctl.sessions.reservation(spec.id) if pending else None
    stopped = ctl.control.suspended(job)
    return JobInfo(
        id=spec.id, user=spec.user, queue=spec.queue,
        state=USUSP if stopped is not None else job.state, n=spec.n,
        res=spec.res, name=spec.name, command=list(spec.command), submit_time=spec.submit,
        start_time=job.start_time, end_time=job.end_time, exec_hosts=dict(job.hosts),
        exit_code=job.exit_code, signal=job.signal, exit_reason=job.exit_reason,
        pend_reason=reason, pend_kind=kind, cwd=spec.cwd, output=spec.output, error=spec.error,
        run_limit=ctl.jobs.run_limit(spec),
        expected_start=reserved.start if reserved is not None else None,
        reserved_hosts=dict(reserved.hosts) if reserved is not None else {},
        failure=job.failure, cpu_time=job.cpu_time,
        array=spec.array, index=spec.index, depend=spec.depend,
        suspended_by=stopped.by if stopped is not None else "",
        suspended_time=stopped.time if stopped is not None else None,
        changes=[JobChange(at, change) for at, change in job.changes],
    )


def job_id_of(request: web.Request) -> int:
    return int(request.match_info["job"])


async def submit(request: web.Request) -> web.Response:
    who = caller(request, USERS)
    job, queue = await request.app[CONTROLLER].submit(who, await body_of(request, SubmitRequest))
    return reply(Submitted(job, queue), 201)


async def list_jobs(request: web.Request) -> web.Response:
    who = caller(request, READERS)
    ctl = request.app[CONTROLLER]
    user = request.query.get("user", who.name if who.role == "user" else "all")
    wanted = request.query.get("state", "all")
    if wanted not in STATE_FILTERS:
        raise ApiProblem(400, f"state must be one of {', '.join(STATE_FILTERS)}")
    states = STATE_FILTERS[wanted]
    try:
        limit = int(request.query.get("limit", "0"))
    except ValueError as err:
        raise ApiProblem(400, "limit must be a whole number") from err
    if limit < 0:
        raise ApiProblem(400, "limit must be a whole number")
    jobs = []
    pool = ctl.view.jobs if user == "all" else ctl.view.by_user.get(user, {})
    if "array" in request.query:  # the elements of one job array (whoever's)
        pool = _array_elements(ctl, request.query["array"])
    for job in pool.values():
        if states is None or job.state in states:
            jobs.append(job_info(ctl, job))
            if limit and len(jobs) >= limit:
                break
    return reply(JobList(jobs))


def _array_elements(ctl: Controller, array: str) -> dict[int, JobRecord]:
    """`GET /jobs?array=ID`: the elements of job array ID, by id."""
    if not array.isdigit() or len(array) > 18:
        raise ApiProblem(400, "array must be a job array's id")
    return {job: ctl.view.jobs[job] for job in ctl.view.arrays.get(int(array), {})}


async def get_job(request: web.Request) -> web.Response:
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    return reply(job_info(ctl, ctl.job(job_id_of(request))))


async def kill_job(request: web.Request) -> web.Response:
    who = caller(request, USERS)
    job_id = job_id_of(request)  # (a job array's id: every element is killed)
    job = await request.app[CONTROLLER].kill(who, job_id)
    return reply(KillResult(job_id, job.state))


async def control_job(request: web.Request) -> web.Response:
    """bstop (hold a pending job: PSUSP; stop a running one: USUSP), bresume (the
    reverse) and brequeue (a running or stopped job killed where it runs, pending
    again): job_control.py."""
    who = caller(request, USERS)
    ctl = request.app[CONTROLLER]
    step = {"stop": ctl.control.stop, "resume": ctl.control.resume,
            "requeue": ctl.control.requeue}[request.match_info["action"]]
    return reply(job_info(ctl, await step(who, job_id_of(request))))


async def modify_job(request: web.Request) -> web.Response:
    """Change a pending job (a running one's run limit): bmod (job_changes.py)."""
    who = caller(request, USERS)
    body = await body_of(request, ModifyRequest)
    return reply(await request.app[CONTROLLER].changes.modify(who, job_id_of(request), body))


async def switch_job(request: web.Request) -> web.Response:
    """Move a pending job to another queue: bswitch."""
    who = caller(request, USERS)
    body = await body_of(request, SwitchRequest)
    return reply(await request.app[CONTROLLER].changes.switch(who, job_id_of(request),
                                                               body.queue))


async def move_job(request: web.Request) -> web.Response:
    """A pending job first or last among its queue's of its priority: btop / bbot."""
    who = caller(request, USERS)
    top = request.match_info["place"] == "top"
    return reply(await request.app[CONTROLLER].changes.move(who, job_id_of(request), top))


async def act_on_jobs(request: web.Request) -> web.Response:
    """Kill, stop or resume every unfinished job of a user and queue: bkill 0 -u -q."""
    who = caller(request, USERS)
    body = await body_of(request, JobSelection)
    ctl = request.app[CONTROLLER]
    return reply(JobsChanged(await ctl.control.act(who, request.match_info["action"], body)))


# ---------------------------------------------------------------- a job's output, life, accounting
async def peek_job(request: web.Request) -> web.Response:
    """The output so far of a running job, from its host (owner, admin): bpeek."""
    who = caller(request, USERS)
    return reply(await request.app[CONTROLLER].peek(who, job_id_of(request)))


async def job_history(request: web.Request) -> web.Response:
    """A job's life from the durable log: bhist."""
    caller(request, READERS)
    return reply(await job_life.history(request.app[CONTROLLER], job_id_of(request)))


async def get_acct(request: web.Request) -> web.Response:
    """Accounting of the jobs that ended in a window, per user and queue: bacct."""
    who = caller(request, READERS)
    return reply(await job_life.acct(request.app[CONTROLLER], who, request.query))


# ---------------------------------------------------------------- hosts, queues, supply
def host_info(ctl: Controller, name: str) -> HostInfo:
    expected = ctl.view.expected.get(name)
    if expected is not None:
        template = ctl.state.templates.get(expected.template)
        return HostInfo(
            name=name, state=expected.state, slots=template.slots if template else 0, used=0,
            type=template.type if template else "", model=template.model if template else "",
            resources=dict(template.resources) if template else {},
            template=expected.template, reason=expected.reason, status=expected.state,
            provider=expected.provider, request=expected.request, deadline=expected.deadline,
        )
    host = ctl.view.hosts[name]
    return HostInfo(
        name=host.name, state=host.state, slots=host.slots, used=host.used, type=host.type,
        model=host.model, resources=dict(host.resources), template=host.template,
        last_heartbeat=host.last_heartbeat, jobs=sorted(host.jobs),
        closed_by_admin=host.closed_by_admin, reason=host.reason,
        status=_host_status(ctl, host.state, host.reason, host.jobs), provider=host.provider,
        request=host.request,
        joined=host.joined if host.template is not None else None,
        idle_since=_idle_since(ctl, host.name) if host.template is not None else None,
        suspended=sum(
            slots for job, slots in host.jobs.items()
            if (record := ctl.view.jobs.get(job)) is not None
            and ctl.control.suspended(record) is not None
        ),
    )


def _host_status(ctl: Controller, state: str, reason: str, jobs: Iterable[int]) -> str:
    """The STATUS column; an open host running an exclusive job (-x) is `closed_Excl`,
    as LSF shows it."""
    label = status_label(state, reason)
    if label == "ok" and any(
        (job := ctl.view.jobs.get(j)) is not None and job.spec.exclusive for j in jobs
    ):
        return "closed_Excl"
    return label


def _idle_since(ctl: Controller, name: str) -> float | None:
    record = ctl.state.host_by_name.get(name)
    return None if record is None or record.running else record.idle_since


async def list_hosts(request: web.Request) -> web.Response:
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    names = [*ctl.view.hosts, *ctl.view.expected]
    return reply(HostList([host_info(ctl, name) for name in names]))


async def close_host(request: web.Request) -> web.Response:
    """Close (drain): `?reason=admin|idle|lifetime|reclaim` (default admin)."""
    reason = request.query.get("reason", "admin")

    async def close(ctl: Controller, who: Identity, name: str) -> None:
        if reason not in CLOSE_REASONS:
            raise ApiProblem(400, f"reason must be one of {', '.join(CLOSE_REASONS)}")
        await ctl.set_host_open(who, name, False, reason)

    return await _on_host(request, close)


async def open_host(request: web.Request) -> web.Response:
    return await _on_host(request, lambda ctl, who, name: ctl.set_host_open(who, name, True))


async def decommission_host(request: web.Request) -> web.Response:
    return await _on_host(request, lambda ctl, who, name: ctl.decommission(who, name))


async def reclaimed_host(request: web.Request) -> web.Response:
    """The provider took the host back (e.g. a spot reclaim): lost, jobs requeued."""
    return await _on_host(request, lambda ctl, who, name: ctl.reclaimed(who, name))


async def _on_host(
    request: web.Request, act: Callable[[Controller, Identity, str], Awaitable[object]]
) -> web.Response:
    """A manager's action on the host the path names; the host as it is after it."""
    who = caller(request, MANAGERS)
    ctl = request.app[CONTROLLER]
    name = request.match_info["host"]
    await act(ctl, who, name)
    return reply(host_info(ctl, name))


async def remove_host(request: web.Request) -> web.Response:
    """A decommissioned host released, a failed expected one cleared, an expected one
    cancelled: gone from the cluster."""
    who = caller(request, MANAGERS)
    ctl = request.app[CONTROLLER]
    name = request.match_info["host"]
    await ctl.remove(who, name)
    return reply(HostList([]))


async def expect_host(request: web.Request) -> web.Response:
    """One expected host: a request of one host."""
    who = caller(request, MANAGERS)
    ctl = request.app[CONTROLLER]
    body = await body_of(request, ExpectRequest)
    [(expected, token)] = await ctl.request_hosts(who, body.template, body.provider,
                                                  body.request, 1, body.deadline)
    return reply(Expected(expected.name, expected.template, expected.provider,
                          expected.request, expected.deadline, token), 201)


# ---------------------------------------------------------------- provisioning records
def request_info(ctl: Controller, record: RequestRecord,
                 hosts: Sequence[Expected] = ()) -> RequestInfo:
    instances = [ctl.records.instances[h] for h in record.hosts]
    return RequestInfo(
        record.request, record.provider, record.template, record.count, record.holder,
        record.state, record.reason, record.since, record.created,
        [InstanceInfo(i.host, i.request, i.provider, i.template, i.state, i.reason, i.since,
                      i.instance_id, i.joined) for i in instances],
        list(hosts), list(record.jobs),
    )


async def make_request(request: web.Request) -> web.Response:
    who = caller(request, MANAGERS)
    ctl = request.app[CONTROLLER]
    body = await body_of(request, HostsRequest)
    made = await ctl.request_hosts(who, body.template, body.provider, body.request,
                                   body.count, body.deadline, body.jobs)
    hosts = [Expected(e.name, e.template, e.provider, e.request, e.deadline, token)
             for e, token in made]
    record = ctl.records.requests[made[0][0].request]
    return reply(request_info(ctl, record, hosts), 201)


async def get_history(request: web.Request) -> web.Response:
    """`?after=SEQ&limit=N&all=1`: supply facts after SEQ (default: among the last
    facts), the last N of them (default 100); lease renewals only with all=1."""
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    try:
        limit = int(request.query.get("limit", "100"))
        after = int(request.query["after"]) if "after" in request.query else None
    except ValueError as err:
        raise ApiProblem(400, f"after and limit must be integers: {err}") from err
    if not 0 <= limit <= 10**9 or (after is not None and not 0 <= after <= 2**62):
        raise ApiProblem(400, "after must be in 0..2**62 and limit in 0..10**9")
    assert ctl.journal is not None
    start = after if after is not None else max(0, ctl.journal.queued_seq - history.SCAN)

    renewals = request.query.get("all") in ("1", "true", "yes")

    def read() -> list[HistoryEntry]:
        return history.entries(itertools.islice(ctl.store.read(start), history.SCAN), limit,
                               renewals)

    found = await asyncio.get_running_loop().run_in_executor(None, read)
    return reply(HistoryList(found))


async def list_requests(request: web.Request) -> web.Response:
    """`?all=1`: ended requests too; `?provider=P`: one provider's."""
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    every = request.query.get("all") in ("1", "true", "yes")
    shown = requests_shown(ctl, request.query.get("provider"), every)
    return reply(RequestList([request_info(ctl, r) for r in shown]))


def requests_shown(ctl: Controller, provider: str | None, every: bool) -> list[RequestRecord]:
    """The requests `GET /requests` lists: of `provider` (None: any), and unless
    `every`, only those not ended or with an instance not ended."""
    return [r for r in ctl.records.requests.values()
            if (provider is None or r.provider == provider)
            and (every or r.state not in REQUEST_FINAL
                 or any(ctl.records.instances[h].state not in INSTANCE_FINAL
                        for h in r.hosts))]


async def get_request(request: web.Request) -> web.Response:
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    rid = request.match_info["request"]
    record = ctl.records.requests.get(rid)
    if record is None:
        raise ApiProblem(404, f"request {rid}: no such request")
    return reply(request_info(ctl, record))


async def accept_request(request: web.Request) -> web.Response:
    who, body = caller(request, MANAGERS), await body_of(request, AcceptRequest)
    ctl = request.app[CONTROLLER]
    return reply(request_info(ctl, await ctl.accept_request(
        who, request.match_info["request"], body.instances)))


async def refuse_request(request: web.Request) -> web.Response:
    who, body = caller(request, MANAGERS), await body_of(request, RefuseRequest)
    ctl = request.app[CONTROLLER]
    return reply(request_info(ctl, await ctl.refuse_request(
        who, request.match_info["request"], body.reason)))


async def instance_vanished(request: web.Request) -> web.Response:
    who, body = caller(request, MANAGERS), await body_of(request, VanishedInstance)
    ctl = request.app[CONTROLLER]
    instance = await ctl.vanished(who, request.match_info["host"], body.reason)
    return reply(request_info(ctl, ctl.records.requests[instance.request]))


async def list_queues(request: web.Request) -> web.Response:
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    queues = queue_infos(
        ctl.view.config, ctl.view.jobs.values(),
        lambda job: ctl.control.suspended(job) is not None,
    )
    return reply(QueueList(queues))


async def get_fairshare(request: web.Request) -> web.Response:
    """`?queue=NAME`: that fairshare queue only (404 when it is not one)."""
    caller(request, READERS)
    ctl = request.app[CONTROLLER]
    queue = request.query.get("queue")
    now = ctl.clock()
    found = ctl.state.fairshare_table(queue, now)
    if queue is not None and not found:
        what = "a fairshare queue" if queue in ctl.state.queues else "a queue"
        raise ApiProblem(404, f"{queue!r} is not {what}")
    return reply(FairshareList(now, found))


async def get_demand(request: web.Request) -> web.Response:
    return _last_session(request, lambda result: {"demand": demand_json(result.demand)},
                         {"demand": None})


async def get_idle(request: web.Request) -> web.Response:
    return _last_session(request, lambda result: {"idle": idle_json(result.idle)},
                         {"idle": None})


def _last_session(request: web.Request, part: Callable[[SessionResult], dict[str, Any]],
                  none: dict[str, Any]) -> web.Response:
    """A part of the last session's result (`none` before the first session)."""
    caller(request, READERS)
    sessions = request.app[CONTROLLER].sessions
    result = sessions.last_result
    if result is None:
        return reply(SessionOutput(0, None, **none))
    return reply(SessionOutput(sessions.count, result.now, **part(result),
                               failure_cache_hits=sessions.failure_cache_hits))


# ---------------------------------------------------------------- shared pools, runtime catalog
async def list_resources(request: web.Request) -> web.Response:
    caller(request, READERS)
    return reply(supply.resources(request.app[CONTROLLER]))


async def tokens_step(request: web.Request) -> web.Response:
    """borrow, grant, refuse or return tokens of a countable pool (supply.py)."""
    who = caller(request, MANAGERS)
    body = await body_of(request, TokensRequest)
    step = API_STEPS[request.match_info["step"]]
    ctl = request.app[CONTROLLER]
    supply.fence(ctl, who, pools=[request.match_info["pool"]])
    return reply(await supply.tokens_step(ctl, request.match_info["pool"], step, body.amount))


async def get_catalog(request: web.Request) -> web.Response:
    caller(request, READERS)
    return reply(supply.catalog(request.app[CONTROLLER]))


async def set_catalog(request: web.Request) -> web.Response:
    who, body = caller(request, MANAGERS), await body_of(request, CatalogRequest)
    ctl = request.app[CONTROLLER]
    supply.fence(ctl, who, templates=[*body.allowance, *body.lead_time], pools=body.headroom)
    return reply(await supply.set_catalog(ctl, body))


# ---------------------------------------------------------------- agents
def agent_host(request: web.Request) -> str:
    who = caller(request, frozenset({"agent"}))
    name = request.match_info["host"]
    if who.name != name:
        raise ApiProblem(403, f"agent {who.name} may only speak for its own host, not {name}")
    return name


async def register(request: web.Request) -> web.Response:
    name = agent_host(request)
    body = await body_of(request, RegisterRequest)
    return reply(await request.app[CONTROLLER].register(name, body))


async def heartbeat(request: web.Request) -> web.Response:
    name = agent_host(request)
    body = await body_of(request, Heartbeat)
    return reply(await request.app[CONTROLLER].heartbeat(name, body))


# ---------------------------------------------------------------- leases
def lease_info(lease: Lease) -> LeaseInfo:
    return LeaseInfo(lease.provider, lease.holder, lease.token, lease.expires, lease.released)


async def take_lease(request: web.Request) -> web.Response:
    who = caller(request, MANAGERS)
    body = await body_of(request, LeaseRequest)
    lease = await request.app[CONTROLLER].lease(who, request.match_info["provider"], body.ttl)
    return reply(lease_info(lease))


async def release_lease(request: web.Request) -> web.Response:
    who = caller(request, MANAGERS)
    ctl = request.app[CONTROLLER]
    provider = request.match_info["provider"]
    body = await body_of(request, LeaseRelease)
    await ctl.release_lease(who, provider, body.token)
    return reply(lease_info(ctl.leases.leases[provider]))


async def list_leases(request: web.Request) -> web.Response:
    caller(request, READERS)
    leases = request.app[CONTROLLER].leases.leases.values()
    return reply(LeaseList([lease_info(lease) for lease in leases]))


async def openapi(request: web.Request) -> web.Response:
    return reply(openapi_document())


async def get_metrics(request: web.Request) -> web.Response:
    """The Prometheus text exposition (docs/metrics.md): metrics or admin tokens."""
    caller(request, SCRAPERS)
    return request.app[METRICS].response()


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/openapi.json", openapi),
    ("GET", "/metrics", get_metrics),
    ("POST", "/jobs", submit),
    ("GET", "/jobs", list_jobs),
    ("GET", r"/jobs/{job:\d{1,18}}", get_job),
    ("POST", r"/jobs/{job:\d{1,18}}/kill", kill_job),
    ("POST", r"/jobs/{job:\d{1,18}}/{action:stop|resume|requeue}", control_job),
    ("POST", r"/jobs/{job:\d{1,18}}/modify", modify_job),
    ("POST", r"/jobs/{job:\d{1,18}}/switch", switch_job),
    ("POST", r"/jobs/{job:\d{1,18}}/{place:top|bottom}", move_job),
    ("POST", "/jobs/{action:kill|stop|resume}", act_on_jobs),
    ("GET", r"/jobs/{job:\d{1,18}}/peek", peek_job),
    ("GET", r"/jobs/{job:\d{1,18}}/history", job_history),
    ("GET", "/acct", get_acct),
    ("GET", "/hosts", list_hosts),
    ("POST", "/hosts/expected", expect_host),
    ("POST", "/hosts/{host}/close", close_host),
    ("POST", "/hosts/{host}/open", open_host),
    ("POST", "/hosts/{host}/decommission", decommission_host),
    ("POST", "/hosts/{host}/remove", remove_host),
    ("POST", "/hosts/{host}/reclaimed", reclaimed_host),
    ("POST", "/requests", make_request),
    ("GET", "/requests", list_requests),
    ("GET", "/history", get_history),
    ("GET", "/requests/{request}", get_request),
    ("POST", "/requests/{request}/accepted", accept_request),
    ("POST", "/requests/{request}/refused", refuse_request),
    ("POST", "/instances/{host}/vanished", instance_vanished),
    ("GET", "/queues", list_queues),
    ("GET", "/fairshare", get_fairshare),
    ("GET", "/demand", get_demand),
    ("GET", "/idle", get_idle),
    ("GET", "/resources", list_resources),
    ("POST", r"/resources/{pool:[^/]+(?:/[^/]+)?}/{step:borrow|grant|refuse|return}",
     tokens_step),  # "hspice/cloud": the slash as is, or as %2F
    ("GET", "/catalog", get_catalog),
    ("POST", "/catalog", set_catalog),
    ("GET", "/leases", list_leases),
    ("POST", "/leases/{provider}", take_lease),
    ("POST", "/leases/{provider}/release", release_lease),
    ("POST", "/agents/{host}/register", register),
    ("POST", "/agents/{host}/heartbeat", heartbeat),
]


async def _every(seconds: float | Callable[[], float],
                 step: Callable[[], Awaitable[Any]]) -> None:
    """`step()` forever, `seconds` apart (a callable: asked before each pause)."""
    while True:
        await asyncio.sleep(seconds() if callable(seconds) else seconds)
        try:
            await step()
        except JournalFailed as err:
            fatal(err)
        except Exception:
            log.exception("background step failed")


async def _standing_by(begin: Callable[[], Awaitable[None]]) -> None:
    """Wait to lead, then begin; a failure on the way stops the controller."""
    try:
        await begin()
    except Exception as err:
        log.critical("cannot take over: %s: stopping", err)
        asyncio.get_running_loop().call_later(0.1, os._exit, 1)


def make_app(ctl: Controller, tokens: TokenStore,
             leadership: Standby | None = None) -> web.Application:
    """The API of `ctl`; with `leadership`, it serves once this controller leads
    (before: `not_leader`), and the background steps start then."""
    metrics = ControllerMetrics(ctl)  # (before ctl.start: it follows every live fact)
    app = web.Application(middlewares=[metrics.middleware, errors],
                          client_max_size=4 * 1024 * 1024)
    app[METRICS] = metrics
    app[CONTROLLER] = ctl
    app[TOKENS] = tokens
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    from xce.controller.ui.routes import add_ui_routes  # (it imports this module)

    add_ui_routes(app)  # the status page, /ui (docs/ui.md)
    if leadership is not None:
        app[LEADERSHIP] = leadership
        metrics.registry.register(LeadershipCollector(leadership))
    tasks: list[asyncio.Task[None]] = []

    async def begin() -> None:
        if leadership is None:
            await ctl.start()
        else:
            last = await leadership.lead()
            ctl.open_journal(last)
            await ctl.begin(last)
        tasks.extend([
            # session_interval apart, or sooner when the last session's next_due says
            asyncio.create_task(_every(ctl.session_delay, ctl.run_session)),
            asyncio.create_task(_every(ctl.settings.heartbeat_interval / 2, ctl.watch_hosts)),
            asyncio.create_task(_every(ctl.settings.heartbeat_interval / 2, ctl.watch_limits)),
            asyncio.create_task(_every(ctl.settings.heartbeat_interval / 2,
                                       lambda: supply.settle_returns(ctl))),
        ])

    async def background(app: web.Application) -> AsyncIterator[None]:
        if leadership is None:
            await begin()
        else:  # a standby serves (not_leader) while it waits to lead
            tasks.append(asyncio.create_task(_standing_by(begin)))
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await ctl.close()

    app.cleanup_ctx.append(background)
    return app
