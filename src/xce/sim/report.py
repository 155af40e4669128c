"""The report of a simulation run: four plots and an HTML page (`xce sim run --report DIR`,
the REPL's `report DIR`; see docs/simulator.md, "The report").

`write_report` writes into DIR:

* `hosts.png`: hosts by state over time (static, provisioned and open, closed for
  draining, in flight) and the demand for new hosts;
* `jobs.png`: pending and running jobs over time;
* `waits.png`: the wait-time distribution of finished jobs (log x) with p50 and p95;
* `tokens.png`: borrowed tokens against tokens in use over time;
* `index.html`: the summary as a table, the cost per template and in total when
  templates have prices, and the four images (no external assets).

The series have one sample per session. Long series are cut into at most
`MAX_POINTS` bins of consecutive sessions and each bin is drawn as one step at the
largest value it holds, so that short spikes stay visible and a run of several
hundred thousand sessions still plots in about a second.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from xce.model.cost import template_prices
from xce.model.durations import duration_text
from xce.sim.metrics import percentile
from xce.sim.summary_text import format_value

if TYPE_CHECKING:
    from xce.sim.driver import Simulator

MAX_POINTS = 5000
FIGSIZE = (8.0, 4.8)
DPI = 100

FloatArray = npt.NDArray[np.float64]

PLOTS = (
    ("hosts.png", "Hosts",
     "Hosts by state after every session: static hosts, provisioned hosts open to work, "
     "provisioned hosts closed for draining, hosts requested and not yet joined (in flight), "
     "and the new hosts the session's demand asked for."),
    ("jobs.png", "Jobs", "Pending (held included) and running jobs after every session."),
    ("waits.png", "Wait times",
     "Wait time (start - submit) of the finished jobs, log scale, with the median (p50) "
     "and the 95th percentile (p95) as in the summary."),
    ("tokens.png", "Tokens",
     "Tokens of countable resources borrowed from the license pools, against tokens "
     "held by running jobs in pools that can borrow (these come from the pool's own "
     "total first, so use can exceed what is borrowed)."),
)


def write_report(directory: Path, simulator: Simulator, summary: dict[str, Any]) -> None:
    """Write the four plots and index.html of a run into `directory` (created)."""
    directory.mkdir(parents=True, exist_ok=True)
    columns = simulator.metrics.series.columns
    time = _column(columns["time"])
    unit, scale = time_unit(float(time[-1] - time[0]) if len(time) else 0.0)
    series = downsample(time, {name: _column(col) for name, col in columns.items()})
    x = series["time"] / scale
    xlabel = f"simulated time ({unit})"

    fig, ax = _figure("Hosts by state")
    for name, label in (
        ("static_hosts", "static"), ("provisioned_hosts", "provisioned (open)"),
        ("closed_hosts", "closed (draining)"), ("in_flight_hosts", "in flight"),
    ):
        ax.step(x, series[name], where="post", linewidth=1.0, label=label)
    ax.step(x, series["demand_hosts"], where="post", linewidth=1.0, label="demand for new hosts",
            linestyle="--")
    _finish(fig, ax, xlabel, "hosts", directory / "hosts.png", empty=not len(x))

    fig, ax = _figure("Jobs")
    ax.step(x, series["pending"], where="post", linewidth=1.0, label="pending")
    ax.step(x, series["running"], where="post", linewidth=1.0, label="running")
    _finish(fig, ax, xlabel, "jobs", directory / "jobs.png", empty=not len(x))

    _waits_plot(simulator.metrics.waits, directory / "waits.png")

    fig, ax = _figure("Tokens")
    ax.step(x, series["tokens_borrowed"], where="post", linewidth=1.0, label="borrowed")
    ax.step(x, series["tokens_used"], where="post", linewidth=1.0, label="used")
    no_tokens = not simulator.pools
    _finish(fig, ax, xlabel, "tokens", directory / "tokens.png", empty=not len(x) or no_tokens,
            note="no countable resources" if no_tokens else None)

    title = f"{simulator.workload.name} on {simulator.config.cluster}"
    prices = template_prices(simulator.config.catalog.templates)
    (directory / "index.html").write_text(_html(title, summary, prices), encoding="utf-8")


# ---------------------------------------------------------------------- series


def _column(values: Sequence[float]) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def downsample(
    time: FloatArray, columns: dict[str, FloatArray], limit: int = MAX_POINTS
) -> dict[str, FloatArray]:
    """At most `limit` + 1 points per column: consecutive samples are binned, each bin
    keeps its first time and its largest value; a last point at the last sample's
    time closes the final step. Short series come back unchanged (`time` included)."""
    out = dict(columns)
    out["time"] = time
    count = len(time)
    if count <= limit:
        return out
    width = math.ceil(count / limit)
    starts = np.arange(0, count, width)
    for name, values in columns.items():
        if name == "time":
            continue
        binned = np.maximum.reduceat(values, starts)
        out[name] = np.append(binned, binned[-1])
    out["time"] = np.append(time[starts], time[-1])
    return out


def time_unit(span: float) -> tuple[str, float]:
    """(unit name, seconds per unit) for a time axis covering `span` seconds."""
    if span <= 2 * 3600:
        return "minutes", 60.0
    if span <= 3 * 86400:
        return "hours", 3600.0
    return "days", 86400.0


# ---------------------------------------------------------------------- plots


def _figure(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _finish(
    fig: Figure, ax: Axes, xlabel: str, ylabel: str, path: Path, *, empty: bool = False,
    note: str | None = None,
) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if empty:
        ax.text(0.5, 0.5, note or "no sessions ran", transform=ax.transAxes,
                ha="center", va="center", color="grey")
    else:
        # below the plot: it never hides data, and placing it costs nothing
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=3,
                  fontsize="small", frameon=False)
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.25, top=0.92)
    fig.savefig(path)


def _waits_plot(waits: Sequence[float], path: Path) -> None:
    fig, ax = _figure("Wait time of finished jobs")
    ax.set_xscale("log")
    ordered = sorted(waits)
    values = np.asarray(ordered, dtype=np.float64)
    shown = values[values >= 1.0]
    if not len(values):
        _finish(fig, ax, "wait (s)", "jobs", path, empty=True, note="no finished jobs")
        return
    top = max(10.0, float(values[-1]) * 1.1)
    bins = np.logspace(0.0, math.log10(top), 50)
    if len(shown):
        counts, edges = np.histogram(shown, bins=bins)
        ax.stairs(counts, edges, fill=True, color="tab:blue", alpha=0.8,
                  label=f"{len(shown):,} jobs waited >= 1 s")
    quick = len(values) - len(shown)
    if quick:
        ax.plot([], [], " ", label=f"{quick:,} jobs waited < 1 s (not shown)")
    for fraction, name, color in ((0.5, "p50", "tab:green"), (0.95, "p95", "tab:red")):
        value = percentile(ordered, fraction)
        label = f"{name} = {duration_text(value)}"
        if value >= 1.0:
            ax.axvline(value, color=color, linestyle="--", label=label)
        else:
            ax.plot([], [], " ", label=label)
    ax.set_xlim(1.0, top * 1.5)
    _finish(fig, ax, "wait (s)", "jobs", path)


# ---------------------------------------------------------------------- html


STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 60em; color: #222; }
table { border-collapse: collapse; }
th, td { padding: 0.2em 0.8em; border-bottom: 1px solid #ddd; text-align: left; }
td.value { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 2em 0; }
img { max-width: 100%; }
figcaption { color: #555; }
"""


