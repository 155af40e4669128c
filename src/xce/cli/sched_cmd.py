"""`xce sched ...`: run the scheduler core on a scenario file."""

from __future__ import annotations

import math
import time
from importlib import resources
from pathlib import Path

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xce.config import ConfigError
from xce.model.job_ids import id_ranges
from xce.model.result import SessionResult
from xce.scenario import load_scenario
from xce.sched import run_session
from xce.sched.reasons import clock

EXAMPLE = "session.yaml"
# The bundled scenarios `--example NAME` runs (NAME.yaml in the package's examples).
EXAMPLES = ("session", "plan", "fairshare", "preempt")


def example_path(name: str = "session") -> Path:
    """A bundled example scenario (`session`: the embedded default)."""
    return Path(str(resources.files("xce") / "examples" / f"{name}.yaml"))


@click.group()
def sched() -> None:
    """Run the scheduler core offline."""


@sched.command()
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the session result as JSON.")
@click.option("--why", "why", type=int, multiple=True, help="Show the decision trace of a job.")
@click.option(
    "--example", type=click.Choice(EXAMPLES), default=None,
    help="Run a bundled scenario instead: session (the default) or plan (a reservation "
    "and a backfilled job).",
)
def session(
    scenario: str | None, as_json: bool, why: tuple[int, ...], example: str | None
) -> None:
    """Run one scheduling session on SCENARIO (default: the bundled example)."""
    if scenario and example:
        raise click.UsageError("give a SCENARIO file or --example, not both")
    path = Path(scenario) if scenario else example_path(example or "session")
    try:
        loaded = load_scenario(path)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err
    state = loaded.state()
    result = run_session(state, loaded.now, time.perf_counter)
    if as_json:
        click.echo(msgspec.json.encode(result.to_json_obj()).decode())
        return
    show(result, path, Console())
    for job in why:
        show_why(result, job, Console())


def show(result: SessionResult, path: Path, console: Console) -> None:
    """The session result as tables for humans."""
    stats = result.stats
    console.print(
        f"[bold]Session at t={result.now:g}[/bold] on {path.name}: "
        f"{len(result.dispatch)} dispatched, {stats.pending} pending "
        f"(real pass {stats.real_pass_ms:.1f} ms, catalog pass {stats.catalog_pass_ms:.1f} ms)"
    )
    if result.dispatch:
        backfilled = set(result.backfilled)
        table = Table(title="Dispatch", title_justify="left")
        table.add_column("JOBID", justify="right")
        table.add_column("EXEC_HOST")
        table.add_column("")
        for d in result.dispatch:
            table.add_row(
                str(d.job), " ".join(f"{n}*{h}" for h, n in d.hosts.items()),
                "backfilled" if d.job in backfilled else "",
            )
        console.print(table)
    if result.reservations:
        table = Table(title="Reservations", title_justify="left")
        for column in ("JOBID", "START", "END", "HOSTS"):
            table.add_column(column)
        for r in result.reservations:
            table.add_row(
                str(r.job), clock(r.start), "never" if r.end == math.inf else clock(r.end),
                " ".join(f"{n}*{h}" for h, n in r.hosts.items()),
            )
        console.print(table)
    if result.pending:
        table = Table(title="Pending", title_justify="left")
        table.add_column("JOBS")
        table.add_column("COUNT", justify="right")
        table.add_column("PEND REASON")
        for group in sorted(result.pending, key=lambda g: g.members[0].key):
            jobs = group.jobs
            table.add_row(id_ranges(jobs), str(len(jobs)), escape(group.reason))
        console.print(table)
    demand = result.demand
    if demand.hosts or demand.resources:
        table = Table(title="Demand", title_justify="left")
        for column in ("SUPPLY", "NEW", "IN FLIGHT USED", "JOBS"):
            table.add_column(column)
        for h in demand.hosts:
            table.add_row(
                f"template {h.template}", str(h.count), str(h.in_flight_used), id_ranges(h.jobs)
            )
        for wanted in demand.resources:
            table.add_row(
                wanted.resource, f"{wanted.amount:g}", f"{wanted.in_flight_used:g}",
                id_ranges(wanted.jobs),
            )
        console.print(table)
    idle = result.idle
    if idle.hosts or idle.resources:
        table = Table(title="Idle supply", title_justify="left")
        table.add_column("SUPPLY")
        table.add_column("IDLE")
        for ih in idle.hosts:
            table.add_row(f"{ih.host} ({ih.template})", f"{ih.idle_for:g} s")
        for ir in idle.resources:
            table.add_row(ir.resource, f"{ir.amount:g} tokens")
        console.print(table)


def show_why(result: SessionResult, job: int, console: Console) -> None:
    """A job's pend reason and every failing check recorded for it."""
    reason = result.reason_of(job)
    if reason is None:
        console.print(f"Job {job}: not pending in this session")
        return
    console.print(escape(f"Job {job}: {reason}"))
    for entry in result.trace_of(job):
        console.print(
            escape(f"  [{entry.stage}] {entry.check}: {entry.detail} (evaluated job {entry.job})")
        )
