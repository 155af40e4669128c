"""Scheduler core benchmark (issue: the scheduler core).

(a) 10,000 hosts, 100,000 pending jobs in 1,000 distinct shapes, cluster full.
(b) LSF's published large-site target: 6,000 hosts and 500,000 pending jobs; the
    cluster is busy with 2 % of slots free, so the session also dispatches.
Target for both: a whole session in at most 2 s, memory at most 2 GB.

Run: python bench/bench_session.py [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from common import machine, median_session, peak_rss_mb

from xce.model.cluster import ClusterConfig, HostSpec, Limit, Queue, ResourceDef
from xce.model.events import JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState
from xce.tuning import settle_heap

SLOTS = 16


def shapes(count: int, rng: random.Random) -> list[tuple[int, str]]:
    """`count` distinct (slots, requirement) shapes."""
    found: set[tuple[int, str]] = set()
    selects = ["", "select[type==X86_64] ", "select[mem>=64000] ", "select[ssd] "]
    spans = ["", "span[hosts=1]", "span[ptile=4]"]
    while len(found) < count:
        n = rng.choice([1, 1, 1, 2, 4, 8, 16])
        mem = rng.randrange(500, 8000, 100)
        res = f"{rng.choice(selects)}rusage[mem={mem}] {rng.choice(spans)}".strip()
        found.add((n, res))
    return sorted(found)


def cluster(hosts: int, fairshare: bool = False) -> ClusterConfig:
    """The bench's cluster; `fairshare`: every queue orders by LSF user fairshare
    (bench_fairshare.py)."""
    specs = tuple(
        HostSpec(
            name=f"h{i:05d}",
            slots=SLOTS,
            type="X86_64",
            resources={"mem": 128000.0 if i % 2 else 64000.0, "ssd": i % 3 == 0},
        )
        for i in range(hosts)
    )
    return ClusterConfig(
        cluster="bench",
        resources={
            "mem": ResourceDef("mem", "numeric", consumable=True),
            "ssd": ResourceDef("ssd", "boolean"),
        },
        hosts=specs,
        queues=tuple(
            Queue(name, priority, fairshare=(("default", 1.0),) if fairshare else None)
            for name, priority in (("high", 50), ("normal", 30), ("low", 10))
        ),
        limits=(Limit("per-user", slots=100000, users="each"),),
    )


def build(
    hosts: int, pending: int, shape_count: int, free_fraction: float, seed: int,
    fairshare: bool = False, user_count: int = 200,
) -> SchedulerState:
    rng = random.Random(seed)
    state = SchedulerState(cluster(hosts, fairshare))
    job_id = 0
    # Fill the cluster: one running 16-slot job per host, minus the free fraction.
    free_hosts = int(hosts * free_fraction)
    for i in range(hosts - free_hosts):
        job_id += 1
        state.apply(JobSubmitted(JobSpec(id=job_id, user="filler", queue="normal", n=SLOTS)))
        state.apply(JobStarted(job=job_id, hosts={f"h{i:05d}": SLOTS}, time=0))
    kinds = shapes(shape_count, rng)
    users = [f"u{i:03d}" for i in range(user_count)]
    queues = ["high", "normal", "normal", "low"]
    for i in range(pending):
        job_id += 1
        n, res = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds)
        state.apply(
            JobSubmitted(
                JobSpec(
                    id=job_id,
                    user=rng.choice(users),
                    queue=rng.choice(queues),
                    n=n,
                    res=res,
                    submit=float(i // 10),
                )
            )
        )
    return state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    cases = [
        (
            "a: 10,000 hosts, 100,000 pending, 1,000 shapes, cluster full",
            10_000,
            100_000,
            1_000,
            0.0,
        ),
        (
            "b: 6,000 hosts, 500,000 pending, 1,000 shapes, 2% hosts free",
            6_000,
            500_000,
            1_000,
            0.02,
        ),
    ]
    for label, hosts, pending, shape_count, free in cases:
        print(label)
        state = build(hosts, pending, shape_count, free, 1)
        assert isinstance(state, SchedulerState)
        settle_heap()  # as the simulator and the controller do after loading
        median, times, result = median_session(state, 1000.0, args.runs)
        # Baseline measured in the same run: one pass over the pending jobs reading
        # each one's scheduling key, the floor of any per-job scheduler in Python.
        floor = []
        for _ in range(args.runs):
            started = time.perf_counter()
            for job in state.pending.values():
                _ = job.key
            floor.append(time.perf_counter() - started)
        baseline = statistics.median(floor)
        stats = result.stats
        print(
            f"  session median {median:.3f} s over {args.runs} runs "
            f"(min {min(times):.3f}, max {max(times):.3f}); "
            f"dispatched {stats.dispatched}, pending {stats.pending}, "
            f"evaluations {stats.evaluations}; target <= 2 s"
        )
        print(
            f"  baseline (touch every pending job once) {baseline * 1000:.1f} ms: "
            f"session = {median / baseline:.1f} x baseline"
        )
        print(f"  peak RSS so far {peak_rss_mb():.0f} MB; target <= 2048 MB")
        del state, result


if __name__ == "__main__":
    main()
