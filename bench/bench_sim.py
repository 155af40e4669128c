"""Simulator benchmark (issue: the simulator).

Whole traces through `xce sim run`'s code path: HPC2N (202,871 jobs, 240 processors)
with elastic supply (half the machine static, the rest one template, 120 s lead time,
600 s idle time) and SDSC-SP2 static, plus SDSC-SP2 elastic. Targets: HPC2N elastic
<= 20 s, SDSC-SP2 <= 5 s, peak memory <= 2 GB. For comparison (from the issue),
AccaSim 1.1.3 needed 96 s (EASY) and 162 s (FIFO) for HPC2N and 48 s (EASY) for
SDSC-SP2 on this kind of machine.

Each case runs in a fresh process (so peak memory is the case's own); prints wall
time (median of --runs), CPU time, sessions, jobs and peak RSS.

Run: python bench/bench_sim.py [--runs 3] [--traces DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import machine

CASE = """
import json, resource, sys, time
from xce.sim.driver import Simulator
from xce.sim.sizing import sized_cluster
from xce.sim.workload import load_workload
from xce.tuning import settle_heap
path, elastic = sys.argv[1], float(sys.argv[2])
started = time.perf_counter(); cpu = time.process_time()
workload = load_workload(path)
simulator = Simulator(sized_cluster(workload, elastic=elastic), workload)
settle_heap()
simulator.run()
summary = simulator.summary()
summary["bench_wall"] = time.perf_counter() - started
summary["bench_cpu"] = time.process_time() - cpu
summary["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(summary))
"""


def run_case(path: Path, elastic: float) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CASE, str(path), str(elastic)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces"
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    cases = [
        ("HPC2N elastic 0.5", "HPC2N-2002-2.2-cln.swf.gz", 0.5, 20.0, 96.0),
        ("SDSC-SP2 static", "SDSC-SP2-1998-4.2-cln.swf.gz", 0.0, 5.0, 48.0),
        ("SDSC-SP2 elastic 0.5", "SDSC-SP2-1998-4.2-cln.swf.gz", 0.5, 5.0, 48.0),
    ]
    for label, name, elastic, target, accasim in cases:
        results = [run_case(args.traces / name, elastic) for _ in range(args.runs)]
        walls = [r["bench_wall"] for r in results]
        cpus = [r["bench_cpu"] for r in results]
        last = results[-1]
        print(
            f"{label}: wall median {statistics.median(walls):.1f} s "
            f"({', '.join(f'{w:.1f}' for w in walls)}), CPU median "
            f"{statistics.median(cpus):.1f} s; target <= {target:g} s; AccaSim {accasim:g} s"
        )
        print(
            f"  jobs {last['jobs']}, sessions {last['sessions']}, wait mean "
            f"{last['wait_mean']:.0f} s, utilization {last['utilization']:.3f}, hosts requested "
            f"{last['hosts_requested']}, peak RSS {last['peak_rss_mb']:.0f} MB (<= 2048)"
        )


if __name__ == "__main__":
    main()
