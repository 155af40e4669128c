"""`xce sim compare RUN... [--report DIR]` and the comparison `xce sim run
--baseline RUN` prints: the summaries side by side with their differences
(xce.sim.compare)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from xce.sim.compare import CompareError, Run, comparison, load_run, unique_labels


def read_run(path: str) -> Run:
    """A run named on the command line (a summary JSON file or a report directory)."""
    try:
        return load_run(Path(path))
    except CompareError as err:
        raise click.ClickException(str(err)) from err


def show_comparison(runs: Sequence[Run]) -> None:
    """The comparison as a table on stdout."""
    from rich.console import Console
    from rich.table import Table

    header, rows = comparison(runs)
    table = Table(title=f"Compared with {runs[0].label}", title_justify="left")
    for position, name in enumerate(header):
        table.add_column(name, justify="left" if not position else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=max(100, 24 * len(header))).print(table)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--report", type=click.Path(file_okay=False),
              help="Write overlaid charts and an HTML page of the runs into DIR.")
def compare(runs: tuple[str, ...], report: str | None) -> None:
    """Show the summaries of RUNS side by side with each one's difference from the
    first. A RUN is a summary (`xce sim run --json > a.json`) or a report directory
    (`xce sim run --report DIR`), whose binned series the overlays need."""
    if len(runs) < 2:
        raise click.UsageError("give at least two runs to compare")
    loaded = unique_labels([read_run(path) for path in runs])
    show_comparison(loaded)
    if report:
        from xce.sim.compare import write_comparison

        drawn = write_comparison(Path(report), loaded)
        click.echo(f"wrote {Path(report) / 'index.html'} ({', '.join(drawn) or 'no charts'})")
