"""`xce init`, `xce token` and `xce controller`: make a cluster's state directory,
manage its tokens, run its controller."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import getpass
import logging
import os
import signal
import socket
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click
from aiohttp import web

from xce.cli.ha_cmds import controller_status
from xce.config import ConfigError, load_config
from xce.controller.app import make_app
from xce.controller.auth import AuthError, TokenStore
from xce.controller.core import Controller, Settings
from xce.controller.metrics import METRICS
from xce.controller.store import StoreError, open_store
from xce.metrics import bound_url, listen_address, serve_metrics
from xce.model.api import ROLES
from xce.model.recording import Recorder

if TYPE_CHECKING:
    from xce.controller.leadership import Leadership

DEFAULTS = Settings()
STORE_FILE = "xce.db"
CONTROLLER_LOCK = "controller.lock"  # held (flock) by the controller of the directory
URL_FILE = "controller.url"
METRICS_URL_FILE = "metrics.url"  # where --metrics-listen serves (docs/metrics.md)
ADMIN_TOKEN_FILE = "admin.token"


def _state_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--state", "state_dir", required=True, type=click.Path(file_okay=False),
        help="The cluster's state directory (made by `xce init`).",
    )(f)


@click.command("init")
@_state_option
@click.option("--admin", default=None, help="The admin's name (default: your login name).")
def init(state_dir: str, admin: str | None) -> None:
    """Make a cluster state directory with a first admin token."""
    tokens = TokenStore(state_dir)
    try:
        if tokens.entries():
            raise click.ClickException(f"{tokens.path} exists: the cluster is initialised")
        token = tokens.add(admin or getpass.getuser(), "admin")
    except AuthError as err:
        raise click.ClickException(str(err)) from err
    path = Path(state_dir) / ADMIN_TOKEN_FILE
    path.write_text(token + "\n")
    path.chmod(0o600)
    click.echo(f"Initialised {state_dir}; the admin token is in {path}.")


@click.group("token")
def token() -> None:
    """Manage API tokens (run on the controller host; takes effect at once)."""


@token.command("add")
@_state_option
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--name", required=True, help="User name, or the host name for an agent.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the token to this file.")
def token_add(state_dir: str, role: str, name: str, out: str | None) -> None:
    """Make a token; prints it (or writes it to --out, mode 0600)."""
    try:
        secret = TokenStore(state_dir).add(name, role)
    except AuthError as err:
        raise click.ClickException(str(err)) from err
    if out is None:
        click.echo(secret)
        return
    Path(out).write_text(secret + "\n")
    Path(out).chmod(0o600)
    click.echo(f"Token for {role} {name} written to {out}.")


@token.command("list")
@_state_option
def token_list(state_dir: str) -> None:
    """Who has tokens (the tokens themselves are not kept)."""
    for entry in TokenStore(state_dir).entries():
        click.echo(f"{entry.role:<12} {entry.name}")


@token.command("revoke")
@_state_option
@click.option("--name", required=True)
@click.option("--role", type=click.Choice(ROLES), default=None)
def token_revoke(state_dir: str, name: str, role: str | None) -> None:
    """Revoke every token of a name (in one role when given)."""
    count = TokenStore(state_dir).revoke(name, role)
    if not count:  # (a misspelt name must not pass for a revocation)
        raise click.ClickException(
            f"no token of {name!r}" + (f" in role {role}" if role else "") + ": nothing revoked"
        )
    click.echo(f"{count} token(s) revoked.")


@click.group("controller", invoke_without_command=True)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The cluster file.  [required]")
@click.option("--state", "state_dir", type=click.Path(file_okay=False),
              help="The cluster's state directory (made by `xce init`).  [required]")
@click.option("--listen", default="127.0.0.1:6820", show_default=True,
              help="HOST:PORT to serve the API on (port 0: any free port).")
@click.option("--record", type=click.Path(dir_okay=False), default=None,
              help="Write the scheduler's events and sessions to this recording.")
@click.option("--heartbeat-interval", type=float, default=DEFAULTS.heartbeat_interval,
              show_default=True)
@click.option("--unreach-after", type=float, default=DEFAULTS.unreach_after, show_default=True,
              help="Seconds without a heartbeat before a host is unreach.")
@click.option("--requeue-after", type=float, default=DEFAULTS.requeue_after, show_default=True,
              help="Seconds unreach before its jobs are requeued (or exited).")
@click.option("--snapshot-every", type=int, default=DEFAULTS.snapshot_every, show_default=True,
              help="Facts between snapshots of the durable log.")
@click.option("--limit-grace", type=click.FloatRange(min=0), default=DEFAULTS.limit_grace,
              show_default=True,
              help="Seconds past its run limit after which the controller ends a job its "
              "agent has not reported ended.")
@click.option("--metrics-listen", default=None, metavar="HOST:PORT",
              help="Also serve GET /metrics on HOST:PORT, without authentication "
              "(default: only on --listen, with a metrics or admin token).")
@click.option("--store", "store_url", default=None, envvar="XCE_STORE", metavar="URL",
              help="The durable log in PostgreSQL (postgresql://USER@HOST:PORT/DB; also "
              "$XCE_STORE); default: the SQLite file xce.db of the state directory.")
@click.pass_context
def controller(
    ctx: click.Context,
    config_path: str | None,
    state_dir: str | None,
    listen: str,
    record: str | None,
    heartbeat_interval: float,
    unreach_after: float,
    requeue_after: float,
    snapshot_every: int,
    limit_grace: float,
    metrics_listen: str | None,
    store_url: str | None,
) -> None:
    """Run the controller: the API, the durable log and the scheduling sessions (or,
    with a command, look at the controllers of a PostgreSQL log: docs/ha.md)."""
    if ctx.invoked_subcommand is not None:
        return
    for value, option in ((config_path, "--config"), (state_dir, "--state")):
        if value is None:
            raise click.UsageError(f"Missing option '{option}'.", ctx)
    assert config_path is not None and state_dir is not None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = load_config(config_path)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err
    tokens = TokenStore(state_dir)
    if not tokens.path.exists():
        raise click.ClickException(f"{state_dir} has no tokens: run `xce init --state {state_dir}`")
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise click.ClickException(f"--listen {listen}: expected HOST:PORT")
    try:
        scrape = listen_address(metrics_listen) if metrics_listen else None
    except ValueError as err:
        raise click.ClickException(f"--metrics-listen {err}") from err
    if store_url is not None and not store_url.startswith(("postgresql://", "postgres://")):
        raise click.ClickException(f"--store {store_url}: expected a postgresql:// URL")
    # One controller per SQLite log: a second one on the directory would append to
    # the same log (controllers sharing a PostgreSQL log elect a leader: docs/ha.md).
    held = None if store_url is not None else _hold_state_dir(Path(state_dir))
    try:
        store = open_store(store_url or str(Path(state_dir) / STORE_FILE))
    except StoreError as err:
        raise click.ClickException(str(err)) from err
    settings = Settings(heartbeat_interval, unreach_after, requeue_after,
                        snapshot_every=snapshot_every, limit_grace=limit_grace)
    recorder = Recorder(record, source="live") if record else None
    ctl = Controller(config, store, settings, recorder=recorder)
    try:
        asyncio.run(_serve(ctl, tokens, host, int(port), Path(state_dir), scrape))
    finally:
        store.close()
        if held is not None:
            held.close()


def _hold_state_dir(state_dir: Path) -> IO[str]:
    """Lock the state directory for this controller (the lock goes with the process,
    however it ends); a clear error when another controller holds it."""
    lock = open(state_dir / CONTROLLER_LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (kept open)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        owner = lock.read().strip() or "?"
        lock.close()
        raise click.ClickException(
            f"{state_dir} is in use by another controller (pid {owner}): stop it first, "
            "or give this one its own --state"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _leadership(ctl: Controller) -> Leadership | None:
    """The leadership of controllers sharing a PostgreSQL log (None: SQLite)."""
    from xce.controller.pg_store import PostgresStore  # (psycopg: only when used)

    if not isinstance(ctl.store, PostgresStore):
        return None
    from xce.controller.leadership import Leadership

    def applied() -> int:
        return ctl.journal.durable_seq if ctl.journal is not None else ctl.applied

    return Leadership(ctl.store, ctl.follow, applied)


async def _serve(ctl: Controller, tokens: TokenStore, host: str, port: int, state_dir: Path,
                 scrape: tuple[str, int] | None) -> None:
    leadership = _leadership(ctl)
    if leadership is not None:  # recovered before serving, as with SQLite
        ctl.recover_all()
    app = make_app(ctl, tokens, leadership)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    scraped = None
    if scrape is not None:  # after the API's start: the metrics follow every live fact
        try:
            scraped = await serve_metrics(app[METRICS].registry, *scrape)
        except OSError as err:
            await runner.cleanup()
            raise click.ClickException(f"--metrics-listen: cannot listen on "
                                       f"{scrape[0]}:{scrape[1]}: {err.strerror}") from err
        _publish(state_dir, METRICS_URL_FILE, bound_url(scraped, *scrape))
    bound = runner.addresses[0][1] if runner.addresses else port
    url = f"http://{host}:{bound}"
    if leadership is not None:  # (where the standbys send callers: a name, not 0.0.0.0)
        wildcard = host in ("0.0.0.0", "::", "[::]")
        leadership.advertise(f"http://{socket.getfqdn()}:{bound}" if wildcard else url)
    _publish(state_dir, URL_FILE, url)
    logging.getLogger("xce.controller").info("listening on %s", url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    with contextlib.suppress(OSError):
        os.remove(state_dir / URL_FILE)
        os.remove(state_dir / METRICS_URL_FILE)
    if scraped is not None:
        await scraped.cleanup()
    await runner.cleanup()


def _publish(state_dir: Path, name: str, url: str) -> None:
    """Write a URL file of the state directory (readers never see it half-written)."""
    partial = state_dir / (name + ".tmp")
    partial.write_text(url + "\n")
    os.replace(partial, state_dir / name)


controller.add_command(controller_status)
