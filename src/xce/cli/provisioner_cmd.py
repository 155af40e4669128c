"""`xce provisioner`: obtain supply for demand and give idle supply back."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from pathlib import Path

import click

from xce.config import ConfigError, load_config
from xce.provisioner.daemon import Provisioner
from xce.provisioner.provider import Provider
from xce.provisioner.providers.local import LocalProvider, local_config


def _pool(text: str) -> tuple[str, float]:
    key, _, size = text.partition("=")
    try:
        return key, float(size)
    except ValueError:
        raise click.BadParameter(f"{text}: expected POOL=SIZE, e.g. vcs=4") from None


@click.command("provisioner")
@click.option("--controller", required=True, help="The controller's URL.")
@click.option("--token-file", type=click.Path(dir_okay=False, exists=True), required=True,
              help="A token of the provisioner role.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), required=True,
              help="The cluster file (its catalog and policy).")
@click.option("--work", "work_dir", type=click.Path(file_okay=False), required=True,
              help="The local provider's directory (its instances and their agents).")
@click.option("--pool", "pools", multiple=True, metavar="POOL=SIZE",
              help="Tokens the local provider lends, e.g. --pool vcs=4.")
@click.option("--name", default=None, help="This instance's name (default: host:pid).")
@click.option("--interval", type=float, default=2.0, show_default=True,
              help="Seconds between policy rounds.")
@click.option("--lease-ttl", type=float, default=15.0, show_default=True)
def provisioner(controller: str, token_file: str, config_path: str, work_dir: str,
                pools: tuple[str, ...], name: str | None, interval: float,
                lease_ttl: float) -> None:
    """Run a provisioner instance with the local provider (the embedded default)."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = load_config(config_path)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err
    local = LocalProvider(local_config(config, controller, Path(work_dir),
                                       dict(_pool(p) for p in pools)))
    providers: dict[str, Provider] = {"local": local}
    me = name or f"{socket.gethostname()}:{os.getpid()}"
    token = Path(token_file).read_text().strip()
    daemon = Provisioner(controller, token, me, config, providers, lease_ttl)
    asyncio.run(_serve(daemon, interval))


async def _serve(daemon: Provisioner, interval: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await daemon.run(interval, stop)