def _cost_table(summary: dict[str, Any], prices: dict[str, float]) -> str:
    """Per template its host-hours, price per host-hour and cost, then the total
    (the summary's `cost` and `cost_total`); nothing when no template has a price."""
    cost = summary.get("cost")
    if not prices or not isinstance(cost, dict):
        return ""
    hours = summary.get("host_hours", {})
    rows = "\n".join(
        f"<tr><th>{html.escape(name)}</th>"
        f"<td class=\"value\">{hours.get(name, 0.0):,.3f}</td>"
        f"<td class=\"value\">{prices.get(name, 0.0):,.3f}</td>"
        f"<td class=\"value\">{value:,.3f}</td></tr>"
        for name, value in cost.items()
    )
    total = f"{summary.get('cost_total', 0.0):,.3f}"
    return (
        "<h2>Cost</h2>\n<table>\n<tr><th>template</th><th>host-hours</th>"
        "<th>price per host-hour</th><th>cost</th></tr>\n"
        f"{rows}\n<tr><th>total</th><td></td><td></td>"
        f"<td class=\"value\">{total}</td></tr>\n</table>\n"
    )


def _html(title: str, summary: dict[str, Any], prices: dict[str, float] | None = None) -> str:
    rows = "\n".join(
        f"<tr><th>{html.escape(str(key))}</th>"
        f"<td class=\"value\">{html.escape(format_value(value, str(key)))}</td></tr>"
        for key, value in summary.items()
    )
    figures = "\n".join(
        f"<figure><h2>{html.escape(heading)}</h2>"
        f"<img src=\"{name}\" alt=\"{html.escape(heading)}\">"
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        for name, heading, caption in PLOTS
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>XCE simulation: {html.escape(title)}</title>\n<style>{STYLE}</style>\n"
        "</head>\n<body>\n"
        f"<h1>XCE simulation: {html.escape(title)}</h1>\n"
        f"<h2>Summary</h2>\n<table>\n<tr><th>metric</th><th>value</th></tr>\n{rows}\n"
        f"</table>\n{_cost_table(summary, prices or {})}{figures}\n</body>\n</html>\n"
    )
