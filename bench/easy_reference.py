"""An independent EASY backfill simulator, host by host, after ARCHITECTURE.md section 2a.

Written from the spec, not from XCE's code, as the yardstick of issue 17:

* One 1-slot host per processor, named h0001, h0002, ... (so "name order" is the
  host number). Machine size from the SWF header's MaxProcs (else MaxNodes).
* Jobs in FCFS order by (submit, id); all of them backfill. A session runs at every
  submit and every end time; a session at t sees every end and submit at t (ends
  first).
* Run limit: SWF field 9 when > 0, else none (window forever, planned never to end).
  Limits are not enforced: a job runs its recorded run time; a running job past its
  limit is planned to end one second from now.
* reserve_depth 1. In each session, pending jobs in order: a job starts now if enough
  hosts stay free over [now, now + limit). The first job that does not fit (and can
  fit at all) gets a reservation at the earliest T among now and the planned ends at
  which enough hosts are free over [T, T + limit): the hosts free at T, by name. Later
  jobs start now only on hosts free over their window given that reservation: free
  hosts not reserved, or reserved ones when they end by T.
* Skipped: records with run time <= 0 or processors <= 0 (field 5, else field 8),
  submit < 0, and jobs wider than the machine.

Free hosts are bit masks (bit i = host i + 1), so "the first k by name" is the k
lowest set bits. Run: python bench/easy_reference.py TRACE.swf.gz [TRACE ...]
"""

from __future__ import annotations

import bisect
import gzip
import heapq
import resource
import sys
import time
from dataclasses import dataclass, field

INF = float("inf")
TAU = 10.0


@dataclass
class Trace:
    machine: int
    jobs: list[tuple[float, int, int, float, float]]  # (submit, id, procs, run, limit)
    skipped: int = 0


@dataclass
class Result:
    jobs: int
    skipped: int
    wait_mean: float
    bsld_mean: float
    wait_max: float
    wide_wait_max: float
    wall_seconds: float
    peak_rss_mb: float
    starts: dict[int, float] = field(default_factory=dict, repr=False)


def machine_size(path: str) -> int:
    """MaxProcs, else MaxNodes, from an SWF trace's header."""
    return read_swf(path, header_only=True).machine


def read_swf(path: str, first: int | None = None, header_only: bool = False) -> Trace:
    """The usable jobs of an SWF trace in (submit, id) order (the first `first` of them
    when given), without those wider than the machine."""
    opener = gzip.open if path.endswith(".gz") else open
    header: dict[str, int] = {}
    jobs: list[tuple[float, int, int, float, float]] = []
    skipped = 0
    with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                words = value.split()
                if words and words[0].isdigit():
                    header[key.strip()] = int(words[0])
                continue
            if header_only:
                break
            f = line.split()
            if len(f) < 9:
                continue
            submit, run = float(f[1]), float(f[3])
            procs = int(float(f[4])) if float(f[4]) > 0 else int(float(f[7]))
            if run <= 0 or procs <= 0 or submit < 0:
                skipped += 1
                continue
            limit = float(f[8]) if float(f[8]) > 0 else INF
            jobs.append((submit, int(f[0]), procs, run, limit))
    machine = header.get("MaxProcs") or header.get("MaxNodes") or 0
    if not machine:
        raise ValueError(f"{path}: no MaxProcs or MaxNodes in the header")
    jobs.sort(key=lambda j: (j[0], j[1]))
    if first is not None:
        jobs = jobs[:first]
    fitting = [j for j in jobs if j[2] <= machine]
    return Trace(machine, fitting, skipped + len(jobs) - len(fitting))


def lowest(mask: int, k: int) -> int:
    """The k lowest set bits of `mask` (the first k hosts by name)."""
    taken = 0
    for _ in range(k):
        bit = mask & -mask
        taken |= bit
        mask ^= bit
    return taken


def simulate(trace: Trace) -> Result:
    started_at = time.perf_counter()
    jobs = trace.jobs
    free = (1 << trace.machine) - 1  # hosts free now
    running: list[tuple[float, int, int]] = []  # (planned end, id, hosts mask), sorted
    ends: list[tuple[float, int, int, float]] = []  # heap of (end, id, hosts, planned)
    pending: list[int] = []  # indices into jobs, in (submit, id) order
    start = [0.0] * len(jobs)
    nxt = 0  # next job to arrive
    while nxt < len(jobs) or ends:
        now = min(jobs[nxt][0] if nxt < len(jobs) else INF, ends[0][0] if ends else INF)
        while ends and ends[0][0] == now:  # ends first
            _, jid, hosts, planned = heapq.heappop(ends)
            free |= hosts
            del running[bisect.bisect_left(running, (planned, jid, hosts))]
        while nxt < len(jobs) and jobs[nxt][0] == now:
            pending.append(nxt)
            nxt += 1
        if free and pending:  # (with no free host, nothing could start now)
            free = session(now, jobs, pending, free, running, ends, start)
    return summarize(trace, start, started_at)


