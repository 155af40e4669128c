"""`xce provisioner`: obtain supply for demand and give idle supply back."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from pathlib import Path

import click
import msgspec

from xce.cli.client_cmds import table
from xce.config import ConfigError, load_config
from xce.config.providers.file import load_providers
from xce.metrics import bound_url, listen_address, serve_metrics
from xce.model.job_ids import jobs_column
from xce.provisioner.daemon import Provisioner
from xce.provisioner.provider import ProviderError
from xce.provisioner.registry import (
    ProviderContext,
    build_providers,
    check_catalog,
    default_providers,
)
from xce.provisioner.status import Status


def _pool(text: str) -> tuple[str, float]:
    key, _, size = text.partition("=")
    try:
        return key, float(size)
    except ValueError:
        raise click.BadParameter(f"{text}: expected POOL=SIZE, e.g. vcs=4") from None


STATUS_FILE = "status.json"  # read too: what an instance wrote before status files had names


def status_file(work_dir: str, name: str) -> Path:
    """Where instance `name` writes its status: its own file, since instances of one
    local provider share their --work directory (the provider's inventory)."""
    return Path(work_dir) / f"status-{name.replace('/', '_')}.json"


def status_files(work_dir: str, name: str | None) -> list[Path]:
    """The status files of `work_dir`: instance `name`'s, else every instance's."""
    if name is not None:
        return [status_file(work_dir, name)]
    return sorted(p for p in Path(work_dir).glob("status*.json")
                  if p.name == STATUS_FILE or p.name.startswith("status-"))


@click.group("provisioner", invoke_without_command=True)
@click.pass_context
def provisioner(ctx: click.Context) -> None:
    """Provisioner instances: `xce provisioner run ...`, `xce provisioner status`."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@provisioner.command("status")
@click.option("--work", "work_dir", type=click.Path(file_okay=False, exists=True),
              required=True, help="The instance's --work directory.")
@click.option("--name", default=None,
              help="The instance's --name (default: every instance of --work).")
@click.option("--json", "as_json", is_flag=True,
              help="The status as JSON (one object per line, one per instance).")
def status(work_dir: str, name: str | None, as_json: bool) -> None:
    """Leases held, hosts requested, the open requests with the jobs each was made
    for, and the recent decisions with their reasons: of each instance that runs with
    --work (instances of the local provider share it), or of --name's."""
    found = [path for path in status_files(work_dir, name) if path.exists()]
    if not found:
        where = status_file(work_dir, name) if name is not None else Path(work_dir)
        raise click.ClickException(f"{where}: no status yet (is the provisioner running?)")
    shown = [msgspec.json.decode(path.read_bytes(), type=Status) for path in found]
    if as_json:
        click.echo("\n".join(msgspec.json.encode(one).decode() for one in shown))
        return
    click.echo("\n\n".join("\n".join(status_lines(one)) for one in shown))


def status_lines(shown: Status) -> list[str]:
    """`xce provisioner status` as text: a header, the open requests (JOBS: the first
    jobs each was made for, then how many more), the decisions."""
    leases = ", ".join(f"{p} (token {t})" for p, t in shown.leases.items()) or "none"
    lines = [f"Instance {shown.name}, last round {time.ctime(shown.time)}; leases: {leases}",
             f"Hosts requested, not joined: {', '.join(shown.expected) or 'none'}"]
    if shown.requests:
        lines += ["Open requests:", *("  " + line for line in table(
            ("REQUEST", "PROVIDER", "TEMPLATE", "HOSTS", "STATE", "JOBS"),
            [[r.request, r.provider, r.template, str(r.count), r.state, jobs_column(r.jobs)]
             for r in shown.requests], ("HOSTS",)))]
    else:
        lines.append("Open requests: none")
    lines += running_lines(shown)
    lines += [f"{time.strftime('%H:%M:%S', time.localtime(d.time))}  {d.action:<16} "
              f"{d.detail:<20} {d.reason}: {d.outcome}" for d in shown.decisions]
    return lines


def running_lines(shown: Status) -> list[str]:
    """The hosts of the leased providers' templates that are running, per template,
    with their hourly cost (count x price per host-hour) when templates have prices."""
    if not shown.running:
        return ["Hosts running: none"]
    if not shown.cost:
        return ["Hosts running: " + ", ".join(f"{t} {n}" for t, n in shown.running.items())]
    numbers = ("HOSTS", "COST_PER_HOUR")
    return ["Hosts running:", *("  " + line for line in table(
        ("TEMPLATE", *numbers),
        [[t, str(n), f"{shown.cost.get(t, 0.0):,.3f}"] for t, n in shown.running.items()],
        numbers)), f"Hourly cost of the hosts running: {shown.cost_total:,.3f}"]


@provisioner.command("run")
@click.option("--controller", required=True, help="The controller's URL.")
@click.option("--token-file", type=click.Path(dir_okay=False, exists=True), required=True,
              help="A token of the provisioner role.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), required=True,
              help="The cluster file (its catalog and policy).")
@click.option("--work", "work_dir", type=click.Path(file_okay=False, resolve_path=True),
              required=True,
              help="This instance's directory (status; the local provider's instances).")
@click.option("--providers", "providers_path", type=click.Path(dir_okay=False), default=None,
              help="The providers file (hostProviders.json shape; default: the local "
                   "provider only).")
@click.option("--pool", "pools", multiple=True, metavar="POOL=SIZE",
              help="Tokens the local provider lends, e.g. --pool vcs=4.")
@click.option("--name", default=None, help="This instance's name (default: host:pid).")
@click.option("--interval", type=float, default=2.0, show_default=True,
              help="Seconds between policy rounds.")
@click.option("--lease-ttl", type=float, default=15.0, show_default=True)
@click.option("--join-deadline", type=float, default=600.0, show_default=True,
              help="Seconds a requested host has to join before it counts as failed.")
@click.option("--orphan-grace", type=float, default=30.0, show_default=True,
              help="Seconds before an instance no record knows is released.")
@click.option("--metrics-listen", default=None, metavar="HOST:PORT",
              help="Serve this instance's GET /metrics on HOST:PORT, without "
              "authentication (docs/metrics.md).")
def run(controller: str, token_file: str, config_path: str, work_dir: str,
        providers_path: str | None, pools: tuple[str, ...], name: str | None,
        interval: float, lease_ttl: float, join_deadline: float, orphan_grace: float,
        metrics_listen: str | None) -> None:
    """Run a provisioner instance with the providers of --providers (default: the
    local provider, the embedded default)."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        scrape = listen_address(metrics_listen) if metrics_listen else None
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--metrics-listen") from err
    try:
        config = load_config(config_path)
        specs = load_providers(providers_path) if providers_path else default_providers()
        context = ProviderContext(config, controller, work_dir, dict(_pool(p) for p in pools))
        providers = build_providers(specs, context)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err
    except ProviderError as err:
        raise click.ClickException(f"provider: {err}") from err
    for warning in check_catalog(specs, config, providers):
        logging.getLogger("xce.provisioner").warning("%s", warning)
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    me = name or f"{socket.gethostname()}:{os.getpid()}"
    token = Path(token_file).read_text().strip()
    daemon = Provisioner(controller, token, me, config, providers, lease_ttl,
                         status_file=status_file(work_dir, me),
                         orphan_grace=orphan_grace, join_deadline=join_deadline)
    asyncio.run(_serve(daemon, interval, scrape))


async def _serve(daemon: Provisioner, interval: float, scrape: tuple[str, int] | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    scraped = None
    if scrape is not None:
        try:
            scraped = await serve_metrics(daemon.metrics.registry, *scrape)
        except OSError as err:
            raise click.ClickException(f"--metrics-listen: cannot listen on "
                                       f"{scrape[0]}:{scrape[1]}: {err.strerror}") from err
        logging.getLogger("xce.provisioner").info(
            "metrics on %s", bound_url(scraped, *scrape))
    try:
        await daemon.run(interval, stop)
    finally:
        if scraped is not None:
            await scraped.cleanup()
