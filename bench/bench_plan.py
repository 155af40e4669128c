"""Session with a plan (issue 17, "Speed"): reservations and backfill at scale.

bench_session.py's case (b) with run limits: 6,000 hosts of 16 slots, 500,000 pending
jobs in 1,000 shapes (each job a run limit drawn from a small set, 5 % none), 2 % of
the hosts free. The other hosts each run one 16-slot job that started at a different
time with its own limit, so the profile has change points all over the next days
(a few jobs are past their limit, planned to end one second from now; 1 % have no
limit, planned never to end). Every queue has `backfill: true`.

Two states, built alike but for `reserve_depth`: 100 (the target: a whole session in
at most 2 s) and 0 (today's decisions, no reservation: the baseline; about 0.2 s in
the issue for the compiled core without limits). Each is built and timed over --runs
sessions in a fresh process, so each peak RSS is its own.

Run: python bench/bench_plan.py [--runs 5] [--depth 100] [--pending 500000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

import msgspec
from bench_session import SLOTS, cluster, shapes
from common import machine, median_session, peak_rss_mb

from xce.model.cluster import ClusterConfig
from xce.model.events import JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState
from xce.tuning import settle_heap

NOW = 200_000.0
# Requested times as users give them (s): 10 min to 2 days.
LIMITS = (600.0, 1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0, 2 * 86400.0)


def planned(hosts: int, depth: int) -> ClusterConfig:
    base = cluster(hosts)
    queues = tuple(msgspec.structs.replace(q, backfill=True) for q in base.queues)
    return msgspec.structs.replace(base, queues=queues, reserve_depth=depth)


def build(hosts: int, pending: int, shape_count: int, free_fraction: float, depth: int,
          seed: int) -> SchedulerState:
    rng = random.Random(seed)
    state = SchedulerState(planned(hosts, depth))
    job_id = 0
    free_hosts = int(hosts * free_fraction)
    for i in range(hosts - free_hosts):
        job_id += 1
        kind = rng.random()
        if kind < 0.01:  # no limit: planned never to end
            limit, start = None, NOW - rng.uniform(0, 86400)
        elif kind < 0.03:  # past its limit: planned to end at now + 1
            limit = rng.choice(LIMITS)
            start = NOW - limit - rng.uniform(1, 3600)
        else:  # planned to end somewhere in the next limit's span
            limit = rng.choice(LIMITS)
            start = NOW - rng.uniform(0, limit - 1)
        state.apply(JobSubmitted(JobSpec(id=job_id, user="filler", queue="normal", n=SLOTS,
                                         submit=start, run_limit=limit)))
        state.apply(JobStarted(job=job_id, hosts={f"h{i:05d}": SLOTS}, time=start))
    kinds = shapes(shape_count, rng)
    users = [f"u{i:03d}" for i in range(200)]
    queues = ["high", "normal", "normal", "low"]
    for i in range(pending):
        job_id += 1
        n, res = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds)
        limit = None if rng.random() < 0.05 else rng.choice(LIMITS)
        state.apply(JobSubmitted(JobSpec(
            id=job_id, user=rng.choice(users), queue=rng.choice(queues), n=n, res=res,
            submit=float(i // 10), run_limit=limit)))
    return state


def case(args: argparse.Namespace, depth: int) -> dict[str, float]:
    """Build the state with `depth`, time --runs sessions; the figures as a dict."""
    started = time.perf_counter()
    state = build(args.hosts, args.pending, args.shapes, 0.02, depth, 1)
    built = time.perf_counter() - started
    settle_heap()  # as the simulator and the controller do after loading
    median, times, result = median_session(state, NOW, args.runs)
    stats = result.stats
    return {
        "depth": depth, "median": median, "min": min(times), "max": max(times),
        "dispatched": stats.dispatched, "pending": stats.pending,
        "evaluations": stats.evaluations,
        "reservations": len(getattr(result, "reservations", [])),
        "backfilled": len(getattr(result, "backfilled", [])),
        "session_ms": getattr(stats, "session_ms", 0.0), "built": built,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=6_000)
    parser.add_argument("--pending", type=int, default=500_000)
    parser.add_argument("--shapes", type=int, default=1_000)
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # one depth, JSON out
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(case(args, args.case)))
        return
    print(f"machine: {machine()}")
    print(f"{args.hosts:,} hosts, {args.pending:,} pending jobs in {args.shapes:,} shapes, "
          f"2 % of hosts free, run limits, backfill: true on every queue")
    medians = {}
    for depth in (0, args.depth):  # each in a fresh process: its own peak memory
        argv = [sys.executable, __file__, "--runs", str(args.runs), "--hosts",
                str(args.hosts), "--pending", str(args.pending), "--shapes",
                str(args.shapes), "--case", str(depth)]
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        medians[depth] = r["median"]
        target = "target <= 2 s" if depth else "baseline (no reservation)"
        print(f"reserve_depth {depth}: session median {r['median']:.3f} s over {args.runs} "
              f"runs (min {r['min']:.3f}, max {r['max']:.3f}); {target}")
        print(f"  dispatched {r['dispatched']} ({r['backfilled']} backfilled), reservations "
              f"{r['reservations']}, pending {r['pending']}, evaluations "
              f"{r['evaluations']}; stats.session_ms {r['session_ms']:.1f} (last run); "
              f"state built in {r['built']:.1f} s; peak RSS {r['peak_rss_mb']:.0f} MB "
              f"(<= 2048)")
    if medians[0]:
        print(f"reserve_depth {args.depth} / reserve_depth 0: "
              f"{medians[args.depth] / medians[0]:.1f} x")


if __name__ == "__main__":
    main()
