"""The simulation report: charts and index.html of a small elastic run (the charts
that have data only: tests/test_sim_report_charts.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from matplotlib.image import imread

from xce.config import load_config
from xce.sim.driver import Simulator
from xce.sim.report import write_report
from xce.sim.report_plots import time_unit
from xce.sim.workload import load_workload

CLUSTER = """\
cluster: tiny
session_interval: 10
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 300
  templates:
    - {name: cloud, provider: sim, slots: 4, max: 3}
policy:
  persistence: 60
simulation:
  providers:
    sim: {lead_time: 120}
"""

JOBS = """\
jobs:
  - {id: 1, submit: 0, run: 3000, n: 4}
  - {ids: "2-5", submit: 10, run: 900, n: 4, user: alice}
  - {ids: "6-9", submit: 1800, run: 300, n: 2, user: bob}
"""

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def simulate(tmp_path: Path) -> Simulator:
    (tmp_path / "cluster.yaml").write_text(textwrap.dedent(CLUSTER))
    (tmp_path / "jobs.yaml").write_text(textwrap.dedent(JOBS))
    config = load_config(tmp_path / "cluster.yaml")
    simulator = Simulator(config, load_workload(tmp_path / "jobs.yaml"))
    simulator.run()
    return simulator


def test_report_files(tmp_path: Path) -> None:
    simulator = simulate(tmp_path)
    summary = simulator.summary()
    assert summary["finished"] == 9
    assert summary["hosts_joined"] > 0  # the run did use the template
    out = tmp_path / "report"
    write_report(out, simulator, summary)
    names = ["hosts.png", "jobs.png", "waits.png"]  # no prices, no countables
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*names, "index.html", "summary.json", "series.json"])
    for name in names:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        image = imread(out / name)
        assert image.shape[0] > 0 and image.shape[1] > 0, name
    page = (out / "index.html").read_text()
    for name in names:
        assert f'src="{name}"' in page
    assert "<th>hosts_joined</th>" in page
    assert page.count("<h1>") == 1 and page.count("XCE simulation: ") == 2  # head, h1
    assert "http" not in page  # no external assets


def test_report_without_sessions(tmp_path: Path) -> None:
    """A run that has not started still gives a complete report."""
    (tmp_path / "cluster.yaml").write_text(textwrap.dedent(CLUSTER))
    (tmp_path / "jobs.yaml").write_text(textwrap.dedent(JOBS))
    simulator = Simulator(load_config(tmp_path / "cluster.yaml"),
                          load_workload(tmp_path / "jobs.yaml"))
    write_report(tmp_path / "r", simulator, simulator.summary())
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["index.html", "summary.json"]
    page = (tmp_path / "r" / "index.html").read_text()
    assert "Not drawn: hosts, jobs, cost and tokens over time (no session ran); " \
           "wait times (no job finished)." in page


def test_time_unit() -> None:
    assert time_unit(3600)[0] == "minutes"
    assert time_unit(36 * 3600)[0] == "hours"
    assert time_unit(30 * 86400)[0] == "days"


def test_report_shows_cost_per_template_and_in_total(tmp_path: Path) -> None:
    """With a price on the template, index.html has a Cost table: the template's
    host-hours, its price per host-hour, its cost (host-hours x price), and the total
    (the summary's `cost` and `cost_total`). Without a price there is no such table."""
    priced = CLUSTER.replace("slots: 4, max: 3}", "slots: 4, max: 3, price: 1.5}")
    assert priced != CLUSTER
    (tmp_path / "cluster.yaml").write_text(priced)
    (tmp_path / "jobs.yaml").write_text(textwrap.dedent(JOBS))
    simulator = Simulator(load_config(tmp_path / "cluster.yaml"),
                          load_workload(tmp_path / "jobs.yaml"))
    simulator.run()
    summary = simulator.summary()
    hours = summary["host_hours"]["cloud"]
    assert hours > 0
    assert summary["cost"]["cloud"] == pytest.approx(hours * 1.5, abs=0.001), (
        "host-hours x price (each rounded to 3 places)"
    )
    write_report(tmp_path / "r", simulator, summary)
    page = (tmp_path / "r" / "index.html").read_text()
    assert "<h2>Cost</h2>" in page
    cost = summary["cost"]["cloud"]
    row = (f'<tr><th>cloud</th><td class="value">{hours:,.3f}</td>'
           f'<td class="value">1.500</td><td class="value">{cost:,.3f}</td></tr>')
    assert row in page, "per template: host-hours, price per host-hour, cost"
    assert ('<tr><th>total</th><td class="value"></td><td class="value"></td>'
            f'<td class="value">{summary["cost_total"]:,.3f}</td></tr>') in page
    (tmp_path / "plain").mkdir()
    plain = simulate(tmp_path / "plain")
    write_report(tmp_path / "p", plain, plain.summary())
    assert "<h2>Cost</h2>" not in (tmp_path / "p" / "index.html").read_text()
