"""`xce sim sweep SWEEP.yaml --out DIR` (docs/sweeps.md): a grid of simulations on a
small YAML workload: the results' layout, every cell equal to `xce sim run` made alone,
resuming, failed cells, and bad input refused before any cell runs.

The acceptance grid on the shared traces is in test_sim_sweep_traces.py.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from xce.cli.main import main as cli
from xce.sim.sweep_cells import without_timing
from xce.tuning import release_heap

# Two static 4-slot hosts and up to 4 cloud hosts whose lead time is drawn (so that
# the seed matters); bursts of jobs that need the cloud.
CLUSTER = """\
cluster: sweep
session_interval: 10
hosts:
  - {{name: n1, slots: 4}}
  - {{name: n2, slots: 4}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  idle_time: {idle_time}
  templates:
    - {{name: cloud, provider: sim, slots: 4, max: 4}}
policy:
  persistence: {persistence}
simulation:
  seed: 7
  providers:
    sim:
      lead_time: {{dist: exponential, mean: 120}}
"""
JOBS = """\
jobs:
  - {ids: "1-12", submit: 0, run: 600, n: 4}
  - {ids: "13-20", submit: 2000, run: 300, n: 2}
  - {ids: "21-30", submit: 5000, run: 900, n: 4}
"""
SWEEP = """\
base: cluster.yaml
workloads: [jobs.yaml]
axes:
  catalog.idle_time: [60, 600]
  policy.persistence: [0, 120]
seeds: [1, 2]
"""
XCE = os.environ.get("XCE_TEST_CLI") or str(Path(sys.executable).with_name("xce"))


def base_cluster(idle_time: Any = 300, persistence: Any = 60) -> str:
    return CLUSTER.format(idle_time=idle_time, persistence=persistence)


def setup_sweep(tmp_path: Path, sweep: str = SWEEP) -> Path:
    (tmp_path / "cluster.yaml").write_text(base_cluster())
    (tmp_path / "jobs.yaml").write_text(JOBS)
    (tmp_path / "sweep.yaml").write_text(sweep)
    return tmp_path / "sweep.yaml"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def sweep_ok(sweep: Path, out: Path, *extra: str) -> str:
    result = invoke("sim", "sweep", str(sweep), "--out", str(out), "--jobs", "2", *extra)
    assert result.exit_code == 0, result.output
    return str(result.output)


def single_run(tmp_path: Path, workload: Path, seed: int, **values: Any) -> dict[str, Any]:
    """`xce sim run` of one cell made alone, on a cluster file written here."""
    cluster = tmp_path / "alone.yaml"
    cluster.write_text(base_cluster(**values))
    result = invoke("sim", "run", str(cluster), "--workload", str(workload),
                    "--seed", str(seed), "--json")
    release_heap()  # the run froze its objects (settle_heap): let them go
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.output)
    return summary


def table(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(newline="") as stream:
        return list(csv.DictReader(stream))


def mtimes(out: Path) -> dict[str, int]:
    """The finished cells' files and their times (not a cell's `.N.json.tmp`, which a
    kill may leave half-written: atomic_json.py)."""
    return {path.name: path.stat().st_mtime_ns for path in (out / "cells").glob("*.json")}


def test_each_cell_equals_xce_sim_run_alone(tmp_path: Path) -> None:
    sweep = setup_sweep(tmp_path)
    out = tmp_path / "out"
    assert sweep_ok(sweep, out).strip() == (
        f"8 cells: 8 run, 0 already done, 0 failed; {out / 'results.csv'}")
    rows = table(out)
    header = next(csv.reader((out / "results.csv").open()))
    assert header == [
        "workload", "seed", "catalog.idle_time", "policy.persistence", "jobs", "finished",
        "skipped", "too_large", "jobs_backfilled", "jobs_killed_at_limit", "sim_seconds",
        "wall_seconds", "sessions", "wait_mean", "wait_p50", "wait_p95", "wait_p99",
        "wait_max", "wide_wait_max", "bsld_mean", "utilization", "hosts_requested",
        "hosts_joined", "hosts_failed", "hosts_cancelled", "hosts_reclaimed", "hosts_lost",
        "requests", "host_hours.cloud", "host_hours_busy.cloud", "hosts_never_used",
        "tokens_requested", "tokens_borrowed", "tokens_refused", "token_hours", "cell",
        "error"]
    # workloads x axes (first axis outermost) x seeds (innermost)
    assert [(r["workload"], r["seed"], r["catalog.idle_time"], r["policy.persistence"],
             r["cell"], r["error"]) for r in rows] == [
        ("jobs.yaml", str(seed), str(idle), str(persistence), str(n), "")
        for n, (idle, persistence, seed) in enumerate(
            (i, p, s) for i in (60, 600) for p in (0, 120) for s in (1, 2))
    ]
    waits = set()
    for row in rows:
        cell = json.loads((out / "cells" / f"{row['cell']}.json").read_text())
        alone = single_run(tmp_path, tmp_path / "jobs.yaml", int(row["seed"]),
                           idle_time=row["catalog.idle_time"],
                           persistence=row["policy.persistence"])
        assert without_timing(cell) == without_timing(alone), row["cell"]
        assert cell.keys() == alone.keys()
        assert float(row["wait_mean"]) == cell["wait_mean"]
        assert float(row["host_hours.cloud"]) == cell["host_hours"]["cloud"]
        waits.add(cell["wait_mean"])
    assert len(waits) > 4  # the axes and seeds change the outcome


def test_a_rerun_runs_nothing_and_a_changed_axis_only_its_cells(tmp_path: Path) -> None:
    sweep = setup_sweep(tmp_path)
    out = tmp_path / "out"
    sweep_ok(sweep, out)
    before = mtimes(out)
    assert sweep_ok(sweep, out).startswith("8 cells: 0 run, 8 already done, 0 failed;")
    assert mtimes(out) == before
    # 600 -> 900: the cells of idle time 600 (numbers 4-7) are new, 0-3 stay done
    sweep.write_text(SWEEP.replace("[60, 600]", "[60, 900]"))
    assert sweep_ok(sweep, out).startswith("8 cells: 4 run, 4 already done, 0 failed;")
    after = mtimes(out)
    assert sorted(name for name in before if after[name] != before[name]) == [
        f"{n}.json" for n in (4, 5, 6, 7)]
    assert [row["catalog.idle_time"] for row in table(out)] == ["60"] * 4 + ["900"] * 4
    # a different workload content is a different input too
    (tmp_path / "jobs.yaml").write_text(JOBS.replace("run: 300", "run: 301"))
    assert sweep_ok(sweep, out).startswith("8 cells: 8 run, 0 already done, 0 failed;")


def test_an_excluded_combination_is_not_a_cell(tmp_path: Path) -> None:
    sweep = setup_sweep(tmp_path, SWEEP + "exclude:\n  - {catalog.idle_time: 600, "
                                          "policy.persistence: [0]}\n  - {seed: 2}\n")
    out = tmp_path / "out"
    assert sweep_ok(sweep, out).startswith("3 cells: 3 run,")
    assert [(r["catalog.idle_time"], r["policy.persistence"], r["seed"]) for r in table(out)] == [
        ("60", "0", "1"), ("60", "120", "1"), ("600", "120", "1")]
    assert sorted(p.name for p in (out / "cells").iterdir()) == ["0.json", "1.json", "2.json"]


def test_a_failed_cell_is_reported_and_the_others_run(tmp_path: Path) -> None:
    sweep = setup_sweep(tmp_path)
    out = tmp_path / "out"
    sweep_ok(sweep, out)
    (out / "cells" / "2.jsonl.gz").mkdir()  # cell 2's recording cannot be written
    result = invoke("sim", "sweep", str(sweep), "--out", str(out), "--jobs", "2", "--record")
    assert result.exit_code == 1
    assert result.output.startswith("8 cells: 7 run, 0 already done, 1 failed;")
    assert "cell 2 failed: IsADirectoryError: [Errno 21] Is a directory: " in result.output
    assert f"(all of it in {out / 'cells' / '2.error'})" in result.output
    assert "Traceback" in (out / "cells" / "2.error").read_text()
    rows = table(out)
    assert rows[2]["error"].startswith("IsADirectoryError: [Errno 21] Is a directory")
    assert [row["error"] for i, row in enumerate(rows) if i != 2] == [""] * 7
    for n in (0, 1, 3, 4, 5, 6, 7):
        assert (out / "cells" / f"{n}.jsonl.gz").is_file()
    replayed = invoke("sim", "replay", str(out / "cells" / "5.jsonl.gz"))
    assert replayed.exit_code == 0 and "no divergence" in replayed.output
    (out / "cells" / "2.jsonl.gz").rmdir()  # fixed: a re-run runs only cell 2
    assert sweep_ok(sweep, out, "--record").startswith("8 cells: 1 run, 7 already done, 0 failed")
    assert not (out / "cells" / "2.error").exists()
    assert table(out)[2]["error"] == ""


def test_xce_sim_compare_reads_any_two_cells(tmp_path: Path) -> None:
    sweep = setup_sweep(tmp_path)
    out = tmp_path / "out"
    sweep_ok(sweep, out)
    result = invoke("sim", "compare", str(out / "cells" / "0.json"),
                    str(out / "cells" / "7.json"))
    assert result.exit_code == 0, result.output
    assert "Compared with 0" in result.output
    assert "7 - 0" in result.output


BAD = [
    ("axes: {catalog.idle_tim: [1]}",
     "sweep.yaml:3: axes.catalog.idle_tim: unknown key path: the cluster file has no key "
     "'catalog.idle_tim'"),
    ("axes: {polic.persistence: [1]}",
     "sweep.yaml:3: axes.polic.persistence: unknown key path: the cluster file has no key "
     "'polic'"),
    ("axes: {catalog.templates.3.max: [1]}",
     "sweep.yaml:3: axes.catalog.templates.3.max: unknown key path: catalog.templates has "
     "1 item(s): no item '3'"),
    ("axes: {catalog.idle_time.x: [1]}",
     "sweep.yaml:3: axes.catalog.idle_time.x: unknown key path: catalog.idle_time is a "
     "number (300), not a mapping or a list"),
    ("axes: {catalog.idle_time: []}",
     "sweep.yaml:3: axes.catalog.idle_time: an axis needs at least one value"),
    ("axes: {catalog.idle_time: 300}",
     "sweep.yaml:3: axes.catalog.idle_time: expected a list, got a number (300)"),
    ("axes:\n  catalog.idle_time:\n    - 300\n    - ten",
     "sweep.yaml:6: axes.catalog.idle_time[1]: expected a number, got a string ('ten')"),
    ("axes:\n  catalog.templates.0.max: [2, -1]",
     "sweep.yaml:4: axes.catalog.templates.0.max[1]: max must be >= 0"),
    ("axes:\n  policy.persistence: [0, true]",
     "sweep.yaml:4: axes.policy.persistence[1]: expected a number, got a boolean (true)"),
    ("axes: {catalog.idle_time: [300, 300]}",
     "sweep.yaml:3: axes.catalog.idle_time[1]: value 300 is given twice"),
    ("seeds: []", "sweep.yaml:3: seeds: give at least one seed (or leave seeds out)"),
    ("seeds: [1, x]", "sweep.yaml:3: seeds[1]: expected an integer, got a string ('x')"),
    ("seeds: [1]\naxes: {simulation.seed: [1]}",
     "sweep.yaml:4: axes.simulation.seed: give the seeds in `seeds:`, not as an axis as well"),
    ("exclude: [{policy.persistence: 0}]",
     "sweep.yaml:3: exclude[0].policy.persistence: not an axis of this sweep (it has: "
     "workload)"),
    ("axes: {policy.persistence: [0, 60]}\nexclude: [{policy.persistence: 30}]",
     "sweep.yaml:4: exclude[0].policy.persistence: 30 is not a value of policy.persistence"),
    ("axes: {policy.persistence: [0]}\nexclude: [{policy.persistence: 0}]",
     "sweep.yaml:4: exclude: every combination is excluded: no cell to run"),
    ("firts: 10", "sweep.yaml:3: firts: unknown key 'firts'"),
    ("first: -1", "sweep.yaml:3: first: first must be >= 0"),
]


@pytest.mark.parametrize(("extra", "message"), BAD, ids=[m.split(": ")[1] for _, m in BAD])
def test_bad_input_is_one_error_before_any_cell_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str, message: str) -> None:
    setup_sweep(tmp_path, f"base: cluster.yaml\nworkloads: [jobs.yaml]\n{extra}\n")
    monkeypatch.chdir(tmp_path)  # the messages name the file as given
    result = invoke("sim", "sweep", "sweep.yaml", "--out", "out")
    assert result.exit_code == 2
    assert result.output == f"Error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_bad_base_or_workload_names_its_file(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    setup_sweep(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s1.yaml").write_text("base: nothere.yaml\nworkloads: [jobs.yaml]\n")
    result = invoke("sim", "sweep", "s1.yaml", "--out", "out")
    assert (result.exit_code, result.output) == (2, (
        "Error: nothere.yaml:0: : cannot read: No such file or directory (the base "
        "cluster file of s1.yaml)\n"))
    (tmp_path / "s2.yaml").write_text("base: cluster.yaml\nworkloads:\n  - jobs.yaml\n"
                                      "  - gone.swf\n")
    result = invoke("sim", "sweep", "s2.yaml", "--out", "out")
    assert (result.exit_code, result.output) == (2, (
        "Error: s2.yaml:4: workloads[1]: cannot read gone.swf: No such file or directory\n"))
    (tmp_path / "bad.yaml").write_text("jobs:\n  - {id: 1, submit: 0, run: 10, n: 1, "
                                       "res: 'rusage[foo=1]'}\n")
    (tmp_path / "s3.yaml").write_text("base: cluster.yaml\nworkloads: [bad.yaml]\n")
    result = invoke("sim", "sweep", "s3.yaml", "--out", "out")
    assert (result.exit_code, result.output) == (2, (
        "Error: s3.yaml: cell 0: bad.yaml: job 1: requirement error at column 8: unknown "
        "resource 'foo'\n"))
    (tmp_path / "cluster.yaml").write_text("hosts: 3\n")
    result = invoke("sim", "sweep", "sweep.yaml", "--out", "out")
    assert (result.exit_code, result.output) == (2, (
        "Error: cluster.yaml:1: hosts: expected a list, got a number (3)\n"))
    assert not (tmp_path / "out").exists()


def test_killed_halfway_a_rerun_completes_the_rest(tmp_path: Path) -> None:
    """A real SIGKILL of the sweep (and its workers) once some cells are done: the
    re-run runs only the others, and every cell equals an uninterrupted sweep's."""
    jobs = "jobs:\n" + "".join(
        f'  - {{ids: "{100 * k + 1}-{100 * k + 60}", submit: {3000 * k}, run: 900, n: 4}}\n'
        for k in range(20))
    sweep = setup_sweep(tmp_path, SWEEP.replace("[0, 120]", "[0, 30, 120]"))
    (tmp_path / "jobs.yaml").write_text(jobs)
    out = tmp_path / "out"
    process = subprocess.Popen([XCE, "sim", "sweep", str(sweep), "--out", str(out), "-j", "1"],
                               start_new_session=True, stdout=subprocess.DEVNULL)
    done: list[Path] = []
    while len(done) < 2 and process.poll() is None:
        time.sleep(0.01)
        done = list((out / "cells").glob("*.json")) if (out / "cells").is_dir() else []
    busy = invoke("sim", "sweep", str(sweep), "--out", str(out))  # one at a time
    assert (busy.exit_code, busy.output) == (
        1, f"Error: {out} is in use by another `xce sim sweep`\n")
    os.killpg(process.pid, 9)
    assert process.wait() == -9
    killed = mtimes(out)
    assert 2 <= len(killed) < 12, killed
    assert not (out / "results.csv").exists()
    resumed = sweep_ok(sweep, out)
    assert resumed.startswith(f"12 cells: {12 - len(killed)} run, {len(killed)} already done,")
    assert {name: mtimes(out)[name] for name in killed} == killed
    whole = tmp_path / "whole"
    sweep_ok(sweep, whole)
    for n in range(12):
        assert without_timing(json.loads((out / "cells" / f"{n}.json").read_text())) == (
            without_timing(json.loads((whole / "cells" / f"{n}.json").read_text())))
    assert [without_timing(r) for r in table(out)] == [without_timing(r) for r in table(whole)]


