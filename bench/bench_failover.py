"""Failover benchmark (issue 24, docs/ha.md): the scenario of tests/test_live_ha.py
repeated --rounds times on one cluster: two `xce controller` processes on one
PostgreSQL log (a private server started here, fsync on), two real agents, four long
jobs running and submissions at ~200/s through the CLI's client given both URLs; the
leader is killed -9 and restarted as a standby on the same port after the other took
over. Each round checks (tests/failover.py): no acknowledged submission lost, no job
run or started twice, the long jobs DONE and never restarted.

Takeover time: from the kill until the standby answers `GET /jobs` (200). Target:
<= 10 s each round. Then --stop-rounds rounds stop the leader instead (SIGSTOP): the
standby deposes it after the lease (5 s); resumed (SIGCONT), it must exit 75 (stepped
down; tests/test_live_ha.py also checks that it acknowledges nothing); it is restarted
as a standby.

Run: python bench/bench_failover.py [--rounds 20] [--stop-rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import machine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from failover import (
    CONFIG,
    TIMINGS,
    Load,
    exit_status,
    long_jobs,
    running,
    stop_process,
    verdict,
    wait_leading,
)
from live import LiveCluster, free_port, live_cluster
from pg_server import PrivatePostgres

from xce.controller.leadership import STEPPED_DOWN


def peak_mb(cluster: LiveCluster, key: str) -> float:
    """The peak resident memory of a controller so far (VmHWM)."""
    with contextlib.suppress(OSError, StopIteration):
        status = Path(f"/proc/{cluster.procs[key].pid}/status").read_text().splitlines()
        return int(next(x for x in status if x.startswith("VmHWM:")).split()[1]) / 1024
    return 0.0


def one_round(cluster: LiveCluster, ports: dict[str, int], leader: str, store: str,
              runlog: Path, extra: tuple[str, ...]) -> tuple[float, float, float, dict[str, int]]:
    """Kill `leader` under load; (takeover seconds, submissions/s before, its peak MB,
    the verdict's figures). The killed one comes back as a standby."""
    standby = next(k for k in ports if k != leader)
    url = {k: f"http://127.0.0.1:{p}" for k, p in ports.items()}
    long = running(cluster, url[leader], long_jobs(cluster, url[leader], runlog, 4, 8.0))
    load = Load(cluster, ",".join(url.values()), runlog)
    load.start()
    time.sleep(2.5)
    memory = peak_mb(cluster, leader)
    killed = time.monotonic()
    cluster.stop(leader)
    took = wait_leading(cluster, url[standby])
    time.sleep(1.0)
    load.finish()
    rate = load.rate(killed - 2.0, killed)
    figures = verdict(cluster, url[standby], store, load, runlog, long)
    cluster.start_controller(f"127.0.0.1:{ports[leader]}", extra=extra, key=leader)
    return took, rate, memory, figures


def stop_round(cluster: LiveCluster, ports: dict[str, int], leader: str,
               extra: tuple[str, ...]) -> float:
    """Stop `leader` (SIGSTOP) until the other leads; resume it: it steps down. The
    seconds until the other led."""
    other = next(k for k in ports if k != leader)
    stop_process(cluster, leader, signal.SIGSTOP)
    took = wait_leading(cluster, f"http://127.0.0.1:{ports[other]}")
    stop_process(cluster, leader, signal.SIGCONT)
    status = exit_status(cluster, leader, 15)
    if status != STEPPED_DOWN:
        raise RuntimeError(f"the deposed leader exited {status}: {cluster.log_tail(leader)}")
    cluster.start_controller(f"127.0.0.1:{ports[leader]}", extra=extra, key=leader)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--stop-rounds", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    server = PrivatePostgres()
    times: list[float] = []
    rates: list[float] = []
    memory: list[float] = []
    stopped: list[float] = []
    totals = {"acked": 0, "unacked": 0, "ran": 0}
    try:
        store = server.new_database()
        extra = (*TIMINGS, "--store", store)
        with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp, \
                live_cluster(Path(tmp), CONFIG) as cluster:
            runlog = Path(tmp) / "RUNLOG"
            runlog.touch()
            ports = {"controller": free_port(), "b": free_port()}
            cluster.start_controller(f"127.0.0.1:{ports['controller']}", extra=extra)
            wait_leading(cluster, cluster.url)
            cluster.start_controller(f"127.0.0.1:{ports['b']}", extra=extra, key="b")
            urls = ",".join(f"http://127.0.0.1:{p}" for p in ports.values())
            for name in ("n1", "n2"):
                cluster.start_agent(name, slots=4, controller=urls)
            leader = "controller"
            for round_ in range(args.rounds):
                took, rate, mb, figures = one_round(cluster, ports, leader, store, runlog,
                                                    extra)
                times.append(took)
                rates.append(rate)
                memory.append(mb)
                totals = {"acked": totals["acked"] + figures["acked"],
                          "unacked": totals["unacked"] + figures["unacked"],
                          "ran": figures["ran"]}  # (the RUNLOG of every round so far)
                print(f"round {round_ + 1:2}: takeover {took:5.2f} s; {rate:4.0f} "
                      f"submissions/s before the kill; {figures}; leader peak RSS {mb:.0f} MB",
                      flush=True)
                leader = next(k for k in ports if k != leader)
                time.sleep(1.0)  # (the restarted one follows the log)
            for round_ in range(args.stop_rounds):
                stopped.append(stop_round(cluster, ports, leader, extra))
                print(f"stop round {round_ + 1}: the stopped leader deposed, the standby "
                      f"leads after {stopped[-1]:.2f} s; resumed, it stepped down (exit "
                      f"{STEPPED_DOWN})", flush=True)
                leader = next(k for k in ports if k != leader)
                time.sleep(1.0)
    finally:
        server.stop()
    verdict_ = "met" if max(times) <= 10 else "MISSED"
    print(f"\n{len(times)} takeovers after kill -9: median {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s, min {min(times):.2f} s; target <= 10 s: {verdict_}")
    print(f"submissions/s before the kills: median {statistics.median(rates):.0f}; "
          f"acknowledged {totals['acked']}, lost 0, unacknowledged (cut by a kill or no "
          f"leader yet) {totals['unacked']}; jobs run {totals['ran']}, none twice; "
          f"long jobs never restarted; controllers' peak RSS max {max(memory):.0f} MB")
    if stopped:
        print(f"{len(stopped)} takeovers of a stopped leader: median "
              f"{statistics.median(stopped):.2f} s, max {max(stopped):.2f} s (lease 5 s); "
              "each deposed leader, resumed, stepped down (exit 75)")


if __name__ == "__main__":
    main()
