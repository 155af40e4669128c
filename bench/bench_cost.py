"""Cost of the demand benchmark (issue 20, "Prices and choice").

The 100,000-job demand benchmark of bench_demand.py (1,000 busy hosts, 100 shapes,
10 countable resources, catalog cap 10,000 jobs) with 20 node types priced as AWS
prices them, about 0.048 per CPU, 0.0065 per GB and 2.5 per GPU an hour (16 CPU
types of 2, 4, 8 and 16 GB per slot, 4 GPU types), and about 15 % of the shapes
using GPUs. For each `choose` rule it prints the hourly cost of the new hosts
demanded and its ratio to the fractional lower bound (for `cost`, target <= 1.10):
each demanded job at the least price share of any template that can hold it
(sched/choice.py, `price_share`), less the value of the in-flight hosts used; and
the session's median time (for `cost`, target <= 1 s).

Run: python bench/bench_cost.py [--runs 7] [--max 400] [--gpu-share 0.15]
"""

from __future__ import annotations

import argparse
import math

from bench_demand import build
from common import machine, median_session, peak_rss_mb

from xce.model.cluster import Choose, HostTemplate
from xce.model.result import SessionResult
from xce.sched import SchedulerState
from xce.sched.buckets import Bucket
from xce.sched.choice import JobTake, price_share
from xce.sched.holds import empty_room

PER_CPU, PER_GB, PER_GPU = 0.048, 0.0065, 2.5  # an hour
RULES: tuple[Choose, ...] = ("cost", "rank", "least-waste")
# GPU node types: (slots, GB, GPUs), as p3.2xlarge, p3.8xlarge, p3.16xlarge, p4d
GPU_TYPES = ((8, 61, 1), (32, 244, 4), (64, 488, 8), (96, 1152, 8))


def price(slots: int, gb: float, gpus: int) -> float:
    return round(PER_CPU * slots + PER_GB * gb + PER_GPU * gpus, 4)


def node_types(max_hosts: int) -> tuple[HostTemplate, ...]:
    """16 CPU types (8-64 slots at 2, 4, 8 and 16 GB a slot), then 4 GPU types, ranked
    in that order; memory in MB (1 GB = 1000 MB)."""
    shapes = [(s, s * per, 0) for per in (2, 4, 8, 16) for s in (8, 16, 32, 64)]
    shapes += list(GPU_TYPES)
    return tuple(
        HostTemplate(
            name=f"t{i:02d}", provider="cloud", slots=slots,
            resources={"mem": float(gb * 1000)}, max=max_hosts, rank=i,
            price=price(slots, gb, gpus), gpus=gpus,
        )
        for i, (slots, gb, gpus) in enumerate(shapes)
    )


def demand_cost(state: SchedulerState, result: SessionResult) -> tuple[int, float]:
    """New hosts demanded and their hourly cost."""
    templates = state.templates
    hosts = sum(h.count for h in result.demand.hosts)
    return hosts, sum(h.count * templates[h.template].price for h in result.demand.hosts)


def least_share(state: SchedulerState, job: int) -> float:
    """The least price share of the job on any template that can hold it."""
    bucket = _bucket(state, job)
    take = JobTake(bucket.n, bucket.per_slot, bucket.pieces, bucket.gpus)
    best = math.inf
    for template in state.templates.values():
        room = empty_room(template, bucket.use)  # (0 without the job's GPUs per host)
        if room < bucket.unit:
            continue
        best = min(best, price_share(template, take, room))
    return best


def lower_bound(state: SchedulerState, result: SessionResult, gpus: bool | None = None) -> float:
    """Each demanded job at its least price share, less the in-flight hosts' value
    (`gpus` True/False: of the jobs with/without GPUs and the GPU/other hosts only)."""
    templates = state.templates
    entries = [
        h for h in result.demand.hosts if gpus is None or (templates[h.template].gpus > 0) == gpus
    ]
    jobs = {
        j for h in result.demand.hosts for j in h.jobs
        if gpus is None or (_bucket(state, j).gpus > 0) == gpus
    }
    in_flight = sum(h.in_flight_used * templates[h.template].price for h in entries)
    return sum(least_share(state, j) for j in jobs) - in_flight


def _bucket(state: SchedulerState, job: int) -> Bucket:
    bucket = state.pending[job].bucket
    assert bucket is not None
    return bucket


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7, help="timed sessions per rule")
    parser.add_argument("--cap", type=int, default=10_000, help="catalog.max_jobs_per_session")
    parser.add_argument("--max", type=int, default=400,
                        help="each template's max (400: as bench_demand)")
    parser.add_argument("--gpu-share", type=float, default=0.15, help="shapes using GPUs")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(
        f"100,000 pending jobs, 100 shapes (about {args.gpu_share:.0%} with GPUs), 1,000 busy "
        f"hosts, 20 priced node types (max {args.max} each), catalog cap {args.cap}"
    )
    templates = node_types(args.max)
    for rule in RULES:
        state = build(True, args.cap, templates=templates, choose=rule, gpu_share=args.gpu_share)
        median, times, result = median_session(state, 1000.0, args.runs)
        assert isinstance(result, SessionResult)
        hosts, cost = demand_cost(state, result)
        bound = lower_bound(state, result)
        jobs = len({j for h in result.demand.hosts for j in h.jobs})
        print(
            f"  choose: {rule:<11} {hosts:>6} new hosts for {jobs} jobs, {cost:,.1f} an hour; "
            f"lower bound {bound:,.1f}; ratio {cost / bound:.3f}"
            + (" (target <= 1.10)" if rule == "cost" else "")
        )
        stats = result.stats
        print(
            f"    session median {median:.3f} s ({', '.join(f'{t:.3f}' for t in times)})"
            + ("; target <= 1 s" if rule == "cost" else "")
            + f"; real {stats.real_pass_ms:.0f} ms, catalog {stats.catalog_pass_ms:.0f} ms, "
            f"end {stats.end_ms:.0f} ms (last run)"
        )
        gpu_cost = sum(
            h.count * state.templates[h.template].price for h in result.demand.hosts
            if state.templates[h.template].gpus
        )
        print(
            f"    GPU hosts {gpu_cost:,.1f} an hour against the GPU jobs' bound "
            f"{lower_bound(state, result, True):,.1f}; other hosts {cost - gpu_cost:,.1f} "
            f"against the other jobs' bound {lower_bound(state, result, False):,.1f} (jobs "
            "without GPUs also fill GPU hosts' free slots, at no added cost)"
        )
        if rule == "cost":
            for entry in result.demand.hosts:
                template = state.templates[entry.template]
                print(
                    f"    {entry.template} ({template.slots} slots, "
                    f"{template.resources['mem'] / 1000:g} GB, {template.gpus} GPUs, "
                    f"{template.price:g}/h): {entry.count} hosts, {len(entry.jobs)} jobs"
                )
        del state, result
    print(f"  peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
