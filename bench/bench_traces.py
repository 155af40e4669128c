"""Every shared trace, whole, through the simulator: the static machine against half of
it static plus bursting (issue 18, acceptance).

For each trace in ../shared/traces (*.swf.gz), two runs with the same scheduling
configuration, EASY (every queue `backfill: true`, the cluster's `reserve_depth: 1`;
the traces carry run limits):

* static: the traced machine sized from its header (`xce.sim.sizing.sized_cluster`);
* elastic: half its hosts static, and one burst template (`cloud`) able to hold the
  whole machine (its `max` is the machine's host count, not just the other half),
  lead time 120 s, idle time 600 s, policy persistence 0.

Each run is a process of its own under an address-space limit and a wall timeout
(`bench_runaway.run_limited`). One markdown table per trace, with PASS/FAIL against
the targets:

* every job submitted finishes (`finished` = jobs - too large);
* wait mean: elastic <= 2 x static + 300 s;
* never-used hosts (given back without running a job) <= 1 % of those joined;
* busy %: `host_hours_busy` / `host_hours` of the burst template >= 80 %;
* host-hours: the elastic run's (its static half's hosts x its sim_seconds / 3600,
  plus the burst template's `host_hours`) <= the static run's (the machine's hosts x
  that run's sim_seconds / 3600: a static host is paid for from the first submit to
  the end of the run, busy or not);
* peak RSS < 2 GB per run; wall seconds are shown, with no target.

`--demand-after S` gives the elastic run's queue a `demand_after` of S seconds (a job
asks for supply only once it has pended that long: docs/policy.md), to see what it
trades; the acceptance figures are without it. `--burst-max rest` gives the burst
template only the other half of the machine (as `xce sim cluster --elastic 0.5` sizes
it): jobs wider than the static half plus that are planned as in
docs/scheduling.md's "Wider than a template's max", the elastic run's slowest shape.

Run: python bench/bench_traces.py [--traces DIR] [--only NAME] [--jobs N]
     [--memory-gb G] [--timeout S] [--demand-after S] [--burst-max machine|rest]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_runaway import GB, LIMITED, TRACES, Outcome, run_limited
from common import machine

ELASTIC = 0.5
RSS_TARGET_MB = 2048.0

# The child (after LIMITED): one run of a trace, static (elastic 0) or elastic.
CASE = LIMITED + """
import json, msgspec
from xce.model.policy import PolicyConfig
from xce.sim.driver import Simulator
from xce.sim.sizing import machine_shape, sized_cluster
from xce.sim.workload import load_workload
from xce.tuning import settle_heap
path, elastic, demand_after = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
workload = load_workload(path)
nodes, _slots = machine_shape(workload)
most = nodes if sys.argv[5] == "machine" else None  # (None: the other half)
config = sized_cluster(workload, elastic=elastic, lead_time=120, idle_time=600,
                       template_max=most, backfill=True, reserve_depth=1)
