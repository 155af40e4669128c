"""The report draws a chart only when it has data (issue 22 part 4): a static run
has no provisioned layers, cost or tokens; an elastic run with prices and countables
has them all. The binning never loses a host (a property test)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.config import load_config
from xce.sim.driver import Simulator
from xce.sim.report import write_report
from xce.sim.report_plots import hosts_chart
from xce.sim.report_series import bin_edges, bin_max, bin_means, host_layers
from xce.sim.series_format import LAYERS, load_series
from xce.sim.workload import load_workload

STATIC = """\
cluster: plain
session_interval: 10
hosts:
  - {name: n1, slots: 4}
  - {name: n2, slots: 4}
queues:
  - {name: normal, priority: 30}
"""

ELASTIC = """\
cluster: full
session_interval: 10
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 4}
shared:
  vcs: {total: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 300
  templates:
    - {name: cloud, provider: sim, slots: 4, max: 3, price: 1.5}
  countables:
    - {resource: vcs, max_borrow: 2, idle_time: 100}
policy: {persistence: 60}
simulation:
  providers: {sim: {lead_time: 120}}
  countables: {vcs: {grant_delay: 30}}
"""

JOBS = """\
jobs:
  - {id: 1, submit: 0, run: 3000, n: 4}
  - {ids: "2-5", submit: 10, run: 900, n: 4, user: alice}
  - {ids: "6-8", submit: 1800, run: 300, n: 1, res: "rusage[vcs=1]"}
"""

ALL = ["hosts.png", "jobs.png", "waits.png", "cost.png", "tokens.png"]


def report(tmp_path: Path, cluster: str) -> Path:
    (tmp_path / "cluster.yaml").write_text(textwrap.dedent(cluster))
    jobs = JOBS if "vcs" in cluster else JOBS.replace(', res: "rusage[vcs=1]"', "")
    (tmp_path / "jobs.yaml").write_text(textwrap.dedent(jobs))
    simulator = Simulator(load_config(tmp_path / "cluster.yaml"),
                          load_workload(tmp_path / "jobs.yaml"))
    simulator.run()
    write_report(tmp_path / "r", simulator, simulator.summary())
    return tmp_path / "r"


def charts(directory: Path) -> list[str]:
    return [name for name in ALL if (directory / name).is_file()]


def test_static_run_has_no_provisioned_layers_cost_or_tokens(tmp_path: Path) -> None:
    out = report(tmp_path, STATIC)
    assert charts(out) == ["hosts.png", "jobs.png", "waits.png"]
    page = (out / "index.html").read_text()
    assert "cost (no template has a price); tokens (no countable resources)" in page
    series = load_series(out / "series.json")
    assert not (series.templates or series.priced or series.countables)
    labels = hosts_chart(series, tmp_path / "h.png", "Hosts")
    assert labels == ["static"], "no provisioned layers, no demand line"
    assert series.layers["static"] == [2.0] * len(series.time)


def test_elastic_run_with_prices_and_countables_has_every_chart(tmp_path: Path) -> None:
    out = report(tmp_path, ELASTIC)
    assert charts(out) == ALL
    page = (out / "index.html").read_text()
    for name in ALL:
        assert f'src="{name}"' in page
    assert "Not drawn" not in page
    series = load_series(out / "series.json")
    assert series.templates and series.priced and series.countables
    labels = hosts_chart(series, tmp_path / "h.png", "Hosts")
    assert len(labels) == len(LAYERS) + 2  # the layers, the wanted mean and most
    assert max(series.means["tokens_borrowed"]) > 0
    summary = (out / "summary.json").read_text()
    assert '"cost_total":' in summary
    total = float(summary.split('"cost_total":')[1].split("}")[0].split(",")[0])
    assert abs(series.cost[-1] - total) <= 0.01 + 0.002 * total, "cost so far ends at the total"


def test_page_shows_human_units(tmp_path: Path) -> None:
    page = (report(tmp_path, ELASTIC) / "index.html").read_text()
    assert "<th>sim_seconds</th><td class=\"value\">50m00s</td>" in page
    assert "<th>utilization</th>" in page and "%</td>" in page
    assert "cloud=" in page and " h</td>" in page  # host-hours with their unit


# ---------------------------------------------------------------------- binning

steps = st.lists(
    st.tuples(st.floats(0.0, 500.0), *(st.integers(0, 40) for _ in range(6))),
    min_size=1, max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(samples=steps, bins=st.integers(1, 80))
def test_binning_never_loses_a_host(
    samples: list[tuple[float, int, int, int, int, int, int]], bins: int
) -> None:
    """The layers of each bin add up to the mean of all the hosts in it, whatever
    the bins; the means keep the integral; a bin's mean and most lie within the
    values the step takes."""
    samples.sort(key=lambda s: s[0])
    time = np.array([s[0] for s in samples])
    static, open_, idle_part, closed, flight, demand = (
        np.array([float(s[k]) for s in samples]) for k in range(1, 7))
    idle = np.minimum(idle_part, open_)
    columns = {"static_hosts": static, "provisioned_hosts": open_, "idle_hosts": idle,
               "closed_hosts": closed, "in_flight_hosts": flight}
    layers = host_layers(columns)
    assert all(np.all(v >= 0) for v in layers.values())
    edges = bin_edges(time, bins)
    total = static + open_ + closed + flight
    summed = sum(bin_means(time, v, edges) for v in layers.values())
    assert np.allclose(summed, bin_means(time, total, edges), rtol=1e-9, atol=1e-9)
    means = bin_means(time, total, edges)
    assert np.all(means >= total.min() - 1e-9) and np.all(means <= total.max() + 1e-9)
    if edges[-1] > edges[0]:
        integral = float(np.sum(total[:-1] * np.diff(time)))
        assert np.isclose(float(np.sum(means * np.diff(edges))), integral, rtol=1e-9,
                          atol=1e-6)
    most = bin_max(time, demand, edges)
    assert np.all(most >= bin_means(time, demand, edges) - 1e-9)
    assert np.all(most <= demand.max())
