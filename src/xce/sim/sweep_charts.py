"""The charts of a sweep's report: per workload the Pareto front of mean wait against
cost, and per axis its effect on the objective and the cost (Matplotlib's Agg canvas,
as the run report's charts, `xce.sim.report_plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from xce.sim.report_plots import DPI, FIGSIZE, figure, finish
from xce.sim.report_text import human_value
from xce.sim.sweep_analysis import WAIT, Configuration
from xce.sim.sweep_store import show


def _units(axis: Any, key: str) -> None:
    """Tick labels in the units of the summary figure `key`."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: human_value(v, key)))


def pareto_chart(group: Sequence[Configuration], path: Path, workload: str,
                 measure: str) -> None:
    """Each configuration's mean wait against its cost; the front joined, its points
    labelled with their values."""
    fig, ax = figure(f"{Path(workload).name}: mean wait against {measure}")
    ax.scatter([c.cost for c in group], [c.wait for c in group], color="#9e9e9e", s=18,
               label="configuration")
    front = sorted((c for c in group if c.pareto), key=lambda c: c.cost)
    ax.plot([c.cost for c in front], [c.wait for c in front], color="#1f77b4", marker="o",
            label="Pareto front")
    for c in front:
        ax.annotate("/".join(show(v) for v in c.values.values()), (c.cost, c.wait),
                    textcoords="offset points", xytext=(4, 4), fontsize="x-small")
    _units(ax.yaxis, WAIT)
    _units(ax.xaxis, measure)
    names = "/".join(front[0].values) if front and front[0].values else "configuration"
    finish(fig, ax, f"{measure} (labels: {names})", WAIT, path, integer=False, columns=2)


def axis_chart(effect: Mapping[str, Sequence[tuple[float, float] | None]],
               values: Sequence[Any], path: Path, axis_path: str, objective: str,
               measure: str) -> None:
    """Two panels, the objective and the cost against the axis's values, a line per
    workload (a logarithmic scale when the workloads differ by more than 20x)."""
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.96, f"The effect of {axis_path}", ha="center", va="center",
             fontsize="large")
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    x = [float(v) for v in values] if numeric else list(range(len(values)))
    panels = fig.subplots(1, 2)
    for panel, which, name in ((panels[0], 0, objective), (panels[1], 1, measure)):
        ys: list[float] = []
        for workload, points in effect.items():
            shown = [(x[i], p[which]) for i, p in enumerate(points) if p is not None]
            ys.extend(b for _, b in shown)
            panel.plot([a for a, _ in shown], [b for _, b in shown], marker="o",
                       label=Path(workload).name)
        _panel(panel, name, axis_path, values, x, numeric)
        positive = [y for y in ys if y > 0]
        if positive and max(positive) > 20 * min(positive):
            panel.set_yscale("log")
            _units(panel.yaxis, name)
    handles, labels = panels[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=2, fontsize="small", frameon=False)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.88, bottom=0.24, wspace=0.35)
    fig.savefig(path)


def _panel(panel: Axes, name: str, axis_path: str, values: Sequence[Any], x: Sequence[float],
           numeric: bool) -> None:
    panel.grid(True, alpha=0.3)
    panel.set_xlabel(axis_path)
    panel.set_ylabel(f"mean {name}")
    if not numeric:
        panel.set_xticks(list(x), [show(v) for v in values])
    _units(panel.yaxis, name)
