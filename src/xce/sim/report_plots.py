"""The report's charts, drawn from a run's binned series (xce.sim.report_series):
hosts by state as stacked areas with the hosts wanted as a line, pending and running
jobs, the wait distribution, the cost over time, the tokens; and the overlays of
`xce sim compare` (hosts up, pending jobs, wait CDF of several runs). Matplotlib's
Agg canvas, no pyplot (no global state). Each chart has its title in the image (the
HTML page does not repeat it) and its legend below the axes, off the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from xce.model.durations import duration_text
from xce.sim.series_format import LAYERS, RunSeries

FIGSIZE = (9.0, 5.0)
DPI = 100
FloatArray = npt.NDArray[np.float64]

LAYER_STYLE = {  # layer -> (label, colour)
    "static": ("static", "#9e9e9e"),
    "busy": ("provisioned, busy", "#1f77b4"),
    "idle": ("provisioned, idle", "#aec7e8"),
    "draining": ("draining (closed, not given back)", "#ff7f0e"),
    "in_flight": ("in flight (requested, not joined)", "#ffdd71"),
}
# Wait-axis ticks: (seconds, label)
WAIT_TICKS = ((1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"), (3600, "1 h"),
              (6 * 3600, "6 h"), (86400, "1 day"), (7 * 86400, "1 week"),
              (30 * 86400, "30 days"), (365 * 86400, "1 year"))


def time_unit(span: float) -> tuple[str, float]:
    """(unit name, seconds per unit) for a time axis covering `span` seconds."""
    if span <= 2 * 3600:
        return "minutes", 60.0
    if span <= 3 * 86400:
        return "hours", 3600.0
    return "days", 86400.0


def time_axis(series: RunSeries, unit: tuple[str, float] | None = None
              ) -> tuple[FloatArray, str]:
    """The bins' edges in the unit of the span (or `unit`), and the axis label."""
    start = np.asarray(series.time, dtype=np.float64)
    edges = np.append(start, start[-1] + series.width)
    name, scale = unit or time_unit(float(edges[-1] - edges[0]))
    return edges / scale, f"simulated time ({name})"


def _steps(values: Sequence[float] | FloatArray) -> FloatArray:
    """Bin values drawn as steps over the edges (the last one repeated)."""
    array = np.asarray(values, dtype=np.float64)
    return np.append(array, array[-1])


def figure(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # (the figure's text, not the axes' title: placing that costs a layout per save)
    fig.text(0.5, 0.96, title, ha="center", va="center", fontsize="large")
    ax.grid(True, alpha=0.3)
    return fig, ax


def finish(fig: Figure, ax: Axes, xlabel: str, ylabel: str, path: Path,
           *, integer: bool = True, columns: int = 3, right: float = 0.97) -> None:
    """Labels, the legend below the axes (off the data), and the PNG."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    if integer:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    handles, labels = ax.get_legend_handles_labels()
    rows = math.ceil(len(labels) / columns) if labels else 0
    if labels:
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.13),
                  ncols=columns, fontsize="small", frameon=False)
    fig.subplots_adjust(left=0.09, right=right, top=0.92, bottom=0.17 + 0.045 * rows)
    fig.savefig(path)


# ---------------------------------------------------------------------- one run


def hosts_chart(series: RunSeries, path: Path, title: str) -> list[str]:
    """Hosts by state stacked (the provisioned layers with templates only; none
    counted twice), the hosts wanted as lines over them; the legend's labels."""
    fig, ax = figure(title)
    x, xlabel = time_axis(series)
    names = LAYERS if series.templates else ("static",)
    base = np.zeros(len(x))
    for name in names:
        top = base + _steps(series.layers[name])
        label, colour = LAYER_STYLE[name]
        ax.fill_between(x, base, top, step="post", color=colour, label=label, linewidth=0)
        base = top
    if series.templates:
        ax.step(x, _steps(series.wanted_max), where="post", color="#555555",
                linewidth=0.5, linestyle=":", label="wanted, the most in a bin")
        ax.step(x, _steps(series.wanted), where="post", color="black", linewidth=1.0,
                label="wanted: hosts up or in flight + new demand")
    binned = duration_text(series.width)
    finish(fig, ax, f"{xlabel}; mean per bin of {binned}", "hosts", path, columns=2)
    return ax.get_legend_handles_labels()[1]


def _lines_chart(series: RunSeries, path: Path, title: str, ylabel: str,
                 lines: tuple[tuple[str, str], ...], *, integer: bool = True,
                 columns: int = 3) -> None:
    """Binned means as steps, one line per (series key, label)."""
    fig, ax = figure(title)
    x, xlabel = time_axis(series)
    for key, label in lines:
        ax.step(x, _steps(series.means[key]), where="post", linewidth=1.0, label=label)
    finish(fig, ax, f"{xlabel}; mean per bin of {duration_text(series.width)}", ylabel, path,
           integer=integer, columns=columns)


def jobs_chart(series: RunSeries, path: Path, title: str) -> None:
    _lines_chart(series, path, title, "jobs",
                 (("pending", "pending (held included)"), ("running", "running")))


def tokens_chart(series: RunSeries, path: Path, title: str) -> None:
    _lines_chart(series, path, title, "tokens",
                 (("tokens_borrowed", "borrowed from the pools"),
                  ("tokens_used", "held by running jobs (pools that borrow)")),
                 integer=False, columns=2)


def cost_chart(series: RunSeries, path: Path, title: str, total: float) -> None:
    """The spend per hour in each bin (bars, left) and the cost so far (line, right)."""
    fig, ax = figure(f"{title}: {total:,.2f} in all")
    x, xlabel = time_axis(series)
    spent = np.asarray(series.cost, dtype=np.float64)
    per_hour = np.diff(spent, prepend=0.0) / series.width * 3600 if series.width else spent
    ax.fill_between(x, 0, _steps(per_hour), step="post", color="#aec7e8",
                    label="spend per hour (price x provisioned hosts, mean per bin)")
    right = ax.twinx()
    right.plot(x[1:], spent, color="#d62728", linewidth=1.2, label="cost so far (right axis)")
    right.set_ylim(bottom=0)
    right.set_ylabel("cost so far")
    right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    line_handles, line_labels = right.get_legend_handles_labels()
    for handle, label in zip(line_handles, line_labels, strict=True):
        ax.plot([], [], color=handle.get_color(), label=label)  # type: ignore[attr-defined]
    finish(fig, ax, xlabel, "cost per hour", path, integer=False, columns=2, right=0.9)


def wait_axis(ax: Axes, top: float) -> None:
    """A log axis of waits from 1 s to `top`, its ticks in human units."""
    ax.set_xscale("log")
    ax.set_xlim(1.0, top)
    ticks = [(s, t) for s, t in WAIT_TICKS if s <= top]
    ax.xaxis.set_major_locator(FixedLocator([float(s) for s, _ in ticks]))
    labels = {float(s): t for s, t in ticks}
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: labels.get(float(v), "")))
    ax.xaxis.set_minor_locator(NullLocator())


