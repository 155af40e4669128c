"""Policy sweep benchmark (issue 25): what `xce sim sweep` adds to the cells it runs.

The grid: 24 whole-trace cells of SDSC-SP2 (54,034 jobs; `--first N` for fewer) on
the cluster `xce sim cluster --elastic 0.5` sizes for it (64 static 1-slot hosts and up
to 64 cloud ones, 120 s lead time), with 5 % of requested hosts failing so that the
seeds differ: 4 idle times x 3 persistence values x 2 seeds.

1. Each cell alone, one after the other: `xce sim run CELL.yaml --workload T --seed S
   --json` in a fresh process; the sum of the runs' simulation times (the summaries'
   `wall_seconds`) and of the processes' wall times (start-up and reading the trace
   included).
2. The sweep, `xce sim sweep --jobs CORES` (the local engine) in a fresh process and
   results directory: its wall time and the largest peak RSS of it and its workers.

Targets: sweep wall <= 1.2 x (sum of the simulation times / cores); the sweep's
overhead, (sweep wall x cores - sum of simulation times) / cells, <= 1 s per cell.
Every cell's summary is checked against its single run (timing fields aside).

Run: python bench/bench_sweep.py [--traces DIR] [--jobs 2] [--first N]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import machine

IDLE_TIMES = (300, 600, 1200, 1800)
PERSISTENCES = (0, 60, 300)
SEEDS = (1, 2)
TRACE = "SDSC-SP2-1998-4.2-cln.swf.gz"
XCE = [str(Path(sys.executable).with_name("xce"))]


def cell_cluster(base: str, idle_time: int, persistence: int) -> str:
    """The base cluster with the cell's values (the base has no policy section)."""
    text = base.replace("idle_time: 600", f"idle_time: {idle_time}")
    text = text.replace("lead_time: 120", "lead_time: 120\n      failure_rate: 0.05")
    return text + f"policy:\n  persistence: {persistence}\n"


def single_runs(work: Path, trace: Path, base: str, first: list[str]) -> list[dict[str, Any]]:
    """Each cell alone, in cell order (idle time, persistence, seed)."""
    out = []
    for idle in IDLE_TIMES:
        for persistence in PERSISTENCES:
            cluster = work / f"cell-{idle}-{persistence}.yaml"
            cluster.write_text(cell_cluster(base, idle, persistence))
            for seed in SEEDS:
                started = time.perf_counter()
                done = subprocess.run([*XCE, "sim", "run", str(cluster), "--workload",
                                       str(trace), *first, "--seed", str(seed), "--json"],
                                      check=True, capture_output=True, text=True)
                summary = json.loads(done.stdout)
                summary["process_wall"] = time.perf_counter() - started
                out.append(summary)
                print(f"  alone idle={idle} persistence={persistence} seed={seed}: "
                      f"{summary['wall_seconds']:.2f} s simulated, "
                      f"{summary['process_wall']:.2f} s process", flush=True)
    return out


def sweep(work: Path, trace: Path, base: str, jobs: int,
          first: list[str]) -> tuple[float, float, Path]:
    """The sweep's wall time, the largest peak RSS (MB) of it and its workers, and
    its results directory."""
    (work / "base.yaml").write_text(cell_cluster(base, 600, 60))
    window = f"first: {first[1]}\n" if first else ""
    (work / "sweep.yaml").write_text(
        f"base: base.yaml\nworkloads: [{trace}]\n{window}axes:\n"
        f"  catalog.idle_time: {list(IDLE_TIMES)}\n"
        f"  policy.persistence: {list(PERSISTENCES)}\nseeds: {list(SEEDS)}\n")
    out = work / "results"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([*XCE, "sim", "sweep", str(work / "sweep.yaml"), "--out", str(out),
                    "--jobs", str(jobs)], check=True)
    wall = time.perf_counter() - started
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "traces")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--first", type=int, help="only the trace's first N jobs")
    args = parser.parse_args()
    first = ["--first", str(args.first)] if args.first else []
    trace = args.traces / TRACE
    base = subprocess.run([*XCE, "sim", "cluster", "--workload", str(trace), "--elastic",
                           "0.5"], check=True, capture_output=True, text=True).stdout
    import xce.sched.realpass

    compiled = xce.sched.realpass.__file__.endswith(".so")
    print(f"{machine()}; xce {'compiled' if compiled else 'pure Python'}; {TRACE}, "
          f"{' '.join(first) or 'whole trace'}, "
          f"{len(IDLE_TIMES) * len(PERSISTENCES) * len(SEEDS)} cells", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wall, peak, out = sweep(work, trace, base, args.jobs, first)
        print(f"sweep --jobs {args.jobs}: {wall:.1f} s wall, largest peak RSS {peak:.0f} MB",
              flush=True)
        alone = single_runs(work, trace, base, first)
        for n, single in enumerate(alone):
            cell = json.loads((out / "cells" / f"{n}.json").read_text())
            assert {k: v for k, v in cell.items() if k != "wall_seconds"} == {
                k: v for k, v in single.items() if k not in ("wall_seconds", "process_wall")
            }, f"cell {n} differs from its single run"
        simulated = sum(s["wall_seconds"] for s in alone)
        processes = sum(s["process_wall"] for s in alone)
        in_sweep = sum(json.loads((out / "cells" / f"{n}.json").read_text())["wall_seconds"]
                       for n in range(len(alone)))
    bound = 1.2 * simulated / args.jobs
    overhead = (wall * args.jobs - simulated) / len(alone)
    print(f"cells alone: {simulated:.1f} s simulated in all, {processes:.1f} s of processes "
          f"in all; the same cells' simulation times inside the sweep: {in_sweep:.1f} s")
    print(f"target: sweep {wall:.1f} s <= 1.2 x {simulated:.1f} / {args.jobs} = {bound:.1f} s: "
          f"{'met' if wall <= bound else 'MISSED'}")
    print(f"overhead per cell: ({wall:.1f} x {args.jobs} - {simulated:.1f}) / {len(alone)} = "
          f"{overhead:.2f} s (<= 1 s: {'met' if overhead <= 1 else 'MISSED'})")
    print("every cell equals its single run (timing fields aside)")


if __name__ == "__main__":
    main()
