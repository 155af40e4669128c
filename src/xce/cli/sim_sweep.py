"""`xce sim sweep SWEEP.yaml --out DIR`: run a grid of simulations (docs/sweeps.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import msgspec

from xce.config import ConfigError
from xce.sim.single_run import read_workload, requirement_problem
from xce.sim.sweep_cells import CellOutcome
from xce.sim.sweep_engines import local_cores, run_local
from xce.sim.sweep_grid import Cell, cells
from xce.sim.sweep_spec import Sweep, load_sweep
from xce.sim.sweep_store import SweepBusy, SweepDir
from xce.sim.workload import Workload, WorkloadError


class SweepInputError(click.ClickException):
    """A sweep file, base cluster or workload that is wrong: nothing ran (status 2)."""

    exit_code = 2


@click.command()
@click.argument("sweep_file", metavar="SWEEP.yaml",
                type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="The results directory (created; a re-run resumes it).")
@click.option("--jobs", "-j", type=click.IntRange(min=1),
              help="Cells run at once (default: the local cores; with Ray and an "
                   "--address, the cluster decides).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local",
              show_default=True, help="A pool of local processes, or Ray tasks.")
@click.option("--address", help="With --engine ray: the Ray cluster's address "
                                "(default: start a local Ray).")
@click.option("--record", is_flag=True, help="Write each cell's recording too.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False),
              help="Then write a report of the cells done into this directory.")
@click.option("--objective", default="wait_mean", show_default=True,
              help="With --report: the summary figure configurations are ranked by, "
                   "lowest first (wait_p95, bsld_mean, cost_total, ...).")
def sweep(sweep_file: str, out: str, jobs: int | None, engine: str, address: str | None,
          record: bool, report_dir: str | None, objective: str) -> None:
    """Simulate every cell of SWEEP.yaml (workloads x axes x seeds) into DIR:
    `results.csv` and `cells/<n>.json`. Cells done by an earlier run are skipped."""
    if address is not None and engine != "ray":
        raise click.UsageError("--address is for --engine ray")
    spec, grid, workloads = _inputs(sweep_file)
    store = SweepDir(Path(out))
    try:
        with store.locked():
            failed = _run(spec, grid, workloads, store, jobs, engine, address, record)
    except SweepBusy as err:
        raise click.ClickException(str(err)) from None
    if report_dir is not None:
        _report(Path(report_dir), store, spec, grid, objective)
    if failed:
        raise SystemExit(1)


def _run(spec: Sweep, grid: list[Cell], workloads: dict[str, Workload], store: SweepDir,
         jobs: int | None, engine: str, address: str | None, record: bool) -> list[int]:
    """Run the cells not done, write the table, say what happened; the failed cells."""
    todo = store.prepare(spec, grid, record)
    records = ({cell.n: str(store.record_path(cell.n).resolve()) for cell in todo}
               if record else {})
    failed: list[int] = []
    workers = jobs or local_cores()
    with CellProgress(len(todo)) as advance:
        def keep(outcome: CellOutcome) -> None:
            store.save(outcome)
            if outcome.error is not None:
                failed.append(outcome.n)
            advance(len(failed))

        if todo and engine == "ray":
            _run_ray(todo, workloads, records, workers, address, keep)
        elif todo:
            run_local(todo, workloads, records, min(workers, len(todo)), keep)
    table = store.write_table(spec, grid)
    click.echo(f"{len(grid)} cells: {len(todo) - len(failed)} run, "
               f"{len(grid) - len(todo)} already done, {len(failed)} failed; {table}")
    for n in sorted(failed):
        error = store.error(n) or ""
        click.echo(f"cell {n} failed: {error.strip().splitlines()[-1] if error else '?'} "
                   f"(all of it in {store.error_path(n)})", err=True)
    return failed


def _inputs(sweep_file: str) -> tuple[Sweep, list[Cell], dict[str, Workload]]:
    """The sweep, its checked cells and its workloads: any problem is one error
    before any cell runs."""
    try:
        spec = load_sweep(sweep_file)
        grid = cells(spec)
    except ConfigError as err:
        raise SweepInputError(str(err)) from None
    workloads: dict[str, Workload] = {}
    window = spec.window
    for entry in spec.workloads:
        try:
            workloads[entry.name] = read_workload(entry.path, window.start, window.end,
                                                  window.first, window.load)
        except (WorkloadError, ConfigError) as err:
            raise SweepInputError(f"{spec.file}:{entry.line}: workloads: {err}") from None
    checked: set[tuple[str, bytes]] = set()
    for cell in grid:
        resources = (cell.workload, msgspec.json.encode(cell.config.resources))
        if resources not in checked:
            checked.add(resources)
            problem = requirement_problem(cell.config, workloads[cell.workload],
                                          cell.workload)
            if problem is not None:
                raise SweepInputError(f"{spec.file}: cell {cell.n}: {problem}")
    return spec, grid, workloads


def _report(directory: Path, store: SweepDir, spec: Sweep, grid: list[Cell],
            objective: str) -> None:
    from xce.sim.sweep_analysis import ObjectiveError
    from xce.sim.sweep_report import write_sweep_report

    summaries = {cell.n: found for cell in grid if (found := store.summary(cell.n))}
    try:
        page = write_sweep_report(directory, spec, grid, summaries, objective)
    except ObjectiveError as err:
        raise SweepInputError(str(err)) from None
    click.echo(f"wrote {page}")


def _run_ray(cells: Sequence[Cell], workloads: dict[str, Workload], records: dict[int, str],
             jobs: int, address: str | None, report: Callable[[CellOutcome], None]) -> None:
    from xce.sim.sweep_ray import RayMissing, run_ray

    try:
        run_ray(cells, workloads, records, jobs, address, report)
    except RayMissing as err:
        raise SweepInputError(str(err)) from None


class CellProgress:
    """A rich progress bar of the cells run, on a terminal (nothing elsewhere); drawn
    as each cell ends, by no thread of its own (the local pool forks its workers)."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=console, disable=not console.is_terminal,
                            auto_refresh=False)
        self.task = self.bar.add_task("cells", total=total)

    def __enter__(self) -> Callable[[int], None]:
        self.bar.start()
        return self.advance

    def advance(self, failed: int) -> None:
        self.bar.update(self.task, advance=1,
                        description=f"cells ({failed} failed)" if failed else "cells")
        self.bar.refresh()

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()
