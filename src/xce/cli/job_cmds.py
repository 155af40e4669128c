"""A job's output, life and accounting from the command line, in LSF's words: `peek`
(bpeek: the output so far of a running job, fetched from its host), `hist` (bhist: the
job's life from the controller's durable log) and `acct` (bacct: per user and queue,
the jobs that ended in a window, their CPU and run time, wait and turnaround)."""

from __future__ import annotations

import shlex
import time

import click

from xce.cli.client import Client, with_client
from xce.cli.client_cmds import (
    JSON_OPTION,
    _echo_json,
    _echo_lines,
    _for_job,
    ending_text,
    exec_host_parts,
    long_time,
    table,
)
from xce.cli.units import TimeError, parse_time
from xce.model.api import AcctRow, AcctSummary, JobEvent, JobHistory, JobOutput, OutputTail
from xce.model.durations import duration_text


# ---------------------------------------------------------------- peek
def output_lines(output: JobOutput) -> list[str]:
    """bpeek's `<< output from stdout >>`, then the text (its end only, when the file
    is larger than what is sent: the header says how much); the same for stderr when
    it is another file."""
    lines: list[str] = []
    for name, part in (("stdout", output.stdout), ("stderr", output.stderr)):
        if part is None:
            continue
        lines.append(f"<< output from {name}{_shown(part)} >>")
        lines += part.text.splitlines()
    return lines


def _shown(part: OutputTail) -> str:
    shown = len(part.text.encode())
    if part.unreadable or shown >= part.size:
        return ""
    return f" ({part.path} on the host: its last {shown} of {part.size} bytes)"


def _unreadable(output: JobOutput) -> list[str]:
    """Why (some of) the output cannot be shown, one message each."""
    if output.unreadable:
        return [output.unreadable]
    return [f"cannot show {part.path} on {output.host}: {part.unreadable}"
            for part in (output.stdout, output.stderr)
            if part is not None and part.unreadable]


