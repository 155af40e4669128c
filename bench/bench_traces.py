"""Every shared trace, whole, through the simulator (issue: the simulator, acceptance).

For each trace in ../shared/traces: a static cluster sized from its header (the traced
machine), and the elastic scenario (half the machine static, the rest one template
with a 120 s lead time and 600 s idle time). Prints jobs, skipped, too large,
finished, waits, bounded slowdown, utilization, elastic supply figures and wall time.

Run: python bench/bench_traces.py [--traces DIR] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import machine

CASE = """
import json, resource, sys, time
from xce.sim.driver import Simulator
from xce.sim.sizing import machine_shape, sized_cluster
from xce.sim.workload import load_workload
from xce.tuning import settle_heap
path, elastic = sys.argv[1], float(sys.argv[2])
started = time.perf_counter()
workload = load_workload(path)
simulator = Simulator(sized_cluster(workload, elastic=elastic), workload)
settle_heap()
simulator.run()
summary = simulator.summary()
summary["machine"] = machine_shape(workload)
summary["bench_wall"] = time.perf_counter() - started
summary["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(summary))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces"
    )
    parser.add_argument("--only", help="run only traces whose name contains this")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(
        "| trace | cluster | jobs | skipped | too large | finished | wait mean s | "
        "wait p95 s | bsld | util | hosts req/joined/reclaimed | host-hours | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(args.traces.glob("*.swf.gz")):
        if args.only and args.only not in path.name:
            continue
        for elastic in (0.0, 0.5):
            out = subprocess.run(
                [sys.executable, "-c", CASE, str(path), str(elastic)],
                capture_output=True,
                text=True,
                check=True,
            )
            s = json.loads(out.stdout.strip().splitlines()[-1])
            nodes, slots = s["machine"]
            shape = (
                f"{nodes}x{slots} static"
                if not elastic
                else f"{nodes - round(nodes * elastic)}x{slots} + cloud {round(nodes * elastic)}"
            )
            hours = sum(s["host_hours"].values())
            print(
                f"| {path.name.split('.swf')[0]} | {shape} | {s['jobs']} | {s['skipped']} | "
                f"{s['too_large']} | {s['finished']} | {s['wait_mean']:.0f} | "
                f"{s['wait_p95']:.0f} | {s['bsld_mean']:.1f} | {s['utilization']:.3f} | "
                f"{s['hosts_requested']}/{s['hosts_joined']}/{s['hosts_reclaimed']} | "
                f"{hours:.0f} | {s['bench_wall']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
