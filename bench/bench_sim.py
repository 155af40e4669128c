"""Simulator benchmark (issue: the simulator).

Whole traces through `xce sim run`'s code path: HPC2N (202,871 jobs, 240 processors)
with elastic supply (half the machine static, the rest one template, 120 s lead time,
600 s idle time) and SDSC-SP2 static, plus SDSC-SP2 elastic. Targets: HPC2N elastic
<= 20 s, SDSC-SP2 <= 5 s, peak memory <= 2 GB. For comparison (from the issue),
AccaSim 1.1.3 needed 96 s (EASY) and 162 s (FIFO) for HPC2N and 48 s (EASY) for
SDSC-SP2 on this kind of machine.

Each case runs in a fresh process (so peak memory is the case's own); prints wall
time (median of --runs), CPU time, sessions, jobs and peak RSS, and whether the xce it
imports is compiled (an installed XCE, docs/performance.md) or pure Python (an
editable install, or a --baseline source tree). Sessions run without pend reasons,
as `xce sim run` does.

`--baseline SRC` also runs every case on another source tree (e.g. the last commit:
`git archive HEAD src | tar -x -C /tmp/before`, then `--baseline /tmp/before/src`),
alternating with the current one, and checks that both give the same summary.

Run: python bench/bench_sim.py [--runs 3] [--traces DIR] [--baseline SRC] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
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
try:  # without pend reasons, as `xce sim run` (older code has no such option)
    simulator = Simulator(sized_cluster(workload, elastic=elastic), workload, reasons=False)
except TypeError:
    simulator = Simulator(sized_cluster(workload, elastic=elastic), workload)
settle_heap()
simulator.run()
summary = simulator.summary()
summary["bench_wall"] = time.perf_counter() - started
summary["bench_cpu"] = time.process_time() - cpu
summary["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import xce.sched.realpass
summary["compiled"] = xce.sched.realpass.__file__.endswith(".so")
print(json.dumps(summary))
"""


def run_case(path: Path, elastic: float, src: str | None = None) -> dict[str, float]:
    env = dict(os.environ)
    if src is not None:  # another source tree first on the path
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", CASE, str(path), str(elastic)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def same_run(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two summaries agree on everything but the timings."""
    skip = {"wall_seconds", "bench_wall", "bench_cpu", "peak_rss_mb", "compiled"}
    return {k: v for k, v in a.items() if k not in skip} == {
        k: v for k, v in b.items() if k not in skip
    }


def show(label: str, results: list[dict[str, float]], target: float, accasim: float) -> None:
    walls = [r["bench_wall"] for r in results]
    cpus = [r["bench_cpu"] for r in results]
    last = results[-1]
    print(
        f"{label} [{'compiled' if last.get('compiled') else 'pure Python'}]: wall median "
        f"{statistics.median(walls):.1f} s "
        f"({', '.join(f'{w:.1f}' for w in walls)}), CPU median "
        f"{statistics.median(cpus):.1f} s; target <= {target:g} s; AccaSim {accasim:g} s"
    )
    print(
        f"  jobs {last['jobs']}, sessions {last['sessions']}, wait mean "
        f"{last['wait_mean']:.0f} s, utilization {last['utilization']:.3f}, hosts requested "
        f"{last['hosts_requested']}, peak RSS {last['peak_rss_mb']:.0f} MB (<= 2048)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces"
    )
    parser.add_argument("--baseline", help="source tree to compare with (its src/ directory)")
    parser.add_argument("--only", help="run only cases whose label contains this")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    cases = [
        ("HPC2N elastic 0.5", "HPC2N-2002-2.2-cln.swf.gz", 0.5, 20.0, 96.0),
        ("SDSC-SP2 static", "SDSC-SP2-1998-4.2-cln.swf.gz", 0.0, 5.0, 48.0),
        ("SDSC-SP2 elastic 0.5", "SDSC-SP2-1998-4.2-cln.swf.gz", 0.5, 5.0, 48.0),
    ]
    for label, name, elastic, target, accasim in cases:
        if args.only and args.only not in label:
            continue
        results: list[dict[str, float]] = []
        before: list[dict[str, float]] = []
        for _ in range(args.runs):  # alternate, so that both see the same machine
            if args.baseline:
                before.append(run_case(args.traces / name, elastic, args.baseline))
            results.append(run_case(args.traces / name, elastic))
        if before:
            show(f"{label} (baseline)", before, target, accasim)
        show(label, results, target, accasim)
        if before:
            same = all(same_run(b, r) for b in before for r in results)
            print(f"  summaries {'identical' if same else 'DIFFER'} to the baseline's")


if __name__ == "__main__":
    main()
