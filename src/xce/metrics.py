"""What the daemons' metrics share (docs/metrics.md): a registry of one daemon with
its build information, the text exposition of a registry as an aiohttp answer, the
histogram buckets, and a metrics-only HTTP site (`--metrics-listen`), served without
authentication on an address an admin chooses.

Every daemon keeps its metrics in a registry of its own (never prometheus_client's
global one), so that several controllers in one process (tests) stay apart. Counters
start at 0 when a process starts, as Prometheus expects of counters.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Info, generate_latest

from xce import __version__

PATH = "/metrics"
# seconds: a scheduling session's phases; one commit to the durable log
FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                2.5, 5.0, 10.0)
# seconds from a provider request to the host's join
JOIN_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0,
                1800.0, 3600.0)


def new_registry(daemon: str) -> CollectorRegistry:
    """A daemon's own registry, with `xce_build_info{version, daemon}` 1."""
    registry = CollectorRegistry(auto_describe=True)
    Info("xce_build", "The XCE build this process runs", registry=registry).info(
        {"version": __version__, "daemon": daemon})
    return registry


def exposition(registry: CollectorRegistry) -> web.Response:
    """The registry in the Prometheus text format, collected now."""
    response = web.Response(body=generate_latest(registry))
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


def listen_address(text: str) -> tuple[str, int]:
    """HOST:PORT as host and port (ValueError otherwise; port 0: any free port)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{text}: expected HOST:PORT")
    return host.strip("[]"), int(port)


async def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> web.AppRunner:
    """Serve `GET /metrics` of `registry`, without authentication, on host:port (in
    this event loop, beside whatever else it serves); its runner (`cleanup()` stops
    it; `addresses` says where it listens). OSError when it cannot listen."""

    async def metrics(_request: web.Request) -> web.Response:
        return exposition(registry)

    app = web.Application()
    app.router.add_get(PATH, metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    return runner


def bound_url(runner: web.AppRunner, host: str, port: int) -> str:
    """The URL of the metrics a runner serves (the port it was given, or the one the
    system chose for port 0)."""
    bound = runner.addresses[0][1] if runner.addresses else port
    return f"http://{host}:{bound}{PATH}"
