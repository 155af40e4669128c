"""Where the burst template's idle host-hours sit, in bench_traces.py's elastic run
(half the machine static, a burst template of the whole machine, lead time 120 s,
idle time 600 s, persistence 0, EASY): issue 18's host-hours goal.

A provisioned host costs from its join to its release (sim/supply.py), busy or not.
After every session each provisioned host with no job is counted idle until the next
session, in one of these kinds:

* `young`: idle for less than its idle time (600 s): the time every host spends idle
  before it is given back, and the gaps between jobs;
* `held, real, start in ...`: idle for its idle time or longer, and on the hosts of a
  reservation on real capacity (ARCHITECTURE.md 2a), by how far away its start is
  (the scheduler reports no booked host idle: sched/idle.py);
* `held, supply`: on a hold for supply to come (a reservation marked `virtual`);
* `not held, jobs pending` / `not held, none pending`: idle that long and on no
  reservation (reported idle: the policy drains it at its next round).

Printed per trace: the elastic run's host-hours against the full static machine's
(bench_traces.py's measure) and the idle host-hours of each kind. The static run is
made too (for the measure). Sessions run with pend reasons (reservations name their
hosts), so the runs are slower than bench_traces.py's; the figures are the same.

Run: python bench/bench_burst_idle.py [--traces DIR] [--only NAME]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
from common import machine

from xce.model.events import SchedulerEvent
from xce.model.policy import PolicyConfig
from xce.model.recording import Recorder
from xce.model.result import Reservation, SessionResult
from xce.sim.driver import Simulator
from xce.sim.sizing import machine_shape, sized_cluster
from xce.sim.workload import Workload, load_workload

HERE = Path(__file__).resolve().parent
FAILING = ("CTC-SP2-1996-3.1-cln", "SDSC-SP2-1998-4.2-cln", "lublin_256")
STARTS = (600.0, 1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0)


def far(seconds: float) -> str:
    """How far away a start is, as a band."""
    for bound in STARTS:
        if seconds <= bound:
            return f"<= {bound / 60:g} min" if bound < 3600 else f"<= {bound / 3600:g} h"
    return f"> {STARTS[-1] / 3600:g} h"


class IdleKinds(Recorder):
    """Counts each provisioned host's idle time by kind: a recorder that writes
    nothing. The simulator calls it before each event it applies and with each
    session's result (before it starts the session's jobs and acts on its policy
    round), so the hosts are looked at when time has moved on: what they were since
    the last call (an idle host's kind at the last session's reservations)."""

    def __init__(self, state: Any, idle_time: float) -> None:  # (writes no file)
        self.state, self.idle_time = state, idle_time
        self.seconds: Counter[str] = Counter()
        self._since = 0.0
        self._held: dict[str, Reservation] = {}

    def event(self, now: float, event: SchedulerEvent) -> None:
        self._look(now)

    def session(self, now: float, result: SessionResult) -> None:
        self._look(now)
        self._held = {name: r for r in result.reservations for name in r.hosts}

    def _look(self, now: float) -> None:
        if now > self._since:
            for kind, hosts in self._kinds(self._since).items():
                self.seconds[kind] += hosts * (now - self._since)
            self._since = now

    def _kinds(self, now: float) -> Counter[str]:
        held = self._held
        counts: Counter[str] = Counter()
        for host in self.state.provisioned.values():
            if host.running:
                continue
            if now - host.idle_since < self.idle_time:
                counts["young"] += 1
            elif (r := held.get(host.name)) is None:
                pending = "jobs pending" if self.state.pending else "none pending"
                counts["not held, " + pending] += 1
            elif r.virtual:
                counts["held, supply"] += 1
            else:
                counts[f"held, real, start in {far(r.start - now)}"] += 1
        return counts


def run(workload: Workload, elastic: float) -> tuple[dict[str, Any], float, IdleKinds]:
    """One run of bench_traces.py's configuration (elastic 0: the static machine):
    its summary, its host-hours (bench_traces.py's measure) and its idle kinds."""
    nodes, _slots = machine_shape(workload)
    config = sized_cluster(workload, elastic=elastic, lead_time=120, idle_time=600,
                           template_max=nodes, backfill=True, reserve_depth=1)
    config = msgspec.structs.replace(config, policy=PolicyConfig(persistence=0))
    simulator = Simulator(config, workload, reasons=True)
    kinds = IdleKinds(simulator.state, config.catalog.idle_time)
    simulator.recorder = kinds
    simulator.run()
    summary = simulator.summary()
    static_hours = len(config.hosts) * summary["sim_seconds"] / 3600
    return summary, static_hours + sum(summary["host_hours"].values()), kinds


def report(trace: Path) -> None:
    workload = load_workload(str(trace))
    started = time.perf_counter()
    static, full, _ = run(workload, 0.0)
    elastic, half, kinds = run(workload, 0.5)
    print(f"\n### {trace.name} ({time.perf_counter() - started:.0f} s)\n")
    print(f"host-hours: static {full:,.0f}, elastic {half:,.0f} "
          f"({100 * (half / full - 1):+.2f} %); "
          f"burst {sum(elastic['host_hours'].values()):,.0f}, busy "
          f"{sum(elastic['host_hours_busy'].values()):,.0f}; wait mean "
          f"{static['wait_mean']:,.0f} / {elastic['wait_mean']:,.0f} s\n")
    print("| burst hosts idle | host-hours |\n|---|---|")
    for kind, seconds in sorted(kinds.seconds.items(), key=lambda item: -item[1]):
        print(f"| {kind} | {seconds / 3600:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=Path, default=HERE.parents[1] / "shared" / "traces")
    parser.add_argument("--only", help="only traces whose name contains this")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    for name in FAILING:
        if args.only and args.only not in name:
            continue
        report(args.traces / f"{name}.swf.gz")


if __name__ == "__main__":
    main()
