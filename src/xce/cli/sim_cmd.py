"""`xce sim ...`: run the simulator, replay recordings, explore in a REPL."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click
import msgspec

from xce.config import ConfigError, load_config
from xce.model.cluster import ClusterConfig
from xce.model.recording import Recorder, RecordingError
from xce.sim.compare import Run
from xce.sim.replay import replay as replay_recording
from xce.sim.single_run import new_simulator, read_workload, requirement_problem, simulate
from xce.sim.sizing import sized_cluster
from xce.sim.workload import Workload, WorkloadError

from .sim_compare import compare, read_run, show_comparison
from .sim_sweep import sweep

if TYPE_CHECKING:
    from xce.sim.provider_kinds import ProviderKinds


@click.group()
def sim() -> None:
    """The simulator: the same scheduler on workload traces."""


sim.add_command(compare)
sim.add_command(sweep)


def _workload(path: str, start: float | None, end: float | None, first: int | None,
              load: float) -> Workload:
    try:
        return read_workload(path, start, end, first, load)
    except (WorkloadError, ConfigError) as err:
        raise click.ClickException(str(err)) from err


def _cluster(cluster: str | None, workload: Workload, elastic: float | None) -> ClusterConfig:
    if cluster is None:
        return sized_cluster(workload, elastic=elastic or 0.0)
    if elastic is not None:
        raise click.UsageError("--elastic sizes a cluster from the trace: give no CLUSTER")
    try:
        return load_config(cluster)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err


class OptionError(click.UsageError):
    """A bad option value: shown on one line, `Error: --option: message` (status 2)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True, file=file)


def _finite_load(ctx: click.Context, param: click.Parameter, value: float) -> float:
    del ctx, param
    if not math.isfinite(value):  # (FloatRange lets nan through)
        raise click.BadParameter(f"load must be a finite number > 0, got {value!r}")
    return value


