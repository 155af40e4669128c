"""`xce fairshare [QUEUE]`: each fairshare queue's users, shares, usage and dynamic
priorities, as LSF's bhpart / bqueues -r show them (docs/cli.md)."""

from __future__ import annotations

import click

from xce.cli.client import Client, ClientError, with_client
from xce.cli.client_cmds import JSON_OPTION, _echo_json, _echo_lines, table
from xce.cli.queue_long import share_list
from xce.model.api import QueueShares, ShareRow

HEADER = ("USER", "ACCOUNT", "SHARES", "PRIORITY", "STARTED", "PEND", "CPU_TIME", "RUN_TIME")


def share_lines(queue: QueueShares) -> list[str]:
    """One queue: its shares and factors, then a row per user, first served first."""
    return [
        f"QUEUE: {queue.queue}",
        f"USER_SHARES:  {share_list(queue.shares)}",
        f"CPU_TIME_FACTOR {queue.cpu_time_factor:g}  RUN_TIME_FACTOR "
        f"{queue.run_time_factor:g}  RUN_JOB_FACTOR {queue.run_job_factor:g}  "
        f"HIST_HOURS {queue.hist_hours:g}",
        "",
        *table(HEADER, [_row(row) for row in queue.users], HEADER[2:]),
    ]


def _row(row: ShareRow) -> list[str]:
    """Shares: the user's own (a group's divided among its members); priority: the
    account's, and a group member's own within it after a slash; times in hours."""
    priority = f"{row.priority:.3f}"
    if row.priority_within is not None:
        priority += f"/{row.priority_within:.3f}"
    return [
        row.user, row.account, f"{row.user_shares:g}", priority, str(row.started),
        str(row.pending), f"{row.cpu_time:.2f}", f"{row.run_time:.2f}",
    ]


@click.command()
@click.argument("queue", required=False)
@JSON_OPTION
@with_client
def fairshare(client: Client, queue: str | None, as_json: bool) -> None:
    """Show fairshare queues' users by dynamic priority, like bhpart."""
    answer = client.fairshare(queue)
    if as_json:
        _echo_json(answer)
        return
    if not answer.queues:
        raise ClientError("no queue has fairshare (a queue's fairshare: in the cluster file)")
    lines: list[str] = []
    for at, found in enumerate(answer.queues):
        lines += ([""] if at else []) + share_lines(found)
    _echo_lines(lines)
