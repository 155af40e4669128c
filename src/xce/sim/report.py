"""The report of a simulation run (`xce sim run --report DIR`, the REPL's `report
DIR`; see docs/simulator.md, "The report"). `write_report` writes into DIR the
charts that have data, each only then:

* `hosts.png`: hosts by state as stacked areas (static; with templates also
  provisioned busy, provisioned idle, draining, in flight) and the hosts wanted;
* `jobs.png`: pending and running jobs;
* `waits.png`: the wait distribution of finished jobs (when some finished);
* `cost.png`: spend per hour and cost so far (when a template has a price);
* `tokens.png`: borrowed and used tokens (when the cluster has countables);
* `index.html`: one title, the summary in human units, the cost table, the charts;
* `summary.json` (the summary as `--json` prints it) and `series.json` (the binned
  series, xce.sim.report_series), which `xce sim compare` reads.

The series are binned (report_series.BINS bins over the run's span, time-weighted
means), so a trace of years draws as readably, and as fast, as a day's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from xce.model.cost import template_prices
from xce.sim import report_plots as plots
from xce.sim.report_html import cost_table, figures, page, summary_table
from xce.sim.report_series import run_series
from xce.sim.series_format import RunSeries, summary_json

if TYPE_CHECKING:
    from xce.sim.driver import Simulator

CAPTIONS = {
    "hosts.png": "Hosts by state, each counted once: static hosts; provisioned hosts "
                 "running something (busy) or nothing (idle); drained hosts not given "
                 "back yet; hosts requested and not joined (in flight); each a "
                 "time-weighted mean per bin. The black line is the hosts wanted: hosts "
                 "up or in flight plus the new hosts the sessions' demand asked for "
                 "(mean per bin; dotted, the most in each bin).",
    "jobs.png": "Pending jobs (held ones included) and running jobs, mean per bin.",
    "waits.png": "Wait time (start - submit) of the finished jobs, log scale, with the "
                 "median (p50) and the 95th percentile (p95) as in the summary.",
    "cost.png": "What the provisioned hosts cost: per hour (their templates' price per "
                "host-hour times the hosts up, mean per bin) and so far.",
    "tokens.png": "Tokens of countable resources borrowed from the license pools, "
                  "against tokens held by running jobs in pools that can borrow (these "
                  "come from the pool's own total first, so use can exceed what is "
                  "borrowed).",
}


def write_report(directory: Path, simulator: Simulator, summary: dict[str, Any]) -> None:
    """Write the charts that have data, index.html, summary.json and series.json
    of a run into `directory` (created)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in ("hosts.png", "jobs.png", "waits.png", "cost.png", "tokens.png",
                  "series.json"):
        (directory / stale).unlink(missing_ok=True)  # (from an earlier report)
    workload, cluster = simulator.workload.name, simulator.config.cluster
    where = "a cluster sized from it" if cluster == workload else cluster
    title = f"XCE simulation: {workload} on {where}"
    prices = template_prices(simulator.config.catalog.templates)
    series = run_series(
        title, simulator.metrics.series.columns, simulator.metrics.waits,
        templates=bool(simulator.config.catalog.templates), priced=bool(prices),
        countables=bool(simulator.pools),
    )
    charts, missing = _draw(directory, series, simulator.metrics.waits, summary)
    if series is not None:
        (directory / "series.json").write_bytes(series.to_json())
    (directory / "summary.json").write_bytes(summary_json(summary))
    body = ("<h2>Summary</h2>\n" + summary_table(summary) + cost_table(summary, prices)
            + figures([(name, CAPTIONS[name]) for name in charts], missing))
    (directory / "index.html").write_text(page(title, body), encoding="utf-8")


def _draw(directory: Path, series: RunSeries | None, waits: list[float],
          summary: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Draw the charts that have data: (files drawn, why the others are not)."""
    charts: list[str] = []
    missing: list[str] = []
    if series is None:
        missing.append("hosts, jobs, cost and tokens over time (no session ran)")
    else:
        plots.hosts_chart(series, directory / "hosts.png", "Hosts by state")
        plots.jobs_chart(series, directory / "jobs.png", "Jobs")
        charts += ["hosts.png", "jobs.png"]
    if waits:
        marks = {"p50": float(summary["wait_p50"]), "p95": float(summary["wait_p95"])}
        plots.waits_chart(waits, marks, directory / "waits.png", "Wait time of finished jobs")
        charts.append("waits.png")
    else:
        missing.append("wait times (no job finished)")
    if series is not None and series.priced:
        plots.cost_chart(series, directory / "cost.png", "Cost of provisioned hosts",
                         float(summary.get("cost_total", 0.0)))
        charts.append("cost.png")
    elif series is not None:
        missing.append("cost (no template has a price)")
    if series is not None and series.countables:
        plots.tokens_chart(series, directory / "tokens.png", "Tokens")
        charts.append("tokens.png")
    elif series is not None:
        missing.append("tokens (no countable resources)")
    return charts, missing
