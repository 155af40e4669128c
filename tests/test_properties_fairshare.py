"""Property tests of fairshare (docs/scheduling.md, "Fairshare").

A drawn usage history (jobs of several users that ran, some still running) and
pending jobs of those users in one fairshare queue. The scheduler state is built the
way the simulator builds it (each event as it happens) and the way a restarted
controller rebuilds it (from a snapshot's events, `state_events`); both must give the
same priorities and the same dispatch order, bit for bit, and that order must be the
one LSF's formula gives, computed here directly from the history (not incrementally:
an independent reference).
"""

from __future__ import annotations

import math
from itertools import pairwise

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from xce.model.cluster import ClusterConfig, HostSpec, Queue
from xce.model.events import (
    ConfigLoaded,
    HostStateChanged,
    JobFinished,
    JobStarted,
    JobSubmitted,
    SchedulerEvent,
)
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events

PROPS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
USERS = ("ann", "ben", "cyd", "dee")
HOUR = 3600.0
FREE = 3  # slots the pending jobs compete for


# (user, slots, start, run seconds or None: still running)
Ran = tuple[str, int, float, float | None]


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, float], list[Ran], list[str], float]:
    shares = {u: float(draw(st.integers(1, 20))) for u in USERS}
    ran = draw(st.lists(
        st.tuples(
            st.sampled_from(USERS), st.integers(1, 8), st.floats(0, 20 * HOUR),
            st.one_of(st.none(), st.floats(60, 10 * HOUR)),
        ),
        max_size=12,
    ))
    pending = draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=8))
    now = 31 * HOUR + draw(st.floats(0, 10 * HOUR))
    return shares, ran, pending, now


def events_of(shares: dict[str, float], ran: list[Ran], pending: list[str]) -> list[
    SchedulerEvent
]:
    """The history as the simulator applies it: in time order."""
    config = ClusterConfig(
        hosts=(HostSpec("hist", 10_000), HostSpec("n1", FREE)),
        queues=(Queue("fs", hosts=("n1",), fairshare=tuple(shares.items())),),
    )
    events: list[SchedulerEvent] = [ConfigLoaded(config=config)]
    timed: list[tuple[float, int, SchedulerEvent]] = []
    for job, (user, slots, start, run) in enumerate(ran, 1):
        events.append(JobSubmitted(job=JobSpec(id=job, user=user, queue="fs", n=slots)))
        timed.append((start, job, JobStarted(job=job, hosts={"hist": slots}, time=start)))
        if run is not None:
            timed.append((start + run, job, JobFinished(job=job, time=start + run)))
    events.extend(event for _t, _j, event in sorted(timed, key=lambda t: (t[0], t[1])))
    events.append(HostStateChanged(name="hist", state="closed"))
    for at, user in enumerate(pending):
        job = 100 + at
        events.append(JobSubmitted(job=JobSpec(id=job, user=user, queue="fs", submit=at)))
    return events


def reference(shares: dict[str, float], ran: list[Ran], now: float) -> dict[str, float]:
    """Each user's dynamic priority from LSF's formula, straight from the history."""
    found = {}
    for user in USERS:
        cpu = run_time = 0.0
        slots = 0
        for who, used, start, run in ran:
            if who != user:
                continue
            if run is None:
                run_time += used * (now - start) / HOUR
                slots += used
            else:
                cpu += used * run / HOUR * 0.5 ** ((now - start - run) / (5 * HOUR))
        found[user] = shares[user] / (cpu * 0.7 + run_time * 0.7 + (1 + slots) * 3)
    return found


@PROPS
@given(histories())
def test_the_order_is_lsfs_and_the_same_simulated_or_rebuilt(drawn) -> None:
    shares, ran, pending, now = drawn
    simulated = SchedulerState()
    simulated.apply_all(events_of(shares, ran, pending))
    rebuilt = SchedulerState()
    rebuilt.apply_all(state_events(simulated))
    assert rebuilt.fairshare_table(None, now) == simulated.fairshare_table(None, now)
    order = [d.job for d in run_session(simulated, now).dispatch]
    assert [d.job for d in run_session(rebuilt, now).dispatch] == order

    expected = reference(shares, ran, now)
    values = sorted(expected[u] for u in set(pending))
    # (priorities that differ by rounding only: the reference sums in another order)
    assume(all(not math.isclose(a, b, rel_tol=1e-9) for a, b in pairwise(values)))
    ranked = sorted(range(len(pending)), key=lambda at: (-expected[pending[at]], at))
    assert order == [100 + at for at in ranked[:FREE]]