def _reserve_depth(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    del ctx, param
    if value is None:
        return None
    try:
        depth = int(value)
    except ValueError:
        depth = -1
    if depth < 0:
        raise OptionError(f"--reserve-depth: expected a whole number >= 0, got {value!r}")
    return depth


def _plan_options(config: ClusterConfig, reserve_depth: int | None, backfill: bool,
                  enforce_limits: bool | None) -> ClusterConfig:
    """The cluster with the plan options of the command line applied (ARCHITECTURE.md
    2a): `--reserve-depth`, `--backfill` (on every queue), `--[no-]enforce-limits`."""
    changes: dict[str, Any] = {}
    if reserve_depth is not None:
        changes["reserve_depth"] = reserve_depth
    if backfill:
        changes["queues"] = tuple(
            msgspec.structs.replace(queue, backfill=True) for queue in config.queues
        )
    if enforce_limits is not None:
        changes["simulation"] = msgspec.structs.replace(
            config.simulation, enforce_run_limits=enforce_limits
        )
    return msgspec.structs.replace(config, **changes) if changes else config


def _provider_kinds(cluster: str | None, config: ClusterConfig,
                    providers: str | None) -> ProviderKinds | None:
    """The models of the real providers of `--providers` (read offline), if given."""
    if providers is None:
        return None
    if cluster is None:
        raise click.UsageError("--providers needs a CLUSTER file: its templates and "
                               "countables name the providers")
    from xce.sim.provider_kinds import load_provider_kinds

    try:
        return load_provider_kinds(cluster, config, providers)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err


def _check_requirements(config: ClusterConfig, workload: Workload, path: str) -> None:
    """Every requirement string of the workload names resources the cluster has,
    before anything runs (`requirement_problem`)."""
    problem = requirement_problem(config, workload, path)
    if problem is not None:
        raise click.ClickException(problem)


providers_option = click.option(
    "--providers", "providers_path", type=click.Path(exists=True, dir_okay=False),
    help="A providers file (hostProviders.json shape): simulate its providers as their "
         "settings describe them (read offline; see docs/simulator.md).")


def workload_options(f: click.decorators.FC) -> click.decorators.FC:
    for option in reversed([
        click.option("--workload", "workload_path", required=True,
                     type=click.Path(exists=True, dir_okay=False),
                     help="SWF trace (.swf, .swf.gz), YAML jobs file, or a recording "
                          "(.jsonl, .jsonl.gz: its submissions)."),
        click.option("--start", type=float, help="Only jobs submitted from this time (s)."),
        click.option("--end", type=float, help="Only jobs submitted before this time (s)."),
        click.option("--first", type=click.IntRange(min=0), help="Only the first N jobs."),
        click.option("--load", type=click.FloatRange(min=0, min_open=True, max=1e6),
                     default=1.0, show_default=True, callback=_finite_load,
                     help="Load factor: arrivals this many times faster."),
        click.option("--elastic", type=click.FloatRange(0, 1),
                     help="Size the cluster from the trace with this fraction of hosts "
                          "as a cloud template (no CLUSTER file)."),
        click.option("--seed", type=int, help="Seed of the provider models."),
        click.option("--reserve-depth", metavar="N", callback=_reserve_depth,
                     help="Give up to N blocked jobs a reservation per session (the "
                          "cluster's reserve_depth)."),
        click.option("--backfill", is_flag=True,
                     help="Let every queue's jobs fill holes before reservations "
                          "(backfill: true on every queue)."),
        click.option("--enforce-limits/--no-enforce-limits", default=None,
                     help="End a job at its run limit (default: simulation."
                          "enforce_run_limits, true) or replay recorded run times."),
    ]):
        f = option(f)
    return f


@sim.command()
@click.argument("cluster", required=False, type=click.Path(exists=True, dir_okay=False))
@workload_options
@providers_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--record", type=click.Path(dir_okay=False), help="Write a recording.")
@click.option("--report", type=click.Path(file_okay=False), help="Write a report directory.")
@click.option("--baseline", type=click.Path(exists=True),
              help="Then compare with this run (a summary JSON or a report directory).")
def run(cluster: str | None, workload_path: str, start: float | None, end: float | None,
        first: int | None, load: float, elastic: float | None, seed: int | None,
        reserve_depth: int | None, backfill: bool, enforce_limits: bool | None,
        providers_path: str | None, as_json: bool, record: str | None,
        report: str | None, baseline: str | None) -> None:
    """Simulate WORKLOAD on CLUSTER (default: a cluster sized from the trace)."""
    if baseline and as_json:
        raise click.UsageError("--baseline prints a table: not with --json "
                               "(compare the JSON with `xce sim compare`)")
    base = read_run(baseline) if baseline else None
    workload = _workload(workload_path, start, end, first, load)
    config = _plan_options(_cluster(cluster, workload, elastic), reserve_depth, backfill,
                           enforce_limits)
    kinds = _provider_kinds(cluster, config, providers_path)
    _check_requirements(config, workload, workload_path)
    recorder = Recorder(record) if record else None
    total = workload.jobs[-1].submit if workload.jobs else 0.0
    shown = [time.monotonic()]

    def progress(now: float) -> None:
        if as_json or not sys.stderr.isatty() or time.monotonic() - shown[0] < 0.5:
            return
        shown[0] = time.monotonic()
        done = min(1.0, now / total) if total else 1.0
        bar = "#" * int(done * 30)
        click.echo(f"\r[{bar:<30}] {done:4.0%} t={now:,.0f}s", err=True, nl=False)

    simulator = simulate(config, workload, seed=seed, kinds=kinds, recorder=recorder,
                         progress=progress, series=report is not None)
    if not as_json and sys.stderr.isatty():
        click.echo("", err=True)
    summary = simulator.summary()
    rows = kinds.rows() if kinds is not None else {}
    if report:
        from xce.sim.report import write_report

        write_report(Path(report), simulator, {**summary, **rows})
    if as_json:
        if kinds is not None:
            summary["provider_models"] = kinds.shown()
        click.echo(msgspec.json.encode(summary).decode())
    else:
        _show_summary({**summary, **rows})
    if base is not None:
        show_comparison([base, Run("this run", summary)])


def _show_summary(summary: dict[str, object]) -> None:
    from rich.console import Console
    from rich.table import Table

    from xce.sim.summary_text import format_value

    table = Table(title="Simulation summary", title_justify="left")
    table.add_column("METRIC")
    table.add_column("VALUE", justify="right")
    for key, value in summary.items():
        table.add_row(key, format_value(value, key))
    Console().print(table)


@sim.command()
@click.argument("recording", type=click.Path(exists=True, dir_okay=False))
def replay(recording: str) -> None:
    """Replay RECORDING through the scheduler and check every session's outputs."""
    try:
        report = replay_recording(recording)
    except RecordingError as err:
        raise click.ClickException(str(err)) from err
    if report.divergence is not None:
        click.echo(f"DIVERGENCE: {report.divergence}")
        sys.exit(1)
    click.echo(
        f"replayed {report.sessions} sessions and {report.events} events: no divergence"
    )


@sim.command()
@click.argument("cluster", required=False, type=click.Path(exists=True, dir_okay=False))
@workload_options
@providers_option
def repl(cluster: str | None, workload_path: str, start: float | None, end: float | None,
         first: int | None, load: float, elastic: float | None, seed: int | None,
         reserve_depth: int | None, backfill: bool, enforce_limits: bool | None,
         providers_path: str | None) -> None:
    """Explore a simulation of WORKLOAD on CLUSTER at a prompt (commands from stdin
    when it is not a terminal; see docs/simulator.md)."""
    from xce.sim.repl import run_repl

    workload = _workload(workload_path, start, end, first, load)
    config = _plan_options(_cluster(cluster, workload, elastic), reserve_depth, backfill,
                           enforce_limits)
    kinds = _provider_kinds(cluster, config, providers_path)
    _check_requirements(config, workload, workload_path)
    status = run_repl(new_simulator(config, workload, kinds, seed))
    if status:
        sys.exit(status)


@sim.command("cluster")
@workload_options
def cluster_cmd(workload_path: str, start: float | None, end: float | None, first: int | None,
                load: float, elastic: float | None, seed: int | None,
                reserve_depth: int | None, backfill: bool,
                enforce_limits: bool | None) -> None:
    """Print a cluster file sized from WORKLOAD's header (to edit and reuse)."""
    import yaml

    workload = _workload(workload_path, start, end, first, load)
    config = _plan_options(sized_cluster(workload, elastic=elastic or 0.0), reserve_depth,
                           backfill, enforce_limits)
    del seed
    click.echo(yaml.safe_dump(_cluster_yaml(config), sort_keys=False))


def _cluster_yaml(config: ClusterConfig) -> dict[str, object]:
    hosts = config.hosts
    out: dict[str, object] = {
        "cluster": config.cluster,
        "session_interval": config.session_interval,
    }
    if hosts:
        width = len(hosts[-1].name) - 1
        out["hosts"] = [{"name": f"n[{1:0{width}d}-{len(hosts):0{width}d}]",
                         "slots": hosts[0].slots}]
    if config.reserve_depth:
        out["reserve_depth"] = config.reserve_depth
    out["queues"] = [
        {"name": q.name, "priority": q.priority, **({"backfill": True} if q.backfill else {})}
        for q in config.queues
    ]
    if config.catalog.templates:
        out["catalog"] = {
            "idle_time": config.catalog.idle_time,
            "templates": [
                {"name": t.name, "provider": t.provider, "slots": t.slots, "max": t.max}
                for t in config.catalog.templates
            ],
        }
        out["simulation"] = {
            "providers": {
                name: {"lead_time": model.lead_time.mean}
                for name, model in config.simulation.providers.items()
            }
        }
    if not config.simulation.enforce_run_limits:
        simulation = out.setdefault("simulation", {})
        assert isinstance(simulation, dict)
        simulation["enforce_run_limits"] = False
    return out