def waits_chart(waits: Sequence[float], marks: Mapping[str, float], path: Path,
                title: str) -> None:
    """The wait distribution of finished jobs (log time axis from 1 s) with the
    summary's percentiles `marks` (`p50`: its wait_p50, ...) as dashed lines."""
    fig, ax = figure(title)
    values = np.asarray(waits, dtype=np.float64)
    shown = values[values >= 1.0]
    top = max(10.0, float(values.max()) * 1.1)
    if len(shown):
        counts, edges = np.histogram(shown, bins=np.logspace(0.0, math.log10(top), 50))
        ax.stairs(counts, edges, fill=True, color="tab:blue", alpha=0.8,
                  label=f"{len(shown):,} jobs waited >= 1 s")
    quick = len(values) - len(shown)
    if quick:
        ax.plot([], [], " ", label=f"{quick:,} jobs waited < 1 s (not shown)")
    for (name, value), colour in zip(marks.items(), ("tab:green", "tab:red"), strict=False):
        label = f"{name} = {duration_text(value)}"
        if value >= 1.0:
            ax.axvline(value, color=colour, linestyle="--", label=label)
        else:
            ax.plot([], [], " ", label=label)
    wait_axis(ax, top * 1.5)
    finish(fig, ax, "wait (start - submit)", "jobs", path, columns=2)


# ---------------------------------------------------------------------- overlays


def _span_unit(runs: Sequence[RunSeries]) -> tuple[str, float]:
    start = min(r.time[0] for r in runs)
    end = max(r.time[-1] + r.width for r in runs)
    return time_unit(end - start)


def overlay_hosts(runs: Sequence[RunSeries], path: Path) -> None:
    """Hosts up (static + provisioned, draining included) of each run."""
    layers = ("static", "busy", "idle", "draining")
    _overlay(runs, path, "Hosts up (static + provisioned), mean per bin", "hosts",
             lambda run: np.sum([run.layers[n] for n in layers], axis=0))


def overlay_pending(runs: Sequence[RunSeries], path: Path) -> None:
    """Pending jobs of each run."""
    _overlay(runs, path, "Pending jobs, mean per bin", "jobs",
             lambda run: np.asarray(run.means["pending"], dtype=np.float64))


def _overlay(runs: Sequence[RunSeries], path: Path, title: str, ylabel: str,
             values: Callable[[RunSeries], FloatArray]) -> None:
    """One series per run, as steps over the runs' common time axis."""
    fig, ax = figure(title)
    unit = _span_unit(runs)
    xlabel = ""
    for run in runs:
        x, xlabel = time_axis(run, unit)
        ax.step(x, _steps(values(run)), where="post", linewidth=1.0, label=run.title)
    finish(fig, ax, xlabel, ylabel, path, columns=2)


def overlay_waits(runs: Sequence[RunSeries], path: Path) -> None:
    """The wait CDF of each run (waits under 1 s drawn at 1 s)."""
    fig, ax = figure("Wait time of finished jobs: cumulative distribution")
    top = 10.0
    for run in runs:
        if not run.wait_quantiles:
            continue
        waits = np.maximum(np.asarray(run.wait_quantiles), 1.0)
        top = max(top, float(waits[-1]) * 1.5)
        fractions = np.linspace(0.0, 1.0, len(waits))
        ax.step(waits, fractions, where="post", linewidth=1.2, label=run.title)
    wait_axis(ax, top)
    finish(fig, ax, "wait (start - submit; under 1 s at 1 s)", "fraction of jobs", path,
           integer=False, columns=2)
