"""Shared helpers of the benchmarks: timing medians and peak memory."""

from __future__ import annotations

import platform
import resource
import statistics
import time
from datetime import UTC, datetime

from xce.sched import SchedulerState, run_session


def machine() -> str:
    """One line naming the machine and the date, for bench/RESULTS.md."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import os

    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median_session(
    state: SchedulerState, now: float, runs: int
) -> tuple[float, list[float], object]:
    """Median wall time (s) of `runs` sessions on the same state; the last result."""
    times: list[float] = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = run_session(state, now, time.perf_counter)
        times.append(time.perf_counter() - started)
    return statistics.median(times), times, result
