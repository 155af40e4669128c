"""Job arrays against alike jobs (issue 21): "a 100,000-element array costs what
100,000 alike jobs cost today".

1,000 hosts of 16 slots, 2 % of them free (so the session dispatches 320 jobs), then
100,000 pending one-slot jobs of one shape:

* `alike`: 100,000 alike jobs (ids 1-100,000), as before arrays existed;
* `array`: one job array of 100,000 elements (`-J "a[1-100000]"`);
* `limited`: the same array with `%1000` (at most 1,000 elements run at once);
* `blocked`: the same array waiting for `done(...)` of a running job.

Each case runs in fresh processes (its own peak RSS), `--repeats` times, the cases
alternating (medians over the repeats); then the alike jobs and the array are built
in one process and measured in turn (the ratios of the target: separate processes
differ by up to ~50 % from one run to the next on a shared machine): the state is built from events
(submission), several sessions run on it (median), then 100 sessions whose dispatches
are started and ended in turn (churn: 32,000 jobs through every start and end hook;
five rounds of 20 sessions, the median round times five).
Target: the array within 10 % of the alike jobs.

Run: python bench/bench_arrays.py [--runs 21] [--repeats 3] [--jobs 100000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from common import machine, median_session, peak_rss_mb

from xce.model.cluster import ClusterConfig, HostSpec, Queue
from xce.model.events import JobFinished, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState, run_session
from xce.tuning import settle_heap

HOSTS = 1000
SLOTS = 16
FREE = 0.02
CASES = ("alike", "array", "limited", "blocked")


def build(case: str, jobs: int) -> SchedulerState:
    config = ClusterConfig(
        cluster="bench", max_job_array_size=jobs,
        hosts=tuple(HostSpec(name=f"h{i:04d}", slots=SLOTS) for i in range(HOSTS)),
        queues=(Queue("normal", 30),),
    )
    state = SchedulerState(config)
    busy = HOSTS - int(HOSTS * FREE)
    base = 10 * jobs  # the fillers' ids, after the array's
    for i in range(busy):
        state.apply(JobSubmitted(JobSpec(id=base + i, user="filler", n=SLOTS)))
        state.apply(JobStarted(job=base + i, hosts={f"h{i:04d}": SLOTS}, time=0))
    command = ["./sweep.sh", "input"]  # (what a live job carries)
    if case == "alike":
        for job in range(1, jobs + 1):
            state.apply(JobSubmitted(JobSpec(id=job, user="alice", submit=1.0,
                                             command=command, name="sweep")))
        return state
    limit = 1000 if case == "limited" else 0
    depend = f"done({base})" if case == "blocked" else ""
    array = 2 * jobs  # its elements: array + 1 ... array + jobs
    for index in range(1, jobs + 1):
        state.apply(JobSubmitted(JobSpec(
            id=array + index, user="alice", submit=1.0, command=command, name="sweep",
            array=array, index=index, array_limit=limit, depend=depend,
        )))
    return state


def churn(state: SchedulerState, sessions: int) -> tuple[float, int]:
    """`sessions` sessions, each one's dispatches started and ended before the next
    (every start and end goes through the state's events): the wall time and how many
    jobs ran."""
    started = time.perf_counter()
    ran = 0
    now = 100.0
    for _ in range(sessions):
        result = run_session(state, now)
        for d in result.dispatch:
            state.apply(JobStarted(job=d.job, hosts=d.hosts, time=now))
        now += 10.0
        for d in result.dispatch:
            state.apply(JobFinished(job=d.job, time=now))
        ran += len(result.dispatch)
    return time.perf_counter() - started, ran


def one_case(case: str, jobs: int, runs: int) -> dict[str, Any]:
    started = time.perf_counter()
    state = build(case, jobs)
    built = time.perf_counter() - started
    settle_heap()
    median, times, result = median_session(state, 100.0, runs)
    assert result is not None
    rounds = [churn(state, 20) for _ in range(5)]  # (the median round: less noise)
    churned, ran = sorted(rounds)[2][0] * 5, sum(r[1] for r in rounds)
    return {
        "case": case, "build_s": round(built, 3), "session_s": round(median, 5),
        "min_s": round(min(times), 5), "max_s": round(max(times), 5),
        "dispatched": len(result.dispatch),  # type: ignore[attr-defined]
        "churn_s": round(churned, 3), "churn_jobs": ran,
        "rss_mb": round(peak_rss_mb(), 1),
    }


def side_by_side(jobs: int, runs: int) -> dict[str, float]:
    """The alike jobs and the array in one process, measured in turn (the machine's
    noise then falls on both alike): session medians, churn round medians."""
    alike, array = build("alike", jobs), build("array", jobs)
    settle_heap()
    times: dict[str, list[float]] = {"alike": [], "array": []}
    rounds: dict[str, list[float]] = {"alike": [], "array": []}
    for turn in range(runs):
        pairs = [("alike", alike), ("array", array)]
        for name, state in pairs if turn % 2 else pairs[::-1]:
            started = time.perf_counter()
            run_session(state, 100.0)
            times[name].append(time.perf_counter() - started)
    for turn in range(10):
        pairs = [("alike", alike), ("array", array)]
        for name, state in pairs if turn % 2 else pairs[::-1]:
            rounds[name].append(churn(state, 10)[0])
    return {f"{kind}_{name}": statistics.median(found[name])
            for kind, found in (("session", times), ("churn", rounds)) for name in found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--case", choices=CASES, help="run one case in this process")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per case")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case, args.jobs, args.runs)))
        return
    print(machine())
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    for repeat in range(args.repeats):  # (cases alternate: the machine's noise is shared)
        order = CASES[repeat % len(CASES):] + CASES[:repeat % len(CASES)]
        for case in order:
            out = subprocess.run(
                [sys.executable, __file__, "--case", case, "--runs", str(args.runs),
                 "--jobs", str(args.jobs)], capture_output=True, text=True, check=True,
            )
            runs[case].append(json.loads(out.stdout))
    found = {case: {key: statistics.median(r[key] for r in runs[case])
                    for key in ("build_s", "session_s", "churn_s", "rss_mb")}
             for case in CASES}
    for case in CASES:
        print(json.dumps({"case": case, **found[case],
                          "dispatched": runs[case][0]["dispatched"],
                          "churn_jobs": runs[case][0]["churn_jobs"]}))
    for key in ("build_s", "rss_mb"):
        ratio = found["array"][key] / found["alike"][key]
        print(f"array / alike {key}: {ratio:.3f} (target <= 1.10)")
    both = side_by_side(args.jobs, args.runs * 2)
    print(json.dumps({key: round(value, 5) for key, value in both.items()}))
    for kind in ("session", "churn"):
        ratio = both[f"{kind}_array"] / both[f"{kind}_alike"]
        print(f"array / alike {kind} (one process, in turn): {ratio:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