@click.command()
@click.argument("job_ids", metavar="JOBID...", nargs=-1, type=int, required=True)
@JSON_OPTION
@with_client
def peek(client: Client, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Show the output so far of running jobs, like bpeek: fetched from each job's
    first execution host (its owner or an admin only)."""
    failed = False
    for job in job_ids:
        output = _for_job(job, client.peek)
        if output is None:
            failed = True
            continue
        if as_json:
            _echo_json(output)
            continue
        _echo_lines(output_lines(output))
        for message in _unreadable(output):
            click.echo(f"xce: Job <{job}>: {message}", err=True)
            failed = True
    if failed:
        click.get_current_context().exit(1)


# ---------------------------------------------------------------- hist
def event_line(event: JobEvent, n: int) -> str:
    """One dated line of a job's life, as bhist -l words it."""
    hosts = " ".join(f"<{part}>" for part in exec_host_parts(event.hosts))
    match event.kind:
        case "submitted":
            text = "Submitted"
        case "held":
            text = "Held (PSUSP): the job was suspended while pending"
        case "released":
            text = "Released: the job is pending again"
        case "started":
            text = f"Started {n} Task(s) on Host(s) {hosts}"
        case "suspended" | "resumed":
            text = ("Suspended (USUSP): the running job was stopped" if event.kind == "suspended"
                    else "Resumed: the job runs again")
            text += f" {event.reason}" if event.reason else ""
        case "modified":  # (xce modify, top, bottom, switch: bhist's "Parameters of Job
            text = f"Parameters of Job are changed: {event.reason}"  # are changed")
        case "requeued":
            text = f"Requeued from Host(s) {hosts}" + (f": {event.reason}" if event.reason
                                                        else "")
        case _:  # killed, finished
            text = ending_text(event.state, event.exit_code, event.signal, event.reason,
                               event.failure)
            if event.cpu_time is not None:
                text += f" The CPU time used is {event.cpu_time:.1f} seconds"
            text = text.rstrip(".")
    return f"{long_time(event.time)}: {text};"


def history_lines(life: JobHistory) -> list[str]:
    """One job as bhist -l shows it: who and what, each event, the time in each state."""
    head = [f"Job <{life.job}>"]
    if life.name:
        head.append(f"Job Name <{life.name}>")
    head += [f"User <{life.user}>", f"Queue <{life.queue}>",
             f"Command <{shlex.join(life.command)}>"]
    lines = [", ".join(head)]
    for event in life.events:
        line = event_line(event, life.n)
        if event.kind == "submitted":
            line = line[:-1] + f", CWD <{life.cwd}>, {life.n} Task(s) Requested;"
        lines.append(line)
    total = life.pend + life.psusp + life.run
    lines += [
        "",
        f"Summary of time in seconds spent in various states by {long_time(life.until)}:",
        *("  " + line for line in table(
            ("PEND", "PSUSP", "RUN", "TOTAL"),
            [[f"{value:.0f}" for value in (life.pend, life.psusp, life.run, total)]],
            ("PEND", "PSUSP", "RUN", "TOTAL"))),
    ]
    return lines


@click.command()
@click.argument("job_ids", metavar="JOBID...", nargs=-1, type=int, required=True)
@JSON_OPTION
@with_client
def hist(client: Client, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Show the life of jobs from the controller's durable log, like bhist -l:
    submitted, held, started on which hosts, requeued and why, killed or finished
    (exit status, why it failed, CPU time), and the time spent in each state."""
    found = [life for life in (_for_job(job, client.job_history) for job in job_ids)
             if life is not None]
    if as_json:
        for life in found:
            _echo_json(life)
    else:
        separator = ["-" * 78]
        _echo_lines([line for i, life in enumerate(found)
                     for line in (separator if i else []) + history_lines(life)])
    if len(found) < len(job_ids):
        click.get_current_context().exit(1)


# ---------------------------------------------------------------- acct
ACCT_COLUMNS = ("USER", "QUEUE", "DONE", "EXIT", "CPU_TIME", "WALL_TIME", "MEAN_WAIT",
                "MAX_WAIT", "MEAN_TURNAROUND", "MAX_TURNAROUND")


def _row(row: AcctRow) -> list[str]:
    def shown(value: float | None) -> str:
        return "-" if value is None else duration_text(value)

    return [row.user or "TOTAL", row.queue or "-", str(row.done), str(row.exited),
            shown(row.cpu_time), shown(row.wall_time), shown(row.wait_mean),
            shown(row.wait_max), shown(row.turnaround_mean), shown(row.turnaround_max)]


def acct_lines(summary: AcctSummary) -> list[str]:
    """The window, then one line per user and queue and the total (bacct's SUMMARY)."""
    since = long_time(summary.since) if summary.since is not None else "the start"
    until = long_time(summary.until) if summary.until is not None else "now"
    jobs = summary.total.done + summary.total.exited
    head = f"Accounting of the jobs that ended from {since} to {until}: {jobs} job(s)"
    if not jobs:
        return [head]
    rows = [_row(row) for row in summary.rows]
    return [head, *table(ACCT_COLUMNS, [*rows, _row(summary.total)], ACCT_COLUMNS[2:])]


def _window(window: str | None, since: str | None, until: str | None
            ) -> tuple[float | None, float | None]:
    """`-C T0,T1` (either may be empty), else --since and --until, in epoch seconds."""
    if window is not None:
        if since is not None or until is not None:
            raise click.UsageError("give -C or --since/--until, not both")
        if "," not in window:
            raise click.BadParameter("expected T0,T1 (either may be empty)", param_hint="-C")
        since, until = (part or None for part in window.split(",", 1))
    now = time.time()

    def read(text: str | None) -> float | None:
        return None if text is None else parse_time(text, now)

    try:
        return read(since), read(until)
    except TimeError as err:
        raise click.BadParameter(str(err), param_hint="-C/--since/--until") from None


@click.command()
@click.option("-u", "user", metavar="USER|all",
              help="Jobs of USER, or of all users [default: yours; all for an admin].")
@click.option("-q", "queue", metavar="QUEUE", help="Jobs of one queue.")
@click.option("-C", "window", metavar="T0,T1",
              help="Jobs that ended from T0 to T1, as bacct -C (either may be empty).")
@click.option("--since", metavar="T", help="Jobs that ended at T or later.")
@click.option("--until", metavar="T", help="Jobs that ended before T.")
@JSON_OPTION
@with_client
def acct(client: Client, user: str | None, queue: str | None, window: str | None,
         since: str | None, until: str | None, as_json: bool) -> None:
    """Summarize finished jobs, like bacct: per user and queue, the jobs that ended
    DONE and EXIT, their CPU time and run (wall) time, the mean and largest wait and
    turnaround. Times: 2026-11-29[T18:00], [[[YYYY/]MM/]DD/]HH:MM, -2h (ago), @EPOCH."""
    start, end = _window(window, since, until)
    summary = client.acct(user, queue, start, end)
    if as_json:
        _echo_json(summary)
    else:
        _echo_lines(acct_lines(summary))
