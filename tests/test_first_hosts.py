"""A reservation on one-slot hosts takes the first hosts by name that are free by its
start (sched/earliest.py `_first_hosts`): the same hosts as the general placement.

Two states are fed the same events; in the second, `widest` says hosts have had two
slots, which sends every placement through the general path (candidates, ranking,
spread). Sessions with pend reasons name their reservations' hosts: those, the
dispatches and the backfilled jobs must be equal.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_quiet import JOBS, Job, cluster

from xce.config import load_config_text
from xce.model.events import JobFinished, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.sched.session import run_session
from xce.sched.state import SchedulerState

# On 64 hosts: wide jobs fill the machine, and a narrow job blocked behind them finds
# fewer than 8 hosts free by its start (`_first_of_few`, not the walk of every host).
FEW = st.lists(
    st.tuples(
        st.integers(0, 40), st.integers(1, 200), st.sampled_from([1, 2, 3, 5, 7, 30, 50]),
        st.sampled_from([None, 20, 60, 150, 400]),
        st.sampled_from(["normal", "normal", "normal", "high"]), st.sampled_from([0, 0, 3]),
    ),
    min_size=1, max_size=40,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JOBS, st.booleans(), st.sampled_from([1, 2]))
def test_reservations_on_one_slot_hosts_take_the_hosts_the_general_placement_takes(
    rows: list[tuple[int, int, int, int | None, str, int]], backfill: bool, depth: int
) -> None:
    _compare(rows, 6, backfill, depth)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FEW, st.booleans(), st.sampled_from([1, 2]))
def test_reservations_when_few_hosts_are_free_by_the_start(
    rows: list[tuple[int, int, int, int | None, str, int]], backfill: bool, depth: int
) -> None:
    _compare(rows, 64, backfill, depth)


def _compare(
    rows: list[tuple[int, int, int, int | None, str, int]], hosts: int, backfill: bool,
    depth: int,
) -> None:
    """Every session of the workload on both states: the same decisions."""
    loaded = load_config_text(cluster(hosts, backfill=backfill, depth=depth), "first.yaml")
    fast, general = SchedulerState(loaded), SchedulerState(loaded)
    general.widest = 2
    jobs, submit = [], 0.0
    for i, (gap, run, n, limit, queue, priority) in enumerate(rows):
        submit += gap
        jobs.append(Job(i + 1, submit, float(run), n, limit, queue, priority))
    ends: list[tuple[float, int]] = []
    for job in [*jobs, Job(0, float("inf"), 0, 1, None)]:
        while ends and min(ends)[0] <= job.submit:
            now = min(ends)[0]
            for end in [e for e in ends if e[0] == now]:
                ends.remove(end)
                for state in (fast, general):
                    state.apply(JobFinished(job=end[1], time=now))
            _session(fast, general, now, ends, jobs)
        if job.id == 0:
            break
        for state in (fast, general):
            state.apply(JobSubmitted(job=JobSpec(
                id=job.id, queue=job.queue, n=job.n, submit=job.submit,
                run_limit=job.limit, priority=job.priority,
            )))
        _session(fast, general, job.submit, ends, jobs)


def _session(
    fast: SchedulerState, general: SchedulerState, now: float,
    ends: list[tuple[float, int]], jobs: list[Job],
) -> None:
    a, b = run_session(fast, now), run_session(general, now)
    assert a.dispatch == b.dispatch, now
    assert a.backfilled == b.backfilled, now
    assert a.reservations == b.reservations, now
    for d in a.dispatch:
        for state in (fast, general):
            state.apply(JobStarted(job=d.job, hosts=d.hosts, time=now))
        ends.append((now + jobs[d.job - 1].run, d.job))
