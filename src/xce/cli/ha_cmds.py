"""`xce controller status` and `xce admin takeover`: the controllers that share a
PostgreSQL log, read from the database itself (they work when no controller leads);
docs/ha.md. (psycopg is imported only when one of them runs: it costs every other
command half a second.)"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click
import msgspec

from xce.controller.store import StoreError

if TYPE_CHECKING:
    from xce.controller.leadership import Status
    from xce.controller.pg_store import PostgresStore

_store_option = click.option(
    "--store", "store_url", required=True, envvar="XCE_STORE", metavar="URL",
    help="The controllers' PostgreSQL log (postgresql://USER@HOST:PORT/DB; also $XCE_STORE).")


def _open(url: str) -> PostgresStore:
    from xce.controller.pg_store import PostgresStore

    if not url.startswith(("postgresql://", "postgres://")):
        raise click.ClickException(f"--store {url}: expected a postgresql:// URL")
    try:
        return PostgresStore(url)
    except StoreError as err:
        raise click.ClickException(str(err)) from err


def _status(store: PostgresStore) -> Status:
    from xce.controller.leadership import status

    try:
        return status(store)
    except StoreError as err:
        raise click.ClickException(str(err)) from err


@click.command("status")
@_store_option
@click.option("--json", "as_json", is_flag=True, help="The status as JSON.")
def controller_status(store_url: str, as_json: bool) -> None:
    """Who leads, in which term, and how far each standby has applied the log."""
    with _open(store_url) as store:
        now = _status(store)
    if as_json:
        click.echo(msgspec.json.encode(now).decode())
        return
    since = datetime.fromtimestamp(now.since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    leader = f"{now.leader} (term {now.term}, since {since})" if now.leader else "none yet"
    click.echo(f"leader: {leader}; the log's last fact: {now.last_seq}")
    rows = [("CONTROLLER", "ROLE", "TERM", "APPLIED", "LAG", "SEEN")]
    rows += [(c.name, c.role, str(c.term), str(c.applied), str(c.lag), f"{c.seen_ago} s ago")
             for c in now.controllers]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                   .rstrip())


@click.group("admin")
def admin() -> None:
    """Cluster administration (docs/ha.md)."""


@admin.command("takeover")
@_store_option
@click.option("--wait", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to wait for a standby to lead.")
def takeover(store_url: str, wait: float) -> None:
    """A planned switch of the leader (LSF's badmin mbdrestart): the leader's database
    sessions are ended, it steps down (exit 75; its supervisor restarts it as a
    standby) and a live standby takes over."""
    from xce.controller.leadership import depose

    with _open(store_url) as store:
        try:
            old, term = depose(store)
        except StoreError as err:
            raise click.ClickException(str(err)) from err
        deadline = time.monotonic() + wait
        while (now := _status(store)).term == term:
            if time.monotonic() > deadline:
                raise click.ClickException(f"{old} was deposed, but no standby led within "
                                           f"{wait:.0f} s (see `xce controller status`)")
            time.sleep(0.2)
    click.echo(f"{now.leader} leads in term {now.term} ({old} led term {term})")