def session(now: float, jobs: list, pending: list[int], free: int,
            running: list, ends: list, start: list[float]) -> int:
    """One scheduling session at `now`; returns the free mask after it."""
    reserved = None  # (T, reserved free hosts mask) once the head job has one
    nfree = free.bit_count()
    left: list[int] = []
    for pos, i in enumerate(pending):
        if not free:
            left.extend(pending[pos:])
            break
        _, jid, procs, run, limit = jobs[i]
        if reserved is None or now + limit <= reserved[0]:  # (ends before it starts)
            usable, count = free, nfree
        else:  # only free hosts the reservation does not need
            usable = free & ~reserved[1]
            count = usable.bit_count()
        if procs <= count:
            hosts = lowest(usable, procs)
            free ^= hosts
            nfree -= procs
            start[i] = now
            planned = now + limit
            bisect.insort(running, (planned, jid, hosts))
            heapq.heappush(ends, (now + run, jid, hosts, planned))
            continue
        left.append(i)
        if reserved is None:
            reserved = reserve(now, procs, free, nfree, running)
    pending[:] = left
    return free


def reserve(now: float, procs: int, free: int, nfree: int,
            running: list[tuple[float, int, int]]) -> tuple[float, int] | None:
    """The head job's reservation: (start T, the free-now hosts it holds), or None.

    With only running jobs in the profile, a host is free over [T, T + limit) iff its
    planned end is at most T, so T is the (procs - free)-th planned end (overdue jobs
    end at now + 1, all before the others); its hosts: the first `procs` by name among
    the hosts free at T. (Nothing is booked after T, so the head job's limit does not
    matter.) Only the free-now ones matter to this session's later jobs.
    """
    # Planned ends, each job counted once per host it holds; overdue ones at now + 1.
    need = procs - nfree
    seen = 0
    T = INF
    for planned, _, hosts in running:
        seen += hosts.bit_count()
        if seen >= need:
            T = planned if planned > now else now + 1
            break
    if T == INF:
        return None  # can never fit: no reservation
    # Hosts free at T: the free ones and those of jobs planned to end by T.
    at_t = free
    for planned, _, hosts in running:
        if (planned if planned > now else now + 1) > T:
            break
        at_t |= hosts
    return T, lowest(at_t, procs) & free


def summarize(trace: Trace, start: list[float], started_at: float) -> Result:
    wide = trace.machine / 4
    waits, bslds, wide_max = [], [], 0.0
    for (submit, _, procs, run, _), s in zip(trace.jobs, start, strict=True):
        wait = s - submit
        waits.append(wait)
        bslds.append(max(1.0, (wait + run) / max(run, TAU)))
        if procs >= wide:
            wide_max = max(wide_max, wait)
    n = len(waits) or 1
    return Result(
        jobs=len(waits), skipped=trace.skipped, wait_mean=sum(waits) / n,
        bsld_mean=sum(bslds) / n, wait_max=max(waits, default=0.0), wide_wait_max=wide_max,
        wall_seconds=time.perf_counter() - started_at,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        starts={j[1]: s for j, s in zip(trace.jobs, start, strict=True)},
    )


def main(paths: list[str]) -> None:
    print(f"{'trace':<36} {'jobs':>7} {'wait mean':>10} {'bsld':>7} {'wait max':>10} "
          f"{'wide max':>10} {'wall':>6} {'RSS':>6}  (wall: the simulation alone)")
    for path in paths:
        started = time.perf_counter()
        trace = read_swf(path)
        read = time.perf_counter() - started
        r = simulate(trace)
        name = path.rsplit("/", 1)[-1]
        print(f"{name:<36} {r.jobs:>7} {r.wait_mean:>10,.0f} {r.bsld_mean:>7.1f} "
              f"{r.wait_max:>10,.0f} {r.wide_wait_max:>10,.0f} {r.wall_seconds:>5.1f}s "
              f"{r.peak_rss_mb:>4.0f}MB  (reading the trace: {read:.1f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
