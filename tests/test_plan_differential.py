"""Reservations stack as ARCHITECTURE.md section 2a says, job by job: XCE's simulator
against a plain reading of the section, written here for one-slot hosts and any
`reserve_depth`, on random small workloads.

The reading (`plan_starts`): sessions at every submit and end (ends first). In a
session, per host, the plan is a list of busy intervals: running jobs until their
planned end (start + limit, one second from now when past it, never without a limit),
this session's dispatches for their limit, reservations from their start for their
limit. Pending jobs in (submit, id) order: a job starts now on the first hosts by name
that stay free over its window, [now, now + limit) (forever in a queue without
backfill); else, while fewer than `reserve_depth` reservations were made, it reserves,
for its limit, the first hosts by name free over [T, T + its window) for the earliest
such T among the ends of the intervals (none if it never fits). The window of the
reservation's search is docs/scheduling.md's reading where ARCHITECTURE.md reads
[T, T + limit) for every queue: a job of a queue without backfill never plans to use
a hole before another reservation either. With depth 1 and backfill the reading
decides as bench/easy_reference.py, which is checked too.
"""

from __future__ import annotations

import heapq
import math
import tempfile
import textwrap
from pathlib import Path

from easy_setup import easy, swf_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.config import load_config_text
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

# submit, run, processors, requested time (-1: none), queue (1 or 2)
Row = tuple[int, int, int, int, int]
Backfill = tuple[bool, bool]  # whether queues q1 and q2 backfill
PRIORITY = {1: 30, 2: 50}  # of queues q1 and q2
Busy = list[list[tuple[float, float]]]  # per host: the intervals it is busy in


def free_over(busy: Busy, start: float, end: float) -> list[int]:
    """The hosts, by name, busy at no time of [start, end)."""
    return [h for h, spans in enumerate(busy) if all(b <= start or a >= end for a, b in spans)]


def earliest(busy: Busy, now: float, procs: int, window: float) -> tuple[float, list[int]] | None:
    """The earliest start after now among the intervals' ends at which `procs` hosts
    stay free for `window`, and those hosts (the first by name); None if never."""
    points = sorted({b for spans in busy for _a, b in spans if now < b < math.inf})
    for t in points:
        hosts = free_over(busy, t, t + window)
        if len(hosts) >= procs:
            return t, hosts[:procs]
    return None


def plan_starts(
    processors: int, rows: list[Row], depth: int, backfill: Backfill = (True, True)
) -> dict[int, float]:
    """Each job's start (jobs numbered from 1 in row order) under the reading above;
    in a queue without backfill, a job starts now only on hosts free from now on."""
    jobs = sorted((s, i, p, r, q if q > 0 else math.inf, queue)
                  for i, (s, r, p, q, queue) in enumerate(rows, start=1))
    running: dict[int, tuple[list[int], float]] = {}  # job -> hosts, planned end
    ends: list[tuple[float, int]] = []  # (end, job)
    pending: list[tuple[float, int, int, int, float, int]] = []
    starts: dict[int, float] = {}
    arrived = 0
    while arrived < len(jobs) or ends:
        now = min(jobs[arrived][0] if arrived < len(jobs) else math.inf,
                  ends[0][0] if ends else math.inf)
        while ends and ends[0][0] == now:
            del running[heapq.heappop(ends)[1]]
        while arrived < len(jobs) and jobs[arrived][0] == now:
            pending.append(jobs[arrived])
            arrived += 1
        busy: Busy = [[] for _ in range(processors)]
        for hosts, planned in running.values():
            for h in hosts:
                busy[h].append((now, planned if planned > now else now + 1))
        reserved, left = 0, []
        # scheduling order: queue priority (q2 before q1), submit time, id
        for job in sorted(pending, key=lambda j: (-PRIORITY[j[5]], j[0], j[1])):
            _submit, jid, procs, run, limit, queue = job
            window = limit if backfill[queue - 1] else math.inf
            hosts = free_over(busy, now, now + window)
            if len(hosts) >= procs:
                starts[jid] = now
                running[jid] = (hosts[:procs], now + limit)
                heapq.heappush(ends, (now + run, jid))
                for h in hosts[:procs]:
                    busy[h].append((now, now + limit))
                continue
            left.append(job)
            if reserved < depth and (found := earliest(busy, now, procs, window)) is not None:
                reserved += 1
                for h in found[1]:
                    busy[h].append((found[0], found[0] + limit))
        pending = left
    return starts


def xce_starts(
    processors: int, rows: list[Row], depth: int, backfill: Backfill
) -> dict[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "random.swf"
        path.write_text(swf_text(processors, [(i, *row) for i, row in enumerate(rows, 1)]))
        q1, q2 = (str(b).lower() for b in backfill)
        config = load_config_text(textwrap.dedent(f"""\
            cluster: plan
            session_interval: 1
            reserve_depth: {depth}
            hosts:
              - {{name: "h[01-{processors:02d}]", slots: 1}}
            queues:
              - {{name: q1, priority: {PRIORITY[1]}, backfill: {q1}}}
              - {{name: q2, priority: {PRIORITY[2]}, backfill: {q2}}}
            simulation: {{enforce_run_limits: false}}
            """), "plan.yaml")
        sim = Simulator(config, load_workload(path), reasons=False)
        sim.run()
        first = min(row[0] for row in rows)
        easy_like = depth == 1 and len({q for *_r, q in rows}) == 1 and backfill[rows[0][4] - 1]
        reference = easy.simulate(easy.read_swf(str(path))).starts if easy_like else None
    got = {job: first + start for job, start in sim.metrics.started.items()}
    if reference is not None:
        assert plan_starts(processors, rows, 1, backfill) == reference, "the reading is not EASY"
    return got


@st.composite
def workloads(draw: st.DrawFn) -> tuple[int, list[Row]]:
    processors = draw(st.integers(1, 10))
    one_queue = draw(st.booleans())
    submit, rows = 0, []
    for _ in range(draw(st.integers(1, 25))):
        submit += draw(st.sampled_from([0, 0, 1, 3, 10]))
        run = draw(st.integers(1, 30))
        limit = draw(st.sampled_from([-1, run, run + 1, max(1, run - 2), 4, 15, 40]))
        queue = 1 if one_queue else draw(st.integers(1, 2))
        rows.append((submit, run, draw(st.integers(1, processors)), limit, queue))
    return processors, rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=workloads(), depth=st.integers(1, 4),
    backfill=st.tuples(st.booleans(), st.booleans()),
)
def test_stacked_reservations_start_jobs_as_section_2a_reads(
    workload: tuple[int, list[Row]], depth: int, backfill: Backfill
) -> None:
    processors, rows = workload
    expected = plan_starts(processors, rows, depth, backfill)
    got = xce_starts(processors, rows, depth, backfill)
    assert got == expected, "\n".join(
        f"job {job} {rows[job - 1]}: reading {expected.get(job)}, XCE {got.get(job)}"
        for job in sorted(set(expected) | set(got)) if expected.get(job) != got.get(job)
    )