def test_the_report_ranks_finds_the_front_and_draws_each_axis(tmp_path: Path) -> None:
    sweep = setup_sweep(tmp_path)
    out, report = tmp_path / "out", tmp_path / "report"
    output = sweep_ok(sweep, out, "--report", str(report), "--objective", "wait_p95")
    assert output.endswith(f"wrote {report / 'index.html'}\n")
    assert sorted(p.name for p in report.iterdir()) == [
        "axis-1.png", "axis-2.png", "index.html", "pareto-1.png", "ranked.csv"]
    for name in ("axis-1.png", "axis-2.png", "pareto-1.png"):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (report / "ranked.csv").open(newline="") as stream:
        ranked = list(csv.DictReader(stream))
    # what the report must say, worked out here from the cells' summaries
    configs = {}
    for row in table(out):
        summary = json.loads((out / "cells" / f"{row['cell']}.json").read_text())
        key = (row["catalog.idle_time"], row["policy.persistence"])
        configs.setdefault(key, []).append(
            (summary["wait_p95"], summary["wait_mean"], sum(summary["host_hours"].values())))
    means = {key: tuple(sum(v[i] for v in vs) / len(vs) for i in range(3))
             for key, vs in configs.items()}
    order = sorted(means, key=lambda key: means[key][0])
    front = {key for key in means if not any(
        o[1] <= means[key][1] and o[2] <= means[key][2] and o[1:] != means[key][1:]
        for o in means.values())}
    assert [(r["catalog.idle_time"], r["policy.persistence"]) for r in ranked] == order
    assert [r["rank"] for r in ranked] == ["1", "2", "3", "4"]
    assert list(ranked[0]) == ["workload", "rank", "catalog.idle_time", "policy.persistence",
                               "wait_p95", "wait_mean", "host_hours", "pareto", "cells"]
    for r in ranked:
        key = (r["catalog.idle_time"], r["policy.persistence"])
        assert float(r["wait_p95"]) == pytest.approx(means[key][0])
        assert float(r["host_hours"]) == pytest.approx(means[key][2])
        assert r["pareto"] == str(int(key in front))
    assert 1 <= len(front) < 4
    page = (report / "index.html").read_text()
    assert "ranked by <b>wait_p95</b>" in page and "cost: <b>host_hours</b>" in page
    assert page.count("\u2605") == len(front)
    result = invoke("sim", "sweep", str(sweep), "--out", str(out), "--report", str(report),
                    "--objective", "wait_mena")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1].startswith(
        "Error: --objective: 'wait_mena' is not a figure of the cells' summaries (they "
        "have: bsld_mean, finished, host_hours.cloud,")
