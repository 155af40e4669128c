"""The commands that change jobs, in LSF's words: `kill` (bkill), `stop` (bstop),
`resume` (bresume) and `requeue` (brequeue).

Job id 0 names every unfinished job of yours (LSF's `bkill 0`); with `-u USER` (or
`-u all`, admins) someone else's, with `-q QUEUE` only those of a queue. The controller
selects and changes them in one request (`POST /jobs/kill|stop|resume`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from xce.cli.client import Client, with_client
from xce.cli.client_cmds import _each_job
from xce.cli.job_refs import JOB_REF, JobRef, target

EVERY_JOB: JobRef = (0, None)  # job id 0: every unfinished job of the selection

_USER = click.option("-u", "user", default="", metavar="USER|all",
                     help="With job id 0: the jobs of USER, or of all users (admins) "
                     "[default: yours].")
_QUEUE = click.option("-q", "queue", default="", metavar="QUEUE",
                      help="With job id 0: only the jobs of QUEUE.")


def _act(client: Client, job_ids: tuple[JobRef, ...], user: str, queue: str, action: str,
         one: Callable[[int], Any], done: str) -> None:
    """`action` on each job of `job_ids`, or (job id 0) on every unfinished job of the
    selection, in one request; each job acted on is named with `done`."""
    if EVERY_JOB not in job_ids:
        if user or queue:
            raise click.UsageError(f"-u and -q select jobs with job id 0, e.g. "
                                   f"xce {action} -u alice -q short 0")
        _each_job(job_ids, lambda ref: one(target(client, ref)), done)
        return
    if len(job_ids) > 1:
        raise click.UsageError("job id 0 (every unfinished job) goes alone")
    changed = client.act_on_jobs(action, user, queue).jobs
    for job in changed:
        click.echo(f"Job <{job}> {done}")
    if not changed:
        click.echo("No unfinished job found to change", err=True)
        click.get_current_context().exit(255)


@click.command()
@click.argument("job_ids", metavar="JOBID...|0", nargs=-1, type=JOB_REF, required=True)
@_USER
@_QUEUE
@with_client
def kill(client: Client, job_ids: tuple[JobRef, ...], user: str, queue: str) -> None:
    """Kill jobs, like bkill: a pending job ends at once, a running (or stopped) one is
    signalled. A job array's id kills every element; ID[INDEX] one element; 0 every
    unfinished job of yours (-u USER|all, -q QUEUE: of whom, in which queue)."""
    _act(client, job_ids, user, queue, "kill", client.kill, "is being terminated")


@click.command()
@click.argument("job_ids", metavar="JOBID...|0", nargs=-1, type=JOB_REF, required=True)
@_USER
@_QUEUE
@with_client
def stop(client: Client, job_ids: tuple[JobRef, ...], user: str, queue: str) -> None:
    """Stop jobs, like bstop: a running job is stopped (SIGSTOP, USUSP; it keeps its
    slots), a pending one held (PSUSP). 0: every unfinished job of yours (-u, -q)."""
    _act(client, job_ids, user, queue, "stop", client.stop, "is being stopped")


@click.command()
@click.argument("job_ids", metavar="JOBID...|0", nargs=-1, type=JOB_REF, required=True)
@_USER
@_QUEUE
@with_client
def resume(client: Client, job_ids: tuple[JobRef, ...], user: str, queue: str) -> None:
    """Resume jobs, like bresume: a stopped job continues (SIGCONT, RUN), a held one
    pends again (PEND; also for `submit -H`). 0: every job of yours (-u, -q)."""
    _act(client, job_ids, user, queue, "resume", client.resume, "is being resumed")


@click.command()
@click.argument("job_ids", metavar="JOBID...", nargs=-1, type=JOB_REF, required=True)
@with_client
def requeue(client: Client, job_ids: tuple[JobRef, ...]) -> None:
    """Requeue running (or stopped) jobs, like brequeue: each is killed where it runs
    and pends again with the same job id, priority and submit time."""
    _each_job(job_ids, lambda ref: client.requeue(target(client, ref)), "is being requeued")


CONTROL_COMMANDS: list[click.Command] = [kill, stop, resume, requeue]
