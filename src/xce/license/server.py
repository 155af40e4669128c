"""The license pool's HTTP/JSON API (aiohttp); the protocol is in
docs/providers/license.md.

    GET  /features                     every feature: total, in use, free
    GET  /features/{feature}           one feature
    POST /features/{feature}/borrow    {holder, amount, ttl?, partial?} -> a lease
    GET  /leases[?holder=H&feature=F]  live leases
    GET  /leases/{id}                  one lease
    POST /leases/{id}/renew            {ttl?} -> the lease, valid for ttl from now
    POST /leases/{id}/return           {amount?} -> what was returned, what remains
    GET  /metrics                      the Prometheus text exposition (docs/metrics.md)

Every error is JSON `{"error": "...", "status": N}`; a refused request changes
nothing. With a token file, every request carries `Authorization: Bearer <token>`.
Leases past their time are dropped before every request and every half second.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import msgspec
from aiohttp import web
from prometheus_client import CollectorRegistry

from xce.license.metrics import pool_registry
from xce.license.pool import LicensePool, PoolError
from xce.metrics import exposition
from xce.model.license_api import (
    ApiError,
    BorrowRequest,
    FeatureList,
    LeaseList,
    RenewRequest,
    ReturnRequest,
)

log = logging.getLogger("xce.license")

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

POOL = web.AppKey("pool", LicensePool)
TOKEN = web.AppKey("token", str)  # "" : no authentication
METRICS = web.AppKey("metrics", CollectorRegistry)
SWEEP_EVERY = 0.5  # seconds between expiry sweeps (every request sweeps too)
MAX_BODY = 64 * 1024

_encoder = msgspec.json.Encoder()


def reply(body: object, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(body), status=status,
                        content_type="application/json")


def problem(status: int, message: str) -> web.Response:
    return reply(ApiError(message, status), status)


async def body_of(request: web.Request, kind: type[T]) -> T:
    """The request body as `kind` (an empty body is `{}`), or 400."""
    raw = await request.read()
    try:
        return msgspec.json.decode(raw if raw.strip() else b"{}", type=kind)
    except msgspec.DecodeError as err:  # includes ValidationError
        raise PoolError(400, f"bad request body: {err}") from err


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Authenticate, drop expired leases, then turn every failure into a JSON error."""
    try:
        _authenticate(request)
        request.app[POOL].expire()
        return await handler(request)
    except PoolError as err:
        return problem(err.status, err.message)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        response = problem(err.status, err.reason)
        if "Allow" in err.headers:  # 405 must say which methods are allowed
            response.headers["Allow"] = err.headers["Allow"]
        return response
    except Exception:
        log.exception("internal error on %s %s", request.method, request.path)
        return problem(500, "internal error (see the pool's log)")


def _authenticate(request: web.Request) -> None:
    expected = request.app[TOKEN]
    if not expected:
        return
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise PoolError(401, "authentication required: Authorization: Bearer <token>")
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise PoolError(401, "wrong token")


async def list_features(request: web.Request) -> web.Response:
    return reply(FeatureList(request.app[POOL].feature_list()))


async def get_feature(request: web.Request) -> web.Response:
    return reply(request.app[POOL].feature(request.match_info["feature"]))


async def borrow(request: web.Request) -> web.Response:
    body = await body_of(request, BorrowRequest)
    pool = request.app[POOL]
    pool.expire()  # reading the body may have taken a while
    try:
        lease = pool.borrow(request.match_info["feature"], body)
    except PoolError as err:
        if err.status == 409:
            log.info("refused %s: %s", body.holder, err.message)
        raise
    return reply(lease, 201)


async def list_leases(request: web.Request) -> web.Response:
    holder = request.query.get("holder")
    feature = request.query.get("feature")
    unknown = sorted(set(request.query) - {"holder", "feature"})
    if unknown:
        raise PoolError(400, f"unknown query parameter {unknown[0]!r} (known: holder, feature)")
    return reply(LeaseList(request.app[POOL].lease_list(holder, feature)))


async def get_lease(request: web.Request) -> web.Response:
    return reply(request.app[POOL].lease(request.match_info["lease"]))


async def renew(request: web.Request) -> web.Response:
    body = await body_of(request, RenewRequest)
    pool = request.app[POOL]
    pool.expire()
    return reply(pool.renew(request.match_info["lease"], body.ttl))


async def give_back(request: web.Request) -> web.Response:
    body = await body_of(request, ReturnRequest)
    pool = request.app[POOL]
    pool.expire()
    return reply(pool.give_back(request.match_info["lease"], body.amount))


async def metrics(request: web.Request) -> web.Response:
    return exposition(request.app[METRICS])


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/metrics", metrics),
    ("GET", "/features", list_features),
    ("GET", "/features/{feature}", get_feature),
    ("POST", "/features/{feature}/borrow", borrow),
    ("GET", "/leases", list_leases),
    ("GET", "/leases/{lease}", get_lease),
    ("POST", "/leases/{lease}/renew", renew),
    ("POST", "/leases/{lease}/return", give_back),
]


async def _sweep(pool: LicensePool) -> None:
    while True:
        await asyncio.sleep(SWEEP_EVERY)
        try:
            pool.expire()
        except Exception:
            log.exception("expiry sweep failed")


def make_app(pool: LicensePool, token: str = "") -> web.Application:
    """The pool's application; `token` "" serves without authentication."""
    app = web.Application(middlewares=[errors], client_max_size=MAX_BODY)
    app[POOL] = pool
    app[TOKEN] = token
    app[METRICS] = pool_registry(pool)
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)

    async def background(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_sweep(pool))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(background)
    return app
