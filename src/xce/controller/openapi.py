"""The OpenAPI 3.1 document of the controller's API, generated from the wire types."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import msgspec

from xce import __version__
from xce.model import api

_REF = "#/components/schemas/{name}"
_OP_CHARS = re.compile(r"[^A-Za-z0-9]+")
_JOB = {"name": "job", "in": "path", "required": True,
        "schema": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}}
_HOST = {"name": "host", "in": "path", "required": True,
         "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}}
_POOL = {"name": "pool", "in": "path", "required": True,
         "description": 'a pool key: "vcs", or "hspice/cloud" (the slash as %2F)',
         "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+(/[^/]+)?$"}}
_PROVIDER = {"name": "provider", "in": "path", "required": True,
             "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}}
_REQUEST = {"name": "request", "in": "path", "required": True,
            "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}}
_ERRORS = (400, 401, 403, 404, 409)
# beyond _ERRORS: a peek whose host does not answer in time
_MORE_ERRORS = {"/jobs/{job}/peek": (504,)}

# (method, path, summary, request body, answer, success status, path parameters, query)
_OPERATIONS: list[tuple[str, str, str, type | None, type, int, list[dict[str, Any]],
                        list[dict[str, Any]]]] = [
    ("post", "/jobs", "Submit a job", api.SubmitRequest, api.Submitted, 201, [], []),
    ("get", "/jobs", "List jobs", None, api.JobList, 200, [], [
        {"name": "user", "in": "query", "schema": {"type": "string"}},
        {"name": "state", "in": "query", "schema": {
            "type": "string",
            "enum": ["all", "pend", "run", "done", "exit", "unfinished", "finished"]}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "array", "in": "query",
         "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"}},
    ]),
    ("get", "/jobs/{job}", "One job", None, api.JobInfo, 200, [_JOB], []),
    ("post", "/jobs/{job}/kill", "Kill a job", None, api.KillResult, 200, [_JOB], []),
    ("post", "/jobs/{job}/stop", "Hold a pending job, stop a running one", None,
     api.JobInfo, 200, [_JOB], []),
    ("post", "/jobs/{job}/resume", "Release a held job, continue a stopped one", None,
     api.JobInfo, 200, [_JOB], []),
    ("post", "/jobs/{job}/requeue", "Requeue a running or stopped job", None, api.JobInfo,
     200, [_JOB], []),
    *((("post", f"/jobs/{action}", f"{action.capitalize()} every unfinished job of a user "
        "and queue", api.JobSelection, api.JobsChanged, 200, [], []))
      for action in ("kill", "stop", "resume")),
    ("post", "/jobs/{job}/modify", "Change a pending job (a running one's run limit)",
     api.ModifyRequest, api.Modified, 200, [_JOB], []),
    ("post", "/jobs/{job}/switch", "Move a pending job to another queue", api.SwitchRequest,
     api.Modified, 200, [_JOB], []),
    ("post", "/jobs/{job}/top", "A pending job first among its queue's", None, api.Modified,
     200, [_JOB], []),
    ("post", "/jobs/{job}/bottom", "A pending job last among its queue's", None,
     api.Modified, 200, [_JOB], []),
    ("get", "/jobs/{job}/peek", "The output so far of a running job (owner, admin)", None,
     api.JobOutput, 200, [_JOB], []),
    ("get", "/jobs/{job}/history", "A job's life from the durable log", None,
     api.JobHistory, 200, [_JOB], []),
    ("get", "/acct", "Accounting of the jobs that ended in a window, per user and queue",
     None, api.AcctSummary, 200, [], [
         {"name": "user", "in": "query", "schema": {"type": "string"}},
         {"name": "queue", "in": "query", "schema": {"type": "string"}},
         *({"name": key, "in": "query", "schema": {"type": "number", "minimum": 0,
                                                   "maximum": 1e11}}
           for key in ("since", "until"))]),
    ("get", "/hosts", "List hosts", None, api.HostList, 200, [], []),
    ("post", "/hosts/expected", "Add an expected host (admin, provisioner)", api.ExpectRequest,
     api.Expected, 201, [], []),
    ("post", "/hosts/{host}/close", "Close (drain) a host", None, api.HostInfo, 200, [_HOST], [
        {"name": "reason", "in": "query",
         "schema": {"type": "string", "enum": ["admin", "idle", "lifetime", "reclaim"]}},
    ]),
    ("post", "/hosts/{host}/open", "Open a host", None, api.HostInfo, 200, [_HOST], []),
    ("post", "/hosts/{host}/decommission", "Decommission a drained host", None, api.HostInfo,
     200, [_HOST], []),
    ("post", "/hosts/{host}/reclaimed", "The provider took the host back", None, api.HostInfo,
     200, [_HOST], []),
    ("post", "/hosts/{host}/remove", "Remove a released, failed or expected host", None,
     api.HostList, 200, [_HOST], []),
    ("post", "/requests", "Request hosts of a template (admin, provisioner)",
     api.HostsRequest, api.RequestInfo, 201, [], []),
    ("get", "/requests", "Provisioning requests and their instances", None, api.RequestList,
     200, [], [{"name": "provider", "in": "query", "schema": {"type": "string"}},
               {"name": "all", "in": "query", "schema": {"type": "string"}}]),
    ("get", "/history", "Supply facts of the durable log, one line each", None,
     api.HistoryList, 200, [], [
         {"name": "after", "in": "query",
          "schema": {"type": "integer", "minimum": 0, "maximum": 2**62}},
         {"name": "limit", "in": "query",
          "schema": {"type": "integer", "minimum": 0, "maximum": 10**9}},
         {"name": "all", "in": "query", "schema": {"type": "string"}}]),
    ("get", "/requests/{request}", "One provisioning request", None, api.RequestInfo, 200,
     [_REQUEST], []),
    ("post", "/requests/{request}/accepted", "The provider started instances",
     api.AcceptRequest, api.RequestInfo, 200, [_REQUEST], []),
    ("post", "/requests/{request}/refused", "The provider refused the request",
     api.RefuseRequest, api.RequestInfo, 200, [_REQUEST], []),
    ("post", "/instances/{host}/vanished", "The provider no longer has the instance",
     api.VanishedInstance, api.RequestInfo, 200, [_HOST], []),
    ("get", "/queues", "List queues", None, api.QueueList, 200, [], []),
    ("get", "/fairshare", "Fairshare queues: shares, usage, dynamic priorities", None,
     api.FairshareList, 200, [], [{"name": "queue", "in": "query", "schema": {"type": "string"}}]),
    ("get", "/demand", "Demand of the last session", None, api.SessionOutput, 200, [], []),
    ("get", "/idle", "Idle supply of the last session", None, api.SessionOutput, 200, [], []),
    ("get", "/resources", "Shared pools and their tokens", None, api.ResourceList, 200, [], []),
    *[("post", f"/resources/{{pool}}/{step}", f"{summary} (admin, provisioner)",
       api.TokensRequest, api.PoolInfo, 200, [_POOL], [])
      for step, summary in (("borrow", "Ask a lender for tokens"),
                            ("grant", "The lender granted tokens"),
                            ("refuse", "The lender refused tokens"),
                            ("return", "Give borrowed tokens back"))],
    ("get", "/catalog", "The runtime catalog", None, api.CatalogInfo, 200, [], []),
    ("post", "/catalog", "Set runtime allowances and headrooms (admin, provisioner)",
     api.CatalogRequest, api.CatalogInfo, 200, [], []),
    ("get", "/leases", "Provider leases", None, api.LeaseList, 200, [], []),
    ("post", "/leases/{provider}", "Take or renew a provider's lease", api.LeaseRequest,
     api.LeaseInfo, 200, [_PROVIDER], []),
    ("post", "/leases/{provider}/release", "Give a provider's lease up", api.LeaseRelease,
     api.LeaseInfo, 200, [_PROVIDER], []),
    ("post", "/agents/{host}/register", "An agent registers its host", api.RegisterRequest,
     api.Registered, 200, [_HOST], []),
    ("post", "/agents/{host}/heartbeat", "An agent's heartbeat", api.Heartbeat,
     api.HeartbeatReply, 200, [_HOST], []),
]


@cache
def openapi_document() -> dict[str, Any]:
    types = [api.ApiError] + [t for op in _OPERATIONS for t in (op[3], op[4]) if t is not None]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    ref = dict(zip(types, refs, strict=True))
    error = {"content": {"application/json": {"schema": ref[api.ApiError]}}}
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, body, answer, status, params, query in _OPERATIONS:
        operation: dict[str, Any] = {
            "summary": summary,
            "operationId": method + "_" + _OP_CHARS.sub("_", path.strip("/")),
            "parameters": params + query,
            "responses": {
                str(status): {"description": "OK",
                              "content": {"application/json": {"schema": ref[answer]}}},
                **{str(code): {"description": "error", **error}
                   for code in (*_ERRORS, *_MORE_ERRORS.get(path, ()))},
            },
        }
        if body is not None:
            operation["requestBody"] = {
                "required": True, "content": {"application/json": {"schema": ref[body]}},
            }
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "XCE controller", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
