"""Fairshare and preemption benchmark (issue 23).

(a) bench_session.py's case b (6,000 hosts, 500,000 pending jobs in 1,000 shapes, 2 %
    of hosts free) with every queue a fairshare queue (`fairshare: {default: 1}`),
    for several numbers of users: a fairshare queue keeps one bucket per user and
    requirement set (sched/share_order.py), so the session's cost grows with the
    buckets, not with the jobs. The same state without fairshare is the reference.
(b) with --trace: the whole HPC2N trace on 240 1-slot hosts with three queues
    (`urgent` preempting `low` by requeue, `normal` and `low` fairshare; 5 / 70 / 25 %
    of the jobs by `simulation.queue_mix`), EASY backfill (reserve_depth 1), run as
    `xce sim run --json` in a fresh process (the `xce` beside this Python: run the
    bench with an installed, compiled build's Python for the compiled figure): wall
    time, peak memory, preemptions and waits per queue.

Run: python bench/bench_fairshare.py [--runs 3] [--users 20 200] [--trace PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_session import build
from common import machine

from xce.sched import run_session
from xce.tuning import settle_heap

HPC2N = Path(__file__).resolve().parents[2] / "shared" / "traces" / "HPC2N-2002-2.2-cln.swf.gz"
CLUSTER = """\
cluster: hpc2n-three-queues
session_interval: 1
reserve_depth: 1
hosts:
  - {name: "h[0001-0240]", slots: 1}
queues:
  - {name: urgent, priority: 70, backfill: true, preempt: [low], preempt_action: requeue}
  - {name: normal, priority: 30, backfill: true, fairshare: {default: 1}}
  - {name: low, priority: 10, backfill: true, fairshare: {default: 1}}
simulation:
  enforce_run_limits: false
  queue_mix: {urgent: 5, normal: 70, low: 25}
"""


def sessions(runs: int, users: list[int]) -> None:
    cases = [("without fairshare", False, 200)] + [
        (f"fairshare, {count} users", True, count) for count in users
    ]
    for label, fair, count in cases:
        state = build(6_000, 500_000, 1_000, 0.02, 1, fairshare=fair, user_count=count)
        settle_heap()
        cpu: list[float] = []
        for _ in range(runs):  # (CPU time: the shared machine's load inflates wall time)
            started = time.process_time()
            result = run_session(state, 1000.0)
            cpu.append(time.process_time() - started)
        print(
            f"  {label}: buckets {len(state.buckets)}, session CPU median "
            f"{statistics.median(cpu):.3f} s (min {min(cpu):.3f}), dispatched "
            f"{result.stats.dispatched}"
        )


def trace(path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "cluster.yaml"
        config.write_text(CLUSTER)
        started = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", str(Path(sys.executable).parent / "xce"), "sim",
             "run", str(config), "--workload", str(path), "--json"],
            capture_output=True, text=True, check=True,
        )
        wall = time.perf_counter() - started
    summary = json.loads(done.stdout)
    peak = int(done.stderr.strip().splitlines()[-1]) / 1024
    print(f"  HPC2N three queues: wall {wall:.1f} s (sim's own {summary['wall_seconds']} s), "
          f"peak {peak:.0f} MB, finished {summary['finished']}, "
          f"preemptions {summary['preemptions']}")
    for queue, row in summary["queues"].items():
        print(f"    {queue}: finished {row['finished']}, wait mean {row['wait_mean']:.0f} s, "
              f"max {row['wait_max']:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--users", type=int, nargs="*", default=[20, 200])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--no-sessions", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if not args.no_sessions:
        print("a: 6,000 hosts, 500,000 pending, 1,000 shapes, 2% hosts free")
        sessions(args.runs, args.users)
    if args.trace is not None:
        print("b: whole trace, fairshare + backfill + preemption")
        trace(args.trace)


if __name__ == "__main__":
    main()
