"""Changing jobs after submission: `xce modify` (LSF's bmod), `xce top` / `xce bottom`
(btop / bbot) and `xce switch` (bswitch); docs/cli.md."""

from __future__ import annotations

import click
import msgspec

from xce.cli.client import Client, with_client
from xce.cli.client_cmds import _each_job, _for_job
from xce.cli.gpu_option import gpu_option
from xce.cli.job_refs import JOB_REF, JobRef, ref_text, target
from xce.cli.runlimit import run_limit_option
from xce.model.api import ModifyRequest
from xce.model.jobs import MAX_USER_PRIORITY
from xce.resreq import GpuRequest


def _either(given: object, removed: bool, option: str) -> None:
    if given is not None and removed:
        raise click.UsageError(f"{option} and {option}n cannot be given together")


@click.command()
@click.argument("job", metavar="JOBID", type=JOB_REF)
@click.option("-n", "tasks", type=click.IntRange(min=1), help="Number of tasks (slots).")
@click.option("-R", "res", metavar="REQ", help="Resource requirement string.")
@click.option("-Rn", "no_res", is_flag=True, help="Remove the resource requirement.")
@click.option("-W", "run_limit", metavar="[hh:]mm", callback=run_limit_option,
              help="Run limit (also of a running job).")
@click.option("-Wn", "no_run_limit", is_flag=True,
              help="Remove the job's run limit (its queue's then applies).")
@click.option("-q", "queue", metavar="QUEUE", help="Queue (as xce switch).")
@click.option("-sp", "priority", type=click.IntRange(1, MAX_USER_PRIORITY),
              help=f"User priority, 1 to {MAX_USER_PRIORITY} (higher first in its queue).")
@click.option("-w", "depend", metavar="EXPR", help="Dependency condition.")
@click.option("-wn", "no_depend", is_flag=True, help="Remove the dependency condition.")
@click.option("-gpu", "gpu", metavar="REQ", callback=gpu_option,
              help='GPUs on each host, as submit -gpu: "num=N[:mode=...][:j_exclusive=...]".')
@click.option("-gpun", "no_gpu", is_flag=True, help="Remove the GPU request.")
@with_client
def modify(client: Client, job: JobRef, tasks: int | None, res: str | None, no_res: bool,
           run_limit: float | None, no_run_limit: bool, queue: str | None,
           priority: int | None, depend: str | None, no_depend: bool,
           gpu: GpuRequest | None, no_gpu: bool) -> None:
    """Change a pending job, like bmod; of a running job only -W / -Wn. A job array's id
    changes every pending element; ID[INDEX] one element."""
    for given, removed, option in ((res, no_res, "-R"), (run_limit, no_run_limit, "-W"),
                                   (depend, no_depend, "-w"), (gpu, no_gpu, "-gpu")):
        _either(given, removed, option)
    request = ModifyRequest(
        n=tasks, res="" if no_res else res, queue=queue, priority=priority,
        depend="" if no_depend else depend,
        gpus=0 if no_gpu else gpu.num if gpu is not None else None,
        gpu_mode="shared" if no_gpu else gpu.mode if gpu is not None else None,
        gpu_exclusive=False if no_gpu else gpu.exclusive if gpu is not None else None,
    )
    if run_limit is not None or no_run_limit:
        request = msgspec.structs.replace(request, run_limit=run_limit)
    if request == ModifyRequest():
        raise click.UsageError("nothing to change: give at least one option")
    done = _for_job(job, lambda ref: client.modify(target(client, ref), request))
    if done is None:
        click.get_current_context().exit(1)
    click.echo(f"Parameters of job <{ref_text(job)}> are being changed")


@click.command()
@click.argument("job_ids", metavar="JOBID...", nargs=-1, type=JOB_REF, required=True)
@with_client
def top(client: Client, job_ids: tuple[JobRef, ...]) -> None:
    """Move pending jobs first among their queue's of their priority, like btop (your
    own jobs; an admin's among everyone's)."""
    _each_job(job_ids, lambda ref: client.move(target(client, ref), True),
              "has been moved to the top")


@click.command()
@click.argument("job_ids", metavar="JOBID...", nargs=-1, type=JOB_REF, required=True)
@with_client
def bottom(client: Client, job_ids: tuple[JobRef, ...]) -> None:
    """Move pending jobs last among their queue's of their priority, like bbot."""
    _each_job(job_ids, lambda ref: client.move(target(client, ref), False),
              "has been moved to the bottom")


@click.command()
@click.argument("queue", metavar="QUEUE")
@click.argument("job_ids", metavar="JOBID...", nargs=-1, type=JOB_REF, required=True)
@with_client
def switch(client: Client, queue: str, job_ids: tuple[JobRef, ...]) -> None:
    """Move pending jobs to QUEUE, like bswitch (a running job is refused)."""
    _each_job(job_ids, lambda ref: client.switch(target(client, ref), queue),
              f"is switched to queue <{queue}>")
