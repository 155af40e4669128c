"""Provisioning-demand benchmark (issue: provisioning demand).

100,000 pending jobs of 100 shapes, 1,000 busy hosts, 20 templates, 10 countable
resources. Measures the whole session including the catalog pass (target: at most
1 s, median); the same session where nothing is provisionable (every template at its
maximum, no headroom) against the same cluster without a catalog (target: the
catalog pass adds at most 30 %; docs/scheduling.md, "Speed of the catalog pass",
gives this reading of the target); and how close the first-fit packing is to the
lower bound per template.

Run: python bench/bench_demand.py [--runs 15]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from common import machine, median_session, peak_rss_mb

from xce.model.cluster import (
    Catalog,
    Choose,
    ClusterConfig,
    Countable,
    HostSpec,
    HostTemplate,
    Queue,
    ResourceDef,
    SharedPool,
)
from xce.model.events import JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.model.result import SessionResult
from xce.sched import SchedulerState
from xce.tuning import settle_heap

LICENSES = [f"lic{i}" for i in range(10)]


def config(
    provisionable: bool | None,
    cap: int,
    templates: tuple[HostTemplate, ...] | None = None,
    choose: Choose = "rank",
) -> ClusterConfig:
    """`provisionable` None: no catalog at all (no template, no countable);
    `templates`: instead of the 20 unpriced ones (bench_cost.py); `choose`: the
    catalog's rule for new hosts."""
    resources = {"mem": ResourceDef("mem", "numeric", consumable=True)}
    for lic in LICENSES:
        resources[lic] = ResourceDef(lic, "numeric", consumable=True, shared=True)
    if templates is None:
        templates = tuple(
            HostTemplate(
                name=f"t{i:02d}",
                provider="cloud",
                slots=[8, 16, 32, 64][i % 4],
                resources={"mem": float([32000, 64000, 128000, 256000][(i // 4) % 4])},
                max=400 if provisionable else 0,
                rank=i,
            )
            for i in range(20)
        )
    countables = tuple(
        Countable(resource=lic, max_borrow=500 if provisionable else 0) for lic in LICENSES
    )
    return ClusterConfig(
        cluster="bench-demand",
        resources=resources,
        hosts=tuple(
            HostSpec(name=f"h{i:04d}", slots=32, resources={"mem": 128000.0}) for i in range(1000)
        ),
        # No license token is free: every one a job needs must be borrowed.
        shared={lic: (SharedPool(resource=lic, pool="default", total=0),) for lic in LICENSES},
        queues=(Queue("high", 50), Queue("normal", 30), Queue("low", 10)),
        catalog=Catalog(
            idle_time=600,
            max_jobs_per_session=cap,
            templates=templates if provisionable is not None else (),
            countables=countables if provisionable is not None else (),
            choose=choose,
        ),
    )


def shapes(rng: random.Random, gpu_share: float = 0.0) -> list[tuple[int, str, int]]:
    """100 job shapes: (slots, requirement string, GPUs per host); about `gpu_share`
    of them use GPUs (1, 2, 4 or 8 per host)."""
    found: set[tuple[int, str, int]] = set()
    while len(found) < 100:
        n = rng.choice([1, 1, 2, 4, 8, 16])
        mem = rng.randrange(500, 8000, 500)
        lic = f":{rng.choice(LICENSES)}=1" if rng.random() < 0.3 else ""
        span = rng.choice(["", "span[hosts=1]", "span[ptile=4]"]) if n > 1 else ""
        gpus = rng.choice([1, 2, 4, 8]) if gpu_share and rng.random() < gpu_share else 0
        found.add((n, f"rusage[mem={mem}{lic}] {span}".strip(), gpus))
    return sorted(found)


def build(
    provisionable: bool | None,
    cap: int,
    seed: int = 1,
    templates: tuple[HostTemplate, ...] | None = None,
    choose: Choose = "rank",
    gpu_share: float = 0.0,
) -> SchedulerState:
    """The state: 1,000 busy hosts and 100,000 pending jobs of 100 shapes (about
    `gpu_share` of the shapes with GPUs), on `config`'s catalog."""
    rng = random.Random(seed)
    state = SchedulerState(config(provisionable, cap, templates, choose))
    job_id = 0
    for i in range(1000):  # every host busy
        job_id += 1
        state.apply(JobSubmitted(JobSpec(id=job_id, user="filler", queue="normal", n=32)))
        state.apply(JobStarted(job=job_id, hosts={f"h{i:04d}": 32}, time=0))
    kinds = shapes(rng, gpu_share)
    for i in range(100_000):
        job_id += 1
        n, res, gpus = rng.choice(kinds)
        state.apply(
            JobSubmitted(
                JobSpec(
                    id=job_id,
                    user=f"u{rng.randrange(100):02d}",
                    queue=rng.choice(["high", "normal", "normal", "low"]),
                    n=n,
                    res=res,
                    submit=float(i // 20),
                    gpus=gpus,
                )
            )
        )
    settle_heap()
    return state


def lower_bound(state: SchedulerState, result: SessionResult) -> dict[str, tuple[int, int]]:
    """Per template: (hosts demanded, lower bound from slots and each consumable)."""
    specs = {j.id: j for j in state.pending.values()}
    templates = state.templates
    bounds: dict[str, tuple[int, int]] = {}
    for entry in result.demand.hosts:
        template = templates[entry.template]
        slots = sum(specs[j].spec.n for j in entry.jobs)
        mem = sum(
            specs[j].spec.n * dict(specs[j].bucket.per_slot).get("mem", 0.0)  # type: ignore[union-attr]
            for j in entry.jobs
        )
        need = max(slots / template.slots, mem / float(template.resources["mem"]))
        bounds[entry.template] = (entry.count + entry.in_flight_used, math.ceil(need))
    return bounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cap", type=int, default=10_000, help="catalog.max_jobs_per_session")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(
        f"100,000 pending jobs, 100 shapes, 1,000 busy hosts, 20 templates, 10 countables; "
        f"catalog cap {args.cap}"
    )
    # The two light sessions are timed in turn, round after round, so that the
    # machine's load falls alike on both (medians of the rounds).
    bare_state, baseline_state = build(None, args.cap), build(False, args.cap)
    bare_times: list[float] = []
    base_times: list[float] = []
    for _ in range(args.runs):
        bare_times += median_session(bare_state, 1000.0, 1)[1]
        base_times += median_session(baseline_state, 1000.0, 1)[1]
    bare, base = statistics.median(bare_times), statistics.median(base_times)
    del bare_state, baseline_state
    state = build(True, args.cap)
    full, full_times, result = median_session(state, 1000.0, args.runs)
    assert isinstance(result, SessionResult)
    stats = result.stats
    for label, median, each in (
        ("no catalog:           ", bare, bare_times),
        ("nothing provisionable:", base, base_times),
    ):
        print(f"  {label} median {median:.4f} s ({', '.join(f'{t:.4f}' for t in each)})")
    # Each round times the two sessions back to back: the median of the rounds'
    # ratios is the steadier figure on a shared machine.
    ratio = statistics.median(b / a for a, b in zip(bare_times, base_times, strict=True))
    print(
        f"  catalog pass where nothing is provisionable adds {100 * (ratio - 1):.0f} % "
        f"(median of the rounds' ratios; {100 * (base - bare) / bare:.0f} % between the "
        f"medians) to the session without a catalog; target <= 30 %"
    )
    print(
        f"  with demand:           median {full:.3f} s "
        f"({', '.join(f'{t:.3f}' for t in full_times)}); "
        f"target <= 1 s"
    )
    print(
        f"    real pass {stats.real_pass_ms:.0f} ms, catalog pass {stats.catalog_pass_ms:.0f} ms, "
        f"end {stats.end_ms:.0f} ms (last run)"
    )
    print(
        f"  with demand the catalog pass adds {100 * (full - base) / base:.0f} % over the session "
        f"where nothing is provisionable (not a target: it places each job up to the cap)"
    )
    hosts = sum(h.count for h in result.demand.hosts)
    jobs = len({j for h in result.demand.hosts for j in h.jobs})
    tokens = sum(r.amount for r in result.demand.resources)
    print(
        f"  demand: {hosts} new hosts over {len(result.demand.hosts)} templates for {jobs} jobs; "
        f"{tokens:g} tokens over {len(result.demand.resources)} resources"
    )
    total_demanded = total_bound = 0
    for name, (demanded, bound) in sorted(lower_bound(state, result).items()):
        total_demanded += demanded
        total_bound += bound
        print(f"    {name}: {demanded} hosts, lower bound {bound}")
    print(
        f"  packing: {total_demanded} hosts vs lower bound {total_bound} "
        f"({100 * total_demanded / max(total_bound, 1):.1f} %)"
    )
    print(f"  peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
