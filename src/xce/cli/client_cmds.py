"""The commands that talk to the controller, in LSF's words and layouts: `submit`
(bsub), `jobs` (bjobs), `kill` (bkill), `hosts` (bhosts), `queues` (bqueues),
`host close|open` (badmin hclose|hopen), and `demand` / `idle` for elastic supply.

Output is plain text in aligned columns, as LSF prints it, so that grep and awk can
read it; `--json` prints the API's answer instead.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import click
import msgspec

from xce.cli.client import Client, ClientError, session_demand, session_idle, with_client
from xce.cli.gpu_option import gpu_option
from xce.cli.job_refs import (
    ARRAY_COLUMNS,
    JOB_REF,
    JobRef,
    array_rows,
    lookup,
    ref_text,
    shown_id,
    shown_name,
)
from xce.cli.runlimit import limit_text, run_limit_option
from xce.model.api import (
    PREEMPTION,
    ExpectRequest,
    HostInfo,
    JobInfo,
    JobList,
    QueueInfo,
    SessionOutput,
    SubmitRequest,
)
from xce.model.cluster import ResourceValue
from xce.model.cost import costs, template_prices
from xce.model.jobs import MAX_USER_PRIORITY
from xce.model.result import number
from xce.resreq import GpuRequest

T = TypeVar("T")

PENDING = ("PEND", "PSUSP")
# The `state` values of `GET /jobs` that -p, -r and -d ask for, and the job states each
# one selects (to filter jobs given by id the same way).
STATE_FILTERS = {"run": ("RUN",), "pend": PENDING, "finished": ("DONE", "EXIT")}
JOB_NAME_WIDTH = 10  # LSF's JOB_NAME column: longer names show their end after a `*`
SEPARATOR = "-" * 78  # between jobs in `jobs -l`, as bjobs -l


# ---------------------------------------------------------------- formatting
def table(header: Sequence[str], rows: Sequence[Sequence[str]],
          right: Collection[str] = ()) -> list[str]:
    """Plain text columns two spaces apart: the header line, then one line per row.
    Columns named in `right` (numbers) are right-aligned; no trailing blanks."""
    widths = [max(map(len, column)) for column in zip(header, *rows, strict=True)]
    return [
        "  ".join(
            cell.rjust(width) if name in right else cell.ljust(width)
            for name, cell, width in zip(header, line, widths, strict=True)
        ).rstrip()
        for line in (header, *rows)
    ]


def _change(change: str) -> str:
    """A line of a job's history: a preemption as it happened (`Preempted by job 12
    (requeue)`), anything else as a change of its parameters."""
    if change.startswith("preempted"):
        return change[0].upper() + change[1:]
    return f"Parameters of Job are changed: {change}"


def short_time(stamp: float) -> str:
    """`Nov 29 18:40` in local time, as LSF's SUBMIT_TIME (ctime's day padding)."""
    return time.ctime(stamp)[4:16]


def long_time(stamp: float) -> str:
    """`Fri Nov 29 18:40:05` in local time, as bjobs -l."""
    return time.ctime(stamp)[:19]


def exec_host_parts(hosts: dict[str, int]) -> list[str]:
    """`2*n01`, or `n01` for one slot, as LSF names execution hosts."""
    return [f"{slots}*{name}" if slots > 1 else name for name, slots in hosts.items()]


def job_name(job: JobInfo, wide: bool) -> str:
    """The job name (by default the command line), shortened like LSF unless `wide`."""
    name = shown_name(job) or shlex.join(job.command)
    if wide or len(name) <= JOB_NAME_WIDTH:
        return name
    return "*" + name[-(JOB_NAME_WIDTH - 1):]


def reason_line(reason: str) -> str:
    """A pend reason as bjobs prints it: indented by one blank, ending in `;`."""
    return f" {reason.rstrip('.;')};"


JOB_COLUMNS = ("JOBID", "USER", "STAT", "QUEUE", "EXEC_HOST", "JOB_NAME", "SUBMIT_TIME")


def jobs_lines(jobs: Sequence[JobInfo], wide: bool = False, reasons: bool = False) -> list[str]:
    """The bjobs table; with `reasons`, each pending job's reason under its line."""
    header, *rows = table(JOB_COLUMNS, [
        [shown_id(job), job.user, job.state, job.queue, ":".join(exec_host_parts(job.exec_hosts)),
         job_name(job, wide), short_time(job.submit_time)]
        for job in jobs
    ])
    lines = [header]
    for job, row in zip(jobs, rows, strict=True):
        lines.append(row)
        if reasons and job.pend_reason:
            lines.append(reason_line(job.pend_reason))
    return lines


def _ending(job: JobInfo) -> str:
    return ending_text(job.state, job.exit_code, job.signal, job.exit_reason, job.failure)


def ending_text(state: str, exit_code: int | None, signal: int | None, reason: str,
                failure: str = "") -> str:
    """`Done successfully.`, `Exited with exit code 1.`, `Exited by signal 15: killed.`;
    a job that failed on its host says why: `Exited: unknown user 'bob' on n01 (...).`
    (it could not start: its 127 is not the command's), `Exited by signal 11: SIGSEGV
    (Segmentation fault) on n01.`"""
    if state == "DONE":
        ending = "Done successfully"
    elif signal is not None:
        ending = f"Exited by signal {signal}"
    elif exit_code is not None and not failure:
        ending = f"Exited with exit code {exit_code}"
    else:
        ending = "Exited"  # ended before it started, or could not start
    why = "; ".join(text.rstrip(".") for text in (reason, failure) if text)
    return f"{ending}: {why}." if why else f"{ending}."


def job_long(job: JobInfo) -> list[str]:
    """One job as bjobs -l shows it: who and what, then dated events, then why it pends."""
    head = [f"Job <{shown_id(job)}>"]
    if job.name:
        head.append(f"Job Name <{shown_name(job)}>")
    head += [f"User <{job.user}>", f"Status <{job.state}>", f"Queue <{job.queue}>",
             f"Command <{shlex.join(job.command)}>"]
    submitted = ["Submitted"]
    if job.cwd:
        submitted.append(f"CWD <{job.cwd}>")
    if job.output:
        submitted.append(f"Output File <{job.output}>")
    if job.error:
        submitted.append(f"Error File <{job.error}>")
    submitted.append(f"{job.n} Task(s) Requested")
    if job.res:
        submitted.append(f"Requested Resources <{job.res}>")
    if job.depend:
        submitted.append(f"Dependency Condition <{job.depend}>")
    lines = [", ".join(head), f"{long_time(job.submit_time)}: {', '.join(submitted)};"]
    lines += [f"{long_time(c.time)}: {_change(c.change)};"
              for c in job.changes]  # (xce modify, top, bottom, switch; preemptions)
    if job.run_limit is not None:  # as bjobs -l: after the submission
        lines += ["", f" RUNLIMIT {limit_text(job.run_limit)}", ""]
    if job.start_time is not None:
        hosts = " ".join(f"<{part}>" for part in exec_host_parts(job.exec_hosts))
        lines.append(f"{long_time(job.start_time)}: Started {job.n} Task(s) on Host(s) {hosts};")
    if job.suspended_time is not None:  # USUSP: stopped while running (xce stop)
        by = ("a preemption" if job.suspended_by == PREEMPTION
              else f"the user or administrator <{job.suspended_by}>")
        lines.append(f"{long_time(job.suspended_time)}: Suspended by {by};")
    if job.end_time is not None:
        lines.append(f"{long_time(job.end_time)}: {_ending(job)}")
    if job.state in PENDING and job.pend_reason:
        lines += ["", " PENDING REASONS:", reason_line(job.pend_reason)]
    if job.state in PENDING and job.expected_start is not None:
        hosts = " ".join(f"<{part}>" for part in exec_host_parts(job.reserved_hosts))
        lines += ["", " RESERVATION:",
                  f" Expected to start at {long_time(job.expected_start)} on Host(s) {hosts};"]
    # One blank line between sections, none at the end.
    return [line for i, line in enumerate(lines)
            if line or (0 < i < len(lines) - 1 and lines[i + 1])]


def host_status(host: HostInfo) -> str:
    """The STATUS column: the host state; a closed host says why (closed_Adm by an
    admin, closed_Idle, closed_Life, closed_Recl by the provisioner)."""
    return host.status or ("closed_Adm" if host.closed_by_admin else host.state)


HOST_COLUMNS = ("HOST_NAME", "STATUS", "MAX", "NJOBS", "RUN")
HOST_NUMBERS = ("MAX", "NJOBS", "RUN")


def _host_row(host: HostInfo) -> list[str]:
    return [host.name, host_status(host), str(host.slots), str(host.used),
            str(host.used - host.suspended)]


def hosts_lines(hosts: Sequence[HostInfo]) -> list[str]:
    """The bhosts table: NJOBS the slots of the host's jobs, RUN those of its running
    ones (a stopped or preempted job, USUSP, counts in NJOBS only, as in bhosts).
    Hosts requested from providers and not joined follow, with template and deadline."""
    lines = table(HOST_COLUMNS, [_host_row(host) for host in hosts], HOST_NUMBERS)
    waiting = [h for h in hosts if h.deadline is not None]
    if waiting:
        lines += ["", *table(
            ("EXPECTED_HOST", "STATUS", "TEMPLATE", "PROVIDER", "REQUEST", "DEADLINE"),
            [[h.name, h.state, h.template or "-", h.provider or "-", h.request or "-",
              long_time(h.deadline) if h.deadline is not None else "-"] for h in waiting],
            (),
        )]
    return lines


def resources_text(resources: dict[str, ResourceValue]) -> str:
    """`mem=64000 ssd`: numeric resources with their value, true booleans by name."""
    return " ".join(
        name if value is True else f"{name}={number(value)}"
        for name, value in resources.items()
        if value is not False
    )


def host_long(host: HostInfo) -> list[str]:
    """One host as a block, like bhosts -l, with what XCE knows of it."""
    heartbeat = host.last_heartbeat
    details = (
        ("TYPE", host.type),
        ("MODEL", host.model),
        ("TEMPLATE", host.template or ""),
        *(  # what only provisioned or expected hosts have, and why a host is in its state
            (key, value) for key, value in (
                ("PROVIDER", host.provider),
                ("REQUEST", host.request),
                ("REASON", host.reason),
                ("DEADLINE", long_time(host.deadline) if host.deadline is not None else ""),
                ("JOINED", long_time(host.joined) if host.joined is not None else ""),
                ("IDLE_SINCE",
                 long_time(host.idle_since) if host.idle_since is not None else ""),
            ) if value
        ),
        ("HEARTBEAT", long_time(heartbeat) if heartbeat is not None else ""),
        ("RESOURCES", resources_text(host.resources)),
        ("JOBS", " ".join(map(str, host.jobs))),
    )
    return [
        f"HOST  {host.name}",
        *table(HOST_COLUMNS[1:], [_host_row(host)[1:]], HOST_NUMBERS),
        *(f"{key:<10} {value or '-'}" for key, value in details),
    ]


def queues_lines(queues: Sequence[QueueInfo]) -> list[str]:
    """The bqueues table."""
    return table(
        ("QUEUE_NAME", "PRIO", "STATUS", "NJOBS", "PEND", "RUN"),
        [[q.name, str(q.priority), q.status, str(q.njobs), str(q.pend), str(q.run)]
         for q in queues],
        ("PRIO", "NJOBS", "PEND", "RUN"),
    )


def _pool(resource: str) -> list[str]:
    """`hspice/cloud` -> [hspice, cloud]; a resource of one pool -> [vcs, -]."""
    name, _, pool = resource.partition("/")
    return [name, pool or "-"]


def _amount(value: float) -> str:
    return str(number(value))


def _session_report(output: SessionOutput, sections: Sequence[tuple[str, list[str]]],
                    nothing: str) -> list[str]:
    """`Session N at <time>`, then each titled table, or `nothing` when there is none."""
    if output.time is None:
        return ["No scheduling session has run yet."]
    lines = [f"Session {output.session} at {long_time(output.time)}"]
    for title, rows in sections:
        lines += ["", title, *rows]
    return lines if sections else [*lines, nothing]


def demand_cost(
    output: SessionOutput, prices: Mapping[str, float]
) -> tuple[dict[str, float], float] | None:
    """The hourly cost of the new hosts the demand asks for: per template its count
    times its price per host-hour, and the total (model/cost.py); None without prices
    or without hosts to request."""
    hosts = session_demand(output).hosts
    if not prices or not hosts:
        return None
    return costs({h.template: h.count for h in hosts}, prices)


def demand_lines(output: SessionOutput, prices: Mapping[str, float] | None = None) -> list[str]:
    """The last session's demand: hosts to request per template (with `prices`, per
    host-hour, the hourly cost of the new ones), tokens per resource, and in-flight
    supply that no pending job needs."""
    demand = session_demand(output)
    sections: list[tuple[str, list[str]]] = []
    if demand.hosts:
        header = ["TEMPLATE", "NEW_HOSTS", "IN_FLIGHT_USED", "JOBS"]
        rows = [[h.template, str(h.count), str(h.in_flight_used), str(len(h.jobs))]
                for h in demand.hosts]
        tail: list[str] = []
        cost = demand_cost(output, prices or {})
        if cost is not None and prices is not None:
            header += ["PRICE", "COST_PER_HOUR"]
            for row, h in zip(rows, demand.hosts, strict=True):
                row += [f"{prices.get(h.template, 0.0):,.3f}", f"{cost[0][h.template]:,.3f}"]
            tail = [f"Hourly cost of the new hosts: {cost[1]:,.3f}"]
        sections.append(("Hosts to request:", [*table(header, rows, header[1:]), *tail]))
    if demand.resources:
        sections.append(("Tokens to obtain:", table(
            ("RESOURCE", "POOL", "AMOUNT", "IN_FLIGHT_USED", "JOBS"),
            [[*_pool(r.resource), _amount(r.amount), _amount(r.in_flight_used),
              str(len(r.jobs))] for r in demand.resources],
            ("AMOUNT", "IN_FLIGHT_USED", "JOBS"),
        )))
    if demand.surplus_hosts:
        sections.append(("Surplus hosts in flight (no pending job needs them):", table(
            ("TEMPLATE", "HOSTS"), [[s.template, str(s.count)] for s in demand.surplus_hosts],
            ("HOSTS",),
        )))
    if demand.surplus_tokens:
        sections.append(("Surplus tokens in flight (no pending job needs them):", table(
            ("RESOURCE", "POOL", "AMOUNT"),
            [[*_pool(t.resource), _amount(t.amount)] for t in demand.surplus_tokens],
            ("AMOUNT",),
        )))
    return _session_report(output, sections, "No demand.")


def idle_lines(output: SessionOutput) -> list[str]:
    """The last session's idle supply: provisioned hosts without work, unused tokens."""
    idle = session_idle(output)
    sections: list[tuple[str, list[str]]] = []
    if idle.hosts:
        sections.append(("Idle hosts:", table(
            ("HOST", "TEMPLATE", "IDLE_FOR"),
            [[h.host, h.template, f"{_amount(h.idle_for)}s"] for h in idle.hosts],
            ("IDLE_FOR",),
        )))
    if idle.resources:
        sections.append(("Idle tokens:", table(
            ("RESOURCE", "POOL", "AMOUNT"),
            [[*_pool(r.resource), _amount(r.amount)] for r in idle.resources],
            ("AMOUNT",),
        )))
    return _session_report(output, sections, "No idle supply.")


def _echo_lines(lines: Sequence[str]) -> None:
    if lines:
        click.echo("\n".join(lines))


def _echo_json(answer: msgspec.Struct) -> None:
    click.echo(msgspec.json.encode(answer).decode())


def _for_job(job: int | JobRef, action: Callable[[Any], T]) -> T | None:
    """`action(job)`, or None after printing the controller's refusal (which names the
    job, as LSF's messages do). An unreachable controller or a refused token ends the
    command: the next job would fail the same way."""
    try:
        return action(job)
    except ClientError as err:
        if err.status in (None, 401):
            raise
        shown = ref_text(job) if isinstance(job, tuple) else str(job)
        named = err.message.startswith(f"Job <{shown}>")
        click.echo(f"xce: {err.message if named else f'Job <{shown}>: {err.message}'}",
                   err=True)
        return None


JSON_OPTION = click.option("--json", "as_json", is_flag=True,
                           help="Print the controller's JSON answer.")


# ---------------------------------------------------------------- commands
@click.command(context_settings={"allow_interspersed_args": False})
@click.argument("command", metavar="[--] COMMAND [ARG]...", nargs=-1, required=True)
@click.option("-n", "tasks", type=click.IntRange(min=1), default=1, show_default=True,
              help="Number of tasks (slots).")
@click.option("-R", "res", multiple=True, metavar="REQ",
              help='Resource requirement, e.g. "select[mem>4000] span[hosts=1]" (several '
              '-R are joined into one string, as LSF does).')
@click.option("-q", "queue", default="", metavar="QUEUE",
              help="Queue [default: the first configured queue].")
@click.option("-J", "name", default="", metavar="NAME",
              help='Job name; "NAME[1-100:2,200]%N" submits a job array (%N: at most N '
              "elements run at once).")
@click.option("-w", "depend", default="", metavar="EXPR",
              help='Dependency condition, e.g. "done(12) && (exit(13) || ended(arr))": the '
              "job pends until it holds.")
@click.option("-ti", "end_orphan", is_flag=True,
              help="End the job once its dependency condition can never be satisfied.")
@click.option("-o", "output", default="", metavar="FILE",
              help="Standard output file on the execution host (%J: the job id, %I: the "
              "array index).")
@click.option("-e", "error", default="", metavar="FILE",
              help="Standard error file [default: with the standard output].")
@click.option("-H", "hold", is_flag=True, help="Hold the job: it pends in PSUSP.")
@click.option("-sp", "priority", type=click.IntRange(1, MAX_USER_PRIORITY), default=None,
              help=f"User priority, 1 to {MAX_USER_PRIORITY}: higher first in its queue.")
@click.option("-W", "run_limit", metavar="[hh:]mm", callback=run_limit_option,
              help="Run limit: minutes, or hours:minutes (the job is ended when it has "
              "run this long) [default: the queue's run_limit].")
@click.option("-gpu", "gpu", metavar="REQ", callback=gpu_option,
              help='GPUs on each host of the job, as LSF\'s bsub -gpu: '
              '"num=N[:mode=shared|exclusive_process][:j_exclusive=yes|no]" or - '
              "(num=1).")
@click.option("-m", "hosts", default="", metavar='"HOST|GROUP ..."',
              help='Hosts the job may run on, space separated: host names, host groups, '
              '"template:GLOB" (provisioned hosts of matching templates).')
@click.option("-x", "exclusive", is_flag=True,
              help="Exclusive: the job runs on hosts running no other job, and no other "
              "job starts on them while it runs.")
@click.option("--cwd", metavar="DIR", help="Working directory [default: the current one].")
@click.option("-u", "user", default="", metavar="USER",
              help="Submit as USER (admins only).")
@with_client
def submit(client: Client, command: tuple[str, ...], tasks: int, res: tuple[str, ...], queue: str,
           name: str, depend: str, end_orphan: bool, output: str, error: str, hold: bool,
           priority: int | None,
           run_limit: float | None, gpu: GpuRequest | None, hosts: str, exclusive: bool,
           cwd: str | None, user: str) -> None:
    """Submit COMMAND as a job, like bsub.

    The job runs in the current directory with the current environment (except
    XCE_TOKEN). Options end at the first word of COMMAND; put -- before a COMMAND
    that starts with a dash.
    """
    request = SubmitRequest(
        command=list(command), n=tasks, res=" ".join(r.strip() for r in res if r.strip()),
        queue=queue, name=name,
        cwd=os.path.abspath(cwd) if cwd else os.getcwd(),
        # The token is a credential: it must not be stored in the job record.
        env={key: value for key, value in os.environ.items() if key != "XCE_TOKEN"},
        output=output, error=error, hold=hold, user=user, run_limit=run_limit,
        priority=priority or 0,
        gpus=gpu.num if gpu is not None else 0,
        gpu_mode=gpu.mode if gpu is not None else "shared",
        gpu_exclusive=gpu is not None and gpu.exclusive, depend=depend,
        end_orphan=end_orphan, hosts=hosts.split(), exclusive=exclusive,
    )
    submitted = client.submit(request)
    click.echo(f"Job <{submitted.job}> is submitted to queue <{submitted.queue}>.")


def _nothing_found(selected: Sequence[str]) -> str:
    """LSF's message when no job matches (bjobs prints it on stderr, exit status 255)."""
    if not selected:
        return "No unfinished job found"
    if selected == ["pend"]:
        return "No pending job found"
    if selected == ["run"]:
        return "No running job found"
    if selected == ["finished"]:
        return "No DONE/EXIT job found"
    return "No job found"


@click.command("jobs")
@click.argument("job_ids", metavar="[JOBID]...", nargs=-1, type=JOB_REF)
@click.option("-u", "user", metavar="USER|all",
              help="Jobs of USER, or of all users [default: yours; all for an admin].")
@click.option("-p", "pending", is_flag=True, help="Pending jobs, each with its pending reason.")
@click.option("-r", "running", is_flag=True, help="Running jobs.")
@click.option("-d", "finished", is_flag=True, help="Recently finished jobs (DONE and EXIT).")
@click.option("-a", "every", is_flag=True, help="Jobs in every state.")
@click.option("-l", "long", is_flag=True, help="Long format: one block per job.")
@click.option("-w", "wide", is_flag=True, help="Wide format: job names in full.")
@click.option("-A", "arrays", is_flag=True,
              help="Job arrays: one line each, its elements counted by state.")
@JSON_OPTION
@with_client
def jobs(client: Client, job_ids: tuple[JobRef, ...], user: str | None, pending: bool,
         running: bool, finished: bool, every: bool, long: bool, wide: bool,
         arrays: bool, as_json: bool) -> None:
    """Show jobs, like bjobs: by default your unfinished (pending and running) jobs;
    -d recently finished ones, -a all. With JOBIDs, those jobs (-u is then ignored)."""
    selected = ["all"] if every else [
        state for state, chosen in zip(STATE_FILTERS, (running, pending, finished), strict=True)
        if chosen
    ]
    failed = False
    if arrays and not selected:
        selected, every = ["all"], True  # (an array's elements in every state count)
    if job_ids:
        named = [_for_job(ref, lambda r: lookup(client, r)) for ref in job_ids]
        found = [job for jobs in named if jobs is not None for job in jobs]
        failed = any(jobs is None for jobs in named)
        if selected and not every:
            wanted = {state for name in selected for state in STATE_FILTERS[name]}
            found = [job for job in found if job.state in wanted]
    else:
        states: list[str | None] = [*selected] or ["unfinished"]  # bjobs: unfinished jobs
        found = [job for state in states for job in client.jobs(user, state).jobs]
    context = click.get_current_context()
    if arrays and not as_json:
        rows = array_rows(found)
        if rows:
            _echo_lines(table(ARRAY_COLUMNS, rows, ARRAY_COLUMNS[3:]))
        elif not failed:
            click.echo("No job array found", err=True)
            context.exit(255)
    elif as_json:
        _echo_json(JobList(jobs=found))
    elif found and long:
        _echo_lines([line for i, job in enumerate(found)
                     for line in ([SEPARATOR] if i else []) + job_long(job)])
    elif found:
        _echo_lines(jobs_lines(found, wide=wide, reasons=pending))
    elif not failed:
        click.echo(_nothing_found(selected), err=True)
        context.exit(255)
    if failed:
        context.exit(1)


def _each_job(job_ids: Sequence[int | JobRef], act: Callable[[Any], object],
              done: str) -> None:
    """Act on each job in turn; report each; exit 1 at the end if any failed."""
    failed = False
    for job in job_ids:
        if _for_job(job, act) is None:
            failed = True
        else:
            shown = ref_text(job) if isinstance(job, tuple) else str(job)
            click.echo(f"Job <{shown}> {done}")
    if failed:
        click.get_current_context().exit(1)


@click.command()
@click.option("-l", "long", is_flag=True,
              help="Long format: resources, type, model, template, last heartbeat, jobs.")
@JSON_OPTION
@click.argument("names", nargs=-1, metavar="[HOST]...")
@with_client
def hosts(client: Client, long: bool, as_json: bool, names: tuple[str, ...]) -> None:
    """Show hosts and their slots, like bhosts (only the HOSTs named, when given)."""
    answer = client.hosts()
    if names:
        known = {host.name: host for host in answer.hosts}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ClientError(f"unknown host(s): {' '.join(unknown)}")
        answer = msgspec.structs.replace(
            answer, hosts=[known[name] for name in dict.fromkeys(names)]
        )
    if as_json:
        _echo_json(answer)
    elif long:
        _echo_lines([line for i, host in enumerate(answer.hosts)
                     for line in ([""] if i else []) + host_long(host)])
    else:
        _echo_lines(hosts_lines(answer.hosts))


@click.command()
@click.option("-l", "long", is_flag=True,
              help="Long format, as bqueues -l: each queue's limits, users and hosts.")
@JSON_OPTION
@with_client
def queues(client: Client, long: bool, as_json: bool) -> None:
    """Show queues and their jobs, like bqueues."""
    from xce.cli.queue_long import queues_long  # it builds on this module

    answer = client.queues()
    if as_json:
        _echo_json(answer)
    elif long:
        _echo_lines(queues_long(answer.queues))
    else:
        _echo_lines(queues_lines(answer.queues))


@click.command()
@click.option("-l", "long", is_flag=True,
              help="Also the runtime catalog: allowance and hosts in flight per template, "
              "headroom and tokens per countable resource.")
@JSON_OPTION
@with_client
def demand(client: Client, long: bool, as_json: bool) -> None:
    """Show the supply the last scheduling session found missing."""
    from xce.cli.supply_cmds import catalog_lines  # it builds on this module

    answer = client.demand()
    # The catalog gives the templates' prices, for the cost of hosts to request.
    catalog = client.catalog() if long or session_demand(answer).hosts else None
    prices = template_prices(catalog.templates) if catalog is not None else {}
    if as_json:
        shown: object = answer
        cost = demand_cost(answer, prices)
        if cost is not None:
            shown = {**msgspec.to_builtins(answer),
                     "cost": {"hosts": cost[0], "total": cost[1]}}
        click.echo(msgspec.json.encode(
            shown if not long else {"demand": shown, "catalog": catalog}).decode())
    else:
        _echo_lines(demand_lines(answer, prices)
                    + ([] if not long or catalog is None else catalog_lines(catalog)))


@click.command()
@JSON_OPTION
@with_client
def idle(client: Client, as_json: bool) -> None:
    """Show the provisioned supply the last scheduling session found idle."""
    answer = client.idle()
    if as_json:
        _echo_json(answer)
    else:
        _echo_lines(idle_lines(answer))


@click.group()
def host() -> None:
    """Close, open, decommission, remove or expect hosts (admins), like badmin
    hclose/hopen."""


@host.command("close")
@click.argument("name", metavar="HOST")
@click.option("--reason", type=click.Choice(["admin", "idle", "lifetime", "reclaim"]),
              default="admin", show_default=True,
              help="Why (STATUS closed_Adm, closed_Idle, closed_Life, closed_Recl).")
@with_client
def close_host(client: Client, name: str, reason: str) -> None:
    """Close (drain) HOST: running jobs go on, no new job starts there."""
    closed = client.close_host(name, reason)
    click.echo(f"Host <{closed.name}> closed.")


@host.command("open")
@click.argument("name", metavar="HOST")
@with_client
def open_host(client: Client, name: str) -> None:
    """Open HOST again to new jobs."""
    opened = client.open_host(name)
    click.echo(f"Host <{opened.name}> opened.")


@host.command("decommission")
@click.argument("name", metavar="HOST")
@with_client
def decommission_host(client: Client, name: str) -> None:
    """Give back a drained (closed) HOST that came from a template: refused while jobs
    run there."""
    done = client.decommission_host(name)
    click.echo(f"Host <{done.name}> decommissioned.")


@host.command("remove")
@click.argument("name", metavar="HOST")
@with_client
def remove_host(client: Client, name: str) -> None:
    """Remove a decommissioned HOST (its provider released it), clear a failed
    expected host, or cancel an expected one."""
    client.remove_host(name)
    click.echo(f"Host <{name}> removed.")


@host.command("expect")
@click.argument("template")
@click.option("--provider", default="", help="Default: the template's provider.")
@click.option("--request", default="", help="The provider's request id.")
@click.option("--deadline", type=float, default=600.0, show_default=True,
              help="Seconds the host has to join.")
@with_client
def expect_host(client: Client, template: str, provider: str, request: str,
                deadline: float) -> None:
    """Add an expected host of TEMPLATE (admins; the provisioner does this itself):
    prints its name and the single-use join token its agent must present."""
    made = client.expect_host(ExpectRequest(template, provider, request, deadline))
    click.echo(f"Host <{made.name}> expected until {long_time(made.deadline)}; "
               f"join token: {made.join_token}")


CLIENT_COMMANDS: list[click.Command] = [
    submit, jobs, hosts, queues, demand, idle, host,  # (kill, stop, ...: control_cmds.py)
]
