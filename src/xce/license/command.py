"""`xce license-pool`: run a license pool service."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click
from aiohttp import web

from xce.license.pool import LicensePool, StateFileError
from xce.license.server import make_app

log = logging.getLogger("xce.license")


def _features(values: tuple[str, ...]) -> dict[str, float]:
    features: dict[str, float] = {}
    for text in values:
        name, sep, total = text.partition("=")
        try:
            count = float(total) if sep else -1.0
        except ValueError:
            count = -1.0
        if not name or count < 0:
            raise click.BadParameter(f"{text}: expected NAME=TOTAL, e.g. vcs=4",
                                     param_hint="--feature")
        if name in features:
            raise click.BadParameter(f"feature {name} is given twice", param_hint="--feature")
        features[name] = count
    return features


@click.command("license-pool")
@click.option("--listen", default="127.0.0.1:7070", show_default=True,
              help="HOST:PORT to serve on (port 0: any free port).")
@click.option("--feature", "features", multiple=True, required=True, metavar="NAME=TOTAL",
              help="A feature and its tokens, e.g. --feature vcs=4 (repeat for more).")
@click.option("--lease-ttl", type=float, default=60.0, show_default=True,
              help="Seconds a lease lasts without renewal, when the borrower names none.")
@click.option("--max-ttl", type=float, default=3600.0, show_default=True,
              help="The longest ttl a borrower may ask for.")
@click.option("--token-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A file holding the bearer token every request must carry "
                   "(default: no authentication).")
@click.option("--state", "state_file", type=click.Path(dir_okay=False), default=None,
              help="Keep the leases in this JSON file (replaced atomically at every "
                   "change), so they survive a restart of the pool.")
def license_pool(listen: str, features: tuple[str, ...], lease_ttl: float, max_ttl: float,
                 token_file: str | None, state_file: str | None) -> None:
    """Run a license pool: tokens of features lent with leases that expire unless
    renewed (HTTP/JSON, see docs/providers/license.md)."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise click.BadParameter(f"{listen}: expected HOST:PORT", param_hint="--listen")
    token = ""
    if token_file is not None:
        token = Path(token_file).read_text().strip()
        if not token:
            raise click.BadParameter(f"{token_file} is empty", param_hint="--token-file")
    try:
        pool = LicensePool(_features(features), lease_ttl, max_ttl,
                           Path(state_file) if state_file else None)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    except StateFileError as err:
        raise click.ClickException(str(err)) from err
    pool.expire()  # leases that ran out while the pool was down
    asyncio.run(_serve(make_app(pool, token), host, int(port)))


async def _serve(app: web.Application, host: str, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        raise click.ClickException(f"cannot listen on {host}:{port}: {err.strerror}") from err
    bound = runner.addresses[0][1] if runner.addresses else port
    url = f"http://{host}:{bound}"
    log.info("listening on %s", url)
    click.echo(f"xce license-pool listening on {url}")  # for scripts and tests to wait for
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
