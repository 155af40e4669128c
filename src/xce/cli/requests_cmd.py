"""`xce requests`: provisioning requests and their instances, with the state of each
and the reason it is in it (like LSF's `badmin rc view`)."""

from __future__ import annotations

import time

import click

from xce.cli.client import Client, with_client
from xce.cli.client_cmds import JSON_OPTION, _echo_json, _echo_lines, table
from xce.model.api import HistoryList, RequestList
from xce.model.job_ids import id_ranges, jobs_column

REQUEST_COLUMNS = ("REQUEST", "PROVIDER", "TEMPLATE", "HOSTS", "STATE", "SINCE", "JOBS",
                   "REASON")
INSTANCE_COLUMNS = ("HOST", "INSTANCE", "STATE", "SINCE", "REASON")


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def requests_lines(answer: RequestList, long: bool) -> list[str]:
    """One line per request (JOBS: the first jobs it was made for, then how many
    more); with `long`, the jobs it was made for and its instances under it."""
    if not answer.requests:
        return ["No provisioning request."]
    if not long:
        return table(REQUEST_COLUMNS, [
            [r.request, r.provider, r.template, str(r.count), r.state, _clock(r.since),
             jobs_column(r.jobs), r.reason]
            for r in answer.requests
        ], ("HOSTS",))
    lines: list[str] = []
    for r in answer.requests:
        lines += [
            f"Request <{r.request}>, provider <{r.provider}>, template <{r.template}>, "
            f"{r.count} host(s), by <{r.holder}>, made {time.ctime(r.created)}",
            f"  {r.state} since {_clock(r.since)}: {r.reason}",
            f"  for job(s) {id_ranges(r.jobs)}" if r.jobs else "  for no job (by hand)",
            *("  " + line for line in table(INSTANCE_COLUMNS, [
                [i.host, i.instance_id or "-", i.state, _clock(i.since), i.reason]
                for i in r.instances
            ])),
            "",
        ]
    return lines[:-1]


@click.command("requests")
@click.option("-a", "every", is_flag=True, help="Ended requests too.")
@click.option("-l", "long", is_flag=True, help="Each request's instances.")
@click.option("--provider", default=None, help="One provider's requests.")
@JSON_OPTION
@with_client
def requests(client: Client, every: bool, long: bool, provider: str | None,
             as_json: bool) -> None:
    """Show provisioning requests (open ones; -a: all the controller keeps) with their
    state and why: requested, in flight, fulfilled, partially fulfilled, failed,
    returning, returned; -l adds each instance's (requested, running, joined, draining,
    releasing, released, lost)."""
    answer = client.requests(every, provider)
    if as_json:
        _echo_json(answer)
    else:
        _echo_lines(requests_lines(answer, long))


def history_lines(answer: HistoryList) -> list[str]:
    if not answer.history:
        return ["No supply fact in the log."]
    return [f"{time.strftime('%b %d %H:%M:%S', time.localtime(e.time))}  {e.seq:>8}  {e.text}"
            for e in answer.history]


@click.command("history")
@click.option("-n", "limit", type=click.IntRange(0, 10**9), default=50, show_default=True,
              help="The last N facts (0: all those found).")
@click.option("--after", type=click.IntRange(0, 2**62), default=None,
              help="Facts after this sequence number (default: the recent ones).")
@click.option("--all", "renewals", is_flag=True,
              help="Also the lease renewals (a provisioner renews its lease every round).")
@JSON_OPTION
@with_client
def history(client: Client, limit: int, after: int | None, renewals: bool,
            as_json: bool) -> None:
    """Show the controller's durable history of supply (like badmin hist): hosts
    expected, joined, closed, decommissioned and removed; provisioning requests and
    instances; leases taken and released (renewals with --all); borrowed tokens; the
    runtime catalog; each with its reason."""
    answer = client.history(limit, after, renewals)
    if as_json:
        _echo_json(answer)
    else:
        _echo_lines(history_lines(answer))
