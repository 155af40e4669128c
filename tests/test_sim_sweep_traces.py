"""The sweep's acceptance grid (issue 25) on the shared traces: 3 traces x 4 idle times x
3 persistence values x 2 seeds = 72 cells on each trace's first 5,000 jobs, with the
local engine. Killed halfway (a real SIGKILL of the sweep and its workers), a re-run
completes the rest without recomputing a cell; another re-run does nothing; every one
of the 72 cells equals the same `xce sim run` made alone (all of them are checked),
timing fields aside; and the Ray engine (a local `ray.init()`, Ray from the test extra)
gives the same 72 cells and the same table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_sim_sweep import table

from xce.sim.sweep_cells import without_timing

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
NAMES = ("KTH-SP2-1996-2.1-cln", "NASA-iPSC-1993-3.1-cln", "SDSC-SP2-1998-4.2-cln")
IDLE_TIMES = (60, 300, 600, 1800)
PERSISTENCES = (0, 60, 300)
SEEDS = (1, 2)
FIRST = 5000
# 64 static 1-slot hosts and up to 64 cloud ones whose lead time is drawn (the seed
# matters), as `xce sim cluster --elastic 0.5` sizes SDSC-SP2.
CLUSTER = """\
cluster: acceptance
session_interval: 10
hosts:
  - {{name: "n[001-064]", slots: 1}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  idle_time: {idle_time}
  templates:
    - {{name: cloud, provider: sim, slots: 1, max: 64}}
policy:
  persistence: {persistence}
simulation:
  providers:
    sim:
      lead_time: {{dist: exponential, mean: 120}}
"""
XCE = os.environ.get("XCE_TEST_CLI") or str(Path(sys.executable).with_name("xce"))


def cell_count(out: Path) -> dict[str, int]:
    cells = out / "cells"
    if not cells.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in cells.iterdir() if p.suffix == ".json"}


def alone(tmp_path: Path, n: int, workload: str, seed: int, idle_time: int,
          persistence: int) -> dict[str, Any]:
    """Cell `n`'s `xce sim run`, made alone (a process of its own) on a cluster file
    written here."""
    cluster = tmp_path / f"alone-{n}.yaml"
    cluster.write_text(CLUSTER.format(idle_time=idle_time, persistence=persistence))
    done = subprocess.run(
        [XCE, "sim", "run", str(cluster), "--workload", workload, "--first", str(FIRST),
         "--seed", str(seed), "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def same_cells(out: Path, other: Path) -> None:
    """Every cell's summary and the table of `other` are `out`'s (timing aside)."""
    for n in range(72):
        cell, twin = (json.loads((d / "cells" / f"{n}.json").read_text()) for d in (out, other))
        assert without_timing(cell) == without_timing(twin), n
    assert [without_timing(r) for r in table(other)] == [
        without_timing(r) for r in table(out)
    ]


@pytest.mark.skipif(not TRACES.is_dir(), reason="no shared traces beside the repository")
def test_acceptance_grid_killed_resumed_equal_to_single_runs_and_to_ray(
    tmp_path: Path,
) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER.format(idle_time=600, persistence=60))
    workloads = "".join(f"  - {TRACES / name}.swf.gz\n" for name in NAMES)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"base: cluster.yaml\nworkloads:\n{workloads}first: {FIRST}\naxes:\n"
                     f"  catalog.idle_time: {list(IDLE_TIMES)}\n"
                     f"  policy.persistence: {list(PERSISTENCES)}\nseeds: {list(SEEDS)}\n")
    out = tmp_path / "out"
    command = [XCE, "sim", "sweep", str(sweep), "--out", str(out), "--jobs", "2"]
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL)
    while len(cell_count(out)) < 10 and process.poll() is None:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    killed = cell_count(out)
    assert 10 <= len(killed) < 72
    assert not (out / "results.csv").exists()

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == (f"72 cells: {72 - len(killed)} run, {len(killed)} already "
                              f"done, 0 failed; {out / 'results.csv'}\n")
    finished = cell_count(out)
    assert len(finished) == 72
    assert {name: finished[name] for name in killed} == killed  # none recomputed
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.stdout.startswith("72 cells: 0 run, 72 already done, 0 failed;")
    assert cell_count(out) == finished

    rows = table(out)
    expected = [(f"{TRACES / name}.swf.gz", seed, idle, persistence)
                for name in NAMES for idle in IDLE_TIMES for persistence in PERSISTENCES
                for seed in SEEDS]
    assert [(r["workload"], int(r["seed"]), int(r["catalog.idle_time"]),
             int(r["policy.persistence"])) for r in rows] == expected
    with ThreadPoolExecutor(2) as pool:  # (two single runs at a time: two cores)
        singles = list(pool.map(lambda item: alone(tmp_path, item[0], *item[1]),
                                enumerate(expected)))
    for n, single in enumerate(singles):
        cell = json.loads((out / "cells" / f"{n}.json").read_text())
        assert without_timing(cell) == without_timing(single), n
    assert len({r["wait_mean"] for r in rows}) > 36  # the axes and seeds matter

    import ray  # the test extra installs it: a missing Ray fails here, loudly

    del ray
    on_ray = tmp_path / "ray"
    done = subprocess.run([*command[:5], str(on_ray), "--engine", "ray", "--jobs", "2"],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"72 cells: 72 run, 0 already done, 0 failed; {on_ray / 'results.csv'}\n"
    same_cells(out, on_ray)
