"""Policy round benchmark (issue: the resource provisioner).

One `xce.policy.decide` round over demand for 5,000 hosts across 20 templates and 10
countable resources (each demanded host listing its jobs), with 2,000 provisioned
hosts of which 500 idle to consider for reclaim. Target: at most 100 ms (median). The
baseline measured in the same run: an empty round (no demand, no hosts).

Run: python bench/bench_policy.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import machine

from xce.model.cluster import Catalog, Countable, HostTemplate
from xce.model.policy import PolicyConfig
from xce.model.result import Demand, HostDemand, Idle, IdleHost, IdleResource, ResourceDemand
from xce.policy import PolicyInput, PolicyMemory, ProvisionedHost, decide

TEMPLATES = [f"t{i:02d}" for i in range(20)]
LICENSES = [f"lic{i}" for i in range(10)]


def catalog() -> Catalog:
    return Catalog(
        templates=tuple(HostTemplate(name=t, provider="cloud", slots=16, max=10_000, rank=i)
                        for i, t in enumerate(TEMPLATES)),
        countables=tuple(Countable(resource=r, max_borrow=1_000) for r in LICENSES),
    )


def busy_input(now: float) -> PolicyInput:
    job = 0
    hosts = []
    for template in TEMPLATES:  # 250 hosts each, 4 jobs a host
        jobs = list(range(job, job + 1_000))
        job += 1_000
        hosts.append(HostDemand(template, 250, 0, jobs))
    resources = [ResourceDemand(r, 100.0, 0.0, list(range(i * 100, i * 100 + 100)))
                 for i, r in enumerate(LICENSES)]
    provisioned = [ProvisionedHost(f"{TEMPLATES[i % 20]}-{i}", TEMPLATES[i % 20], "ok",
                                   now - 7_200 + i, 0 if i < 500 else 1)
                   for i in range(2_000)]
    idle = Idle(hosts=[IdleHost(h.name, h.template, 900.0) for h in provisioned[:500]],
                resources=[IdleResource(r, 5.0) for r in LICENSES])
    return PolicyInput(now=now, demand=Demand(hosts=hosts, resources=resources), idle=idle,
                       hosts=provisioned, in_flight={t: 10 for t in TEMPLATES},
                       alive={t: 100 for t in TEMPLATES})


def timed(inp: PolicyInput, memory: PolicyMemory, runs: int) -> tuple[float, int]:
    config, cat = PolicyConfig(persistence=60), catalog()
    times = []
    actions = 0
    for _ in range(runs):
        started = time.perf_counter()
        found, _memory = decide(inp, memory, config, cat)
        times.append(time.perf_counter() - started)
        actions = len(found)
    return statistics.median(times), actions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(machine())
    now = 100_000.0
    busy = busy_input(now)
    # Demand seen long enough ago: the round requests hosts and tokens.
    persisted = PolicyMemory(demand_since={**{t: now - 3_600 for t in TEMPLATES},
                                           **{r: now - 3_600 for r in LICENSES}})
    empty = PolicyInput(now=now, demand=Demand(), idle=Idle(), hosts=[], in_flight={})
    base, _ = timed(empty, PolicyMemory(), args.runs)
    full, actions = timed(busy, persisted, args.runs)
    print("demand for 5,000 hosts over 20 templates and 10 countables; 2,000 provisioned "
          "hosts, 500 idle")
    print(f"  empty round:  median {base * 1000:.3f} ms")
    print(f"  busy round:   median {full * 1000:.1f} ms ({actions} actions); target <= 100 ms: "
          f"{'met' if full <= 0.1 else 'MISSED'}")


if __name__ == "__main__":
    main()
