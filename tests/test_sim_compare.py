"""`xce sim compare` and `xce sim run --baseline`: two runs' summaries side by side
with their differences (absolute and per cent), and the overlaid charts."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from xce.cli.main import main as cli
from xce.sim.compare import Run, comparison, difference, numbers

CLUSTER = """\
cluster: one
session_interval: 10
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30}
"""
# each job takes the whole host for 100 s: waits 0, 100 (, 200)
TWO = 'jobs:\n  - {ids: "1-2", submit: 0, run: 100, n: 4}\n'
THREE = 'jobs:\n  - {ids: "1-3", submit: 0, run: 100, n: 4}\n'


def run_cli(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run `two` as a report directory, `three` as a --json summary file."""
    (tmp_path / "c.yaml").write_text(CLUSTER)
    (tmp_path / "two.yaml").write_text(TWO)
    (tmp_path / "three.yaml").write_text(THREE)
    run_cli("sim", "run", str(tmp_path / "c.yaml"), "--workload", str(tmp_path / "two.yaml"),
            "--report", str(tmp_path / "two"))
    out = run_cli("sim", "run", str(tmp_path / "c.yaml"), "--workload",
                  str(tmp_path / "three.yaml"), "--json")
    (tmp_path / "three.json").write_text(out)
    return tmp_path / "two", tmp_path / "three.json"


def row(output: str, figure: str) -> list[str]:
    """The cells of a figure's row in a printed table."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if cells and cells[0] == figure:
            return cells[1:]
    raise AssertionError(f"no row {figure!r} in\n{output}")


def test_compare_prints_the_differences(tmp_path: Path) -> None:
    two, three = two_runs(tmp_path)
    out = run_cli("sim", "compare", str(two), str(three))
    assert "Compared with two" in out
    assert row(out, "jobs") == ["2", "3", "+1 (+50.0 %)"]
    assert row(out, "sessions") == ["2", "3", "+1 (+50.0 %)"]
    assert row(out, "sim_seconds") == ["3m20s", "5m00s", "+1m40s (+50.0 %)"]
    assert row(out, "wait_mean") == ["50.0s", "1m40s", "+50.0s (+100.0 %)"]
    assert row(out, "wait_p50") == ["0.0s", "1m40s", "+1m40s (new)"]
    assert row(out, "wait_max") == ["1m40s", "3m20s", "+1m40s (+100.0 %)"]
    assert row(out, "bsld_mean") == ["1.500", "2.000", "+0.500 (+33.3 %)"]
    assert row(out, "utilization") == ["100.0%", "100.0%", "0"]
    assert row(out, "hosts_joined") == ["0", "0", "0"]


def test_every_numeric_summary_figure_is_compared(tmp_path: Path) -> None:
    two, three = two_runs(tmp_path)
    summary = json.loads(three.read_text())
    header, rows = comparison([Run("a", json.loads((two / "summary.json").read_text())),
                               Run("b", summary)])
    assert header == ["figure", "a", "b", "b - a"]
    assert [r[0] for r in rows] == list(numbers(summary))
    for key in ("jobs", "wait_p95", "bsld_mean", "utilization", "hosts_requested",
                "tokens_borrowed", "token_hours", "requests", "wide_wait_max"):
        assert key in numbers(summary)


def test_mappings_are_compared_per_template() -> None:
    a = {"host_hours": {"cloud": 10.0}, "cost_total": 4.0, "utilization": 0.5}
    b = {"host_hours": {"cloud": 15.0, "spot": 2.0}, "cost_total": 3.0, "utilization": 0.55}
    _, rows = comparison([Run("a", a), Run("b", b)])
    assert ["host_hours.cloud", "10.0 h", "15.0 h", "+5.0 h (+50.0 %)"] in rows
    assert ["host_hours.spot", "-", "2.0 h", "-"] in rows
    assert ["cost_total", "4.00", "3.00", "-1.00 (-25.0 %)"] in rows
    assert ["utilization", "50.0%", "55.0%", "+5.0 pp (+10.0 %)"] in rows
    assert difference(0, 0, "jobs") == "0"


def test_compare_report_draws_the_overlays(tmp_path: Path) -> None:
    two, three = two_runs(tmp_path)
    run_cli("sim", "run", str(tmp_path / "c.yaml"), "--workload",
            str(tmp_path / "three.yaml"), "--report", str(tmp_path / "three"))
    out = run_cli("sim", "compare", str(two / "summary.json"), str(tmp_path / "three"),
                  "--report", str(tmp_path / "cmp"))
    assert "hosts.png, pending.png, waits.png" in out
    page = (tmp_path / "cmp" / "index.html").read_text()
    assert page.count("<h1>") == 1
    for name in ("hosts.png", "pending.png", "waits.png"):
        assert (tmp_path / "cmp" / name).read_bytes().startswith(b"\x89PNG"), name
        assert f'src="{name}"' in page
    assert "+1m40s (+50.0 %)" in page
    # a summary without series: the table, and a note instead of its overlays
    out = run_cli("sim", "compare", str(two), str(three), "--report", str(tmp_path / "c2"))
    page = (tmp_path / "c2" / "index.html").read_text()
    assert "overlays of three (no series.json beside its summary)" in page


def test_run_with_baseline_prints_the_comparison_after_its_summary(tmp_path: Path) -> None:
    two, _ = two_runs(tmp_path)
    out = run_cli("sim", "run", str(tmp_path / "c.yaml"), "--workload",
                  str(tmp_path / "three.yaml"), "--baseline", str(two))
    assert out.index("Simulation summary") < out.index("Compared with two")
    tail = out[out.index("Compared with two"):]
    assert row(tail, "wait_mean") == ["50.0s", "1m40s", "+50.0s (+100.0 %)"]
    result = CliRunner().invoke(cli, ["sim", "run", str(tmp_path / "c.yaml"), "--workload",
                                      str(tmp_path / "three.yaml"), "--json",
                                      "--baseline", str(two)])
    assert result.exit_code == 2 and "not with --json" in result.output


def test_compare_needs_two_readable_runs(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[1, 2]")
    (tmp_path / "ok.json").write_text("{}")
    result = CliRunner().invoke(cli, ["sim", "compare", str(tmp_path / "ok.json")])
    assert result.exit_code == 2 and "at least two runs" in result.output
    result = CliRunner().invoke(cli, ["sim", "compare", str(tmp_path / "ok.json"),
                                      str(tmp_path / "bad.json")])
    assert result.exit_code == 1 and "bad.json: not a summary" in result.output
