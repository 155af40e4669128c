"""A sweep's report (`xce sim sweep ... --report DIR`): `index.html` with per workload
the configurations ranked by the objective and the Pareto front of mean wait against
cost (`pareto-<i>.png`), each axis's effect on the objective and on the cost
(`axis-<k>.png`), and `ranked.csv`, the ranked table (xce.sim.sweep_analysis).
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xce.atomic_json import write_bytes_atomic
from xce.sim.report_html import figures, page, table
from xce.sim.report_text import human_value
from xce.sim.sweep_analysis import (
    WAIT,
    Configuration,
    axis_effect,
    configurations,
    cost_measure,
    ranked,
)
from xce.sim.sweep_grid import Cell
from xce.sim.sweep_spec import Sweep
from xce.sim.sweep_store import show


def write_sweep_report(directory: Path, sweep: Sweep, grid: Sequence[Cell],
                       summaries: Mapping[int, Mapping[str, Any]], objective: str) -> Path:
    """Write the report of the cells that have a summary; the page's path
    (ObjectiveError when the objective is no figure of the summaries)."""
    from xce.sim import sweep_charts as charts  # (matplotlib: only when drawing)

    configs = configurations(grid, summaries, objective)
    measure = cost_measure(list(summaries.values()))
    directory.mkdir(parents=True, exist_ok=True)
    groups = ranked(configs)
    axes = [axis.path for axis in sweep.axes]
    body = [f"<p>{len(summaries)} of {len(grid)} cells done; configurations (a workload "
            f"and one value per axis) averaged over their seeds, ranked by "
            f"<b>{html.escape(objective)}</b>, lowest first; cost: "
            f"<b>{html.escape(measure)}</b>; &#9733; on the Pareto front of "
            f"{WAIT} against {html.escape(measure)}.</p>\n"]
    for index, (workload, group) in enumerate(groups.items(), 1):
        name = f"pareto-{index}.png"
        charts.pareto_chart(group, directory / name, workload, measure)
        body.append(f"<h2>{html.escape(workload)}</h2>\n")
        body.append(table(["rank", *axes, *_figures(objective, measure), "cells", "front"],
                          _rows(group, axes, objective, measure)))
        body.append(figures([(name, f"Mean wait against {measure} of each configuration "
                                    f"of {workload}; the Pareto front joined.")]))
    drawn = []
    for k, axis in enumerate(sweep.axes, 1):
        name = f"axis-{k}.png"
        charts.axis_chart(axis_effect(configs, axis.path, axis.values), axis.values,
                          directory / name, axis.path, objective, measure)
        drawn.append((name, f"The effect of {axis.path}: the mean {objective} and "
                            f"{measure} of the configurations with each value, per workload."))
    body.append("<h2>Axes</h2>\n" + figures(drawn))
    _write_ranked(directory / "ranked.csv", groups, axes, objective, measure)
    path = directory / "index.html"
    write_bytes_atomic(path, page(f"XCE sweep: {sweep.file}", "".join(body)).encode())
    return path


def _figures(objective: str, measure: str) -> list[str]:
    """The figures a ranked row shows: the objective, the mean wait, the cost."""
    return list(dict.fromkeys([objective, WAIT, measure]))


def _values(c: Configuration, objective: str, measure: str) -> dict[str, float]:
    return {objective: c.objective, WAIT: c.wait, measure: c.cost}


def _rows(group: Sequence[Configuration], axes: Sequence[str], objective: str,
          measure: str) -> list[list[str]]:
    shown = _figures(objective, measure)
    return [[str(rank), *(show(c.values[a]) for a in axes),
             *(human_value(_values(c, objective, measure)[f], f) for f in shown),
             " ".join(map(str, c.cells)), "\u2605" if c.pareto else ""]
            for rank, c in enumerate(group, 1)]


def _write_ranked(path: Path, groups: Mapping[str, Sequence[Configuration]],
                  axes: Sequence[str], objective: str, measure: str) -> None:
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    shown = _figures(objective, measure)
    writer.writerow(["workload", "rank", *axes, *shown, "pareto", "cells"])
    for workload, group in groups.items():
        for rank, c in enumerate(group, 1):
            values = _values(c, objective, measure)
            writer.writerow([workload, rank, *(show(c.values[a]) for a in axes),
                             *(values[f] for f in shown), int(c.pareto),
                             " ".join(map(str, c.cells))])
    write_bytes_atomic(path, stream.getvalue().encode())