queues = tuple(msgspec.structs.replace(q, demand_after=demand_after) for q in config.queues)
config = msgspec.structs.replace(config, policy=PolicyConfig(persistence=0), queues=queues)
simulator = Simulator(config, workload, reasons=False)
settle_heap()
simulator.run()
summary = simulator.summary()
summary["static_hosts"] = len(config.hosts)
print(json.dumps(summary))
"""


def run_trace(path: Path, memory: int, timeout: float, demand_after: float,
              burst_max: str = "machine") -> tuple[Outcome, Outcome]:
    """The static and the elastic run of one trace (the elastic one's queues with
    `demand_after`, its template's max the whole machine or the `rest`)."""
    static = run_limited(CASE, [str(path), "0", "0", burst_max], memory, timeout)
    elastic = run_limited(CASE, [str(path), str(ELASTIC), str(demand_after), burst_max],
                          memory, timeout)
    return static, elastic


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def machine_hours(s: dict[str, Any]) -> float:
    """Host-hours of a run: its static hosts over the run, plus provisioned hosts'."""
    return float(s["static_hosts"] * s["sim_seconds"] / 3600 + sum(s["host_hours"].values()))


def table(name: str, static: Outcome, elastic: Outcome) -> list[str]:
    """The markdown table of one trace (a line per figure)."""
    lines = [f"### {name}", "", "| figure | static | elastic | target | verdict |",
             "|---|---|---|---|---|"]
    a, b = static.result(), elastic.result()
    for label, outcome in (("static", static), ("elastic", elastic)):
        if outcome.status != "ok":
            lines.append(f"| run | {label}: {outcome.status} | | ends | FAIL |")
    lines += _runs(a, b, static, elastic)
    if a and b:
        lines += _supply(a, b)
    return [*lines, ""]


def _runs(a: dict[str, Any], b: dict[str, Any], static: Outcome,
          elastic: Outcome) -> list[str]:
    """Rows of what each run did: jobs, waits, wall time, memory."""
    rows = []
    for key in ("jobs", "too_large"):
        rows.append(f"| {key.replace('_', ' ')} | {a.get(key, '-')} | {b.get(key, '-')} | | |")
    done = [s.get("finished", "-") for s in (a, b)]
    every = all(s and s["finished"] == s["jobs"] - s["too_large"] for s in (a, b))
    rows.append(f"| finished | {done[0]} | {done[1]} | every job | {verdict(every)} |")
    if a and b:
        bound = 2 * a["wait_mean"] + 300
        ratio = f" (x{b['wait_mean'] / a['wait_mean']:.2f})" if a["wait_mean"] else ""
        rows.append(f"| wait mean s | {a['wait_mean']:.0f} | {b['wait_mean']:.0f}{ratio} "
                    f"| <= 2 x static + 300 = {bound:.0f} | {verdict(b['wait_mean'] <= bound)} |")
    rows.append(f"| wall s | {static.wall:.1f} | {elastic.wall:.1f} | | |")
    fits = all(o.peak_rss_mb < RSS_TARGET_MB for o in (static, elastic))
    rows.append(f"| peak RSS MB | {static.peak_rss_mb:.0f} | {elastic.peak_rss_mb:.0f} "
                f"| < {RSS_TARGET_MB:.0f} | {verdict(fits)} |")
    return rows


def _supply(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Rows of the elastic run's supply against the static machine."""
    joined, never, cancelled = b["hosts_joined"], b["hosts_never_used"], b["hosts_cancelled"]
    never_pct = 100 * never / joined if joined else 0.0
    hours = sum(b["host_hours"].values())
    busy = sum(b["host_hours_busy"].values())
    busy_pct = 100 * busy / hours if hours else 0.0
    static_hours, elastic_hours = machine_hours(a), machine_hours(b)
    return [
        f"| hosts requested / joined / cancelled / never used | | {b['hosts_requested']} / "
        f"{joined} / {cancelled} / {never} | | |",
        f"| never used % | | {never_pct:.2f} | <= 1 | {verdict(never_pct <= 1)} |",
        f"| burst host_hours / host_hours_busy | | {hours:.0f} / {busy:.0f} | | |",
        f"| busy % | | {busy_pct:.1f} | >= 80 | {verdict(busy_pct >= 80)} |",
        f"| host-hours (static hosts + burst) | {static_hours:.0f} | {elastic_hours:.0f} "
        f"| elastic <= static | {verdict(elastic_hours <= static_hours)} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--only", help="run only traces whose name contains this")
    parser.add_argument("--jobs", type=int, default=1,
                        help="traces run in parallel (each trace's two runs in turn)")
    parser.add_argument("--memory-gb", type=float, default=6.0,
                        help="address-space limit of each run (RLIMIT_AS), GB")
    parser.add_argument("--timeout", type=float, default=1800.0, help="wall limit per run, s")
    parser.add_argument("--demand-after", type=float, default=0.0, metavar="S",
                        help="the elastic run's queues' demand_after, s (docs/policy.md)")
    parser.add_argument("--burst-max", choices=("machine", "rest"), default="machine",
                        help="the burst template's max: the whole machine (the acceptance "
                             "case) or the rest beside the static half")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error("--jobs: expected a whole number >= 1")
    if args.demand_after < 0:
        parser.error("--demand-after: expected seconds >= 0")
    paths = [p for p in sorted(args.traces.glob("*.swf.gz"))
             if not args.only or args.only in p.name]
    print(f"machine: {machine()}\n")
    memory = int(args.memory_gb * GB)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = [pool.submit(run_trace, path, memory, args.timeout, args.demand_after,
                            args.burst_max)
                for path in paths]
        for path, run in zip(paths, runs, strict=True):
            print("\n".join(table(path.name.split(".swf")[0], *run.result())), flush=True)


if __name__ == "__main__":
    main()
