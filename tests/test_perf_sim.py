"""Property tests of the shortcuts the simulator and the scheduler core take for speed
(bench/RESULTS.md): each must give exactly what the long way gives.

* `quiet_memory`: a policy round the simulator skips would have decided nothing and
  left exactly that memory (checked against `decide`).
* `EventLoop.stream`: arrivals merged from a sorted stream run in the same order, at
  the same times, as if each had been scheduled with `at` before anything else.
* `SchedulerState.idle_in_order`: when set, idle provisioned hosts are in order of
  idle time (the simulator's timer relies on it).
* The plain-bucket placement (`spread` over `default_ranked`, or `spread_everywhere`)
  is `place`'s; the state's `label_order` holds the hosts present, by their sort
  labels, and each label is what its host has done (sched/labels.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.model.cluster import Catalog, HostTemplate
from xce.model.policy import PolicyConfig
from xce.model.result import Demand, HostDemand, Idle, IdleResource, ResourceDemand
from xce.policy import PolicyInput, PolicyMemory, ProvisionedHost, decide, quiet_memory
from xce.sched.capacity import Capacity
from xce.sched.labels import FRESH, label_of
from xce.sched.placement import (
    HostOrder,
    Room,
    default_ranked,
    place,
    spread,
    spread_everywhere,
)
from xce.sched.state import SchedulerState
from xce.sched.usage import SLOTS_ONLY
from xce.sim.loop import INPUT, SESSION, TIMER, EventLoop

PROPS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TEMPLATES = ("a", "b", "c")
CATALOG = Catalog(
    idle_time=600,
    templates=tuple(
        HostTemplate(name=t, provider="p", slots=4, max=5, rank=i)
        for i, t in enumerate(TEMPLATES)
    ),
)

# ----------------------------------------------------------------------------- policy

times = st.sampled_from([0.0, 50.0, 100.0, 1000.0, 5000.0])
counts = st.integers(0, 3)
templates = st.sampled_from(TEMPLATES)


@st.composite
def rounds(draw: st.DrawFn) -> tuple[PolicyInput, PolicyMemory, PolicyConfig]:
    """A policy round with no failures, no idle host and only provisioned hosts no
    round would drain or decommission (closed and busy, or unreachable): the
    simulator's precondition for asking quiet_memory."""
    now = draw(st.sampled_from([1000.0, 2000.0]))
    demand = Demand(
        hosts=[
            HostDemand(t, draw(counts), draw(counts), [1])
            for t in draw(st.lists(templates, max_size=2, unique=True))
        ],
        resources=[
            ResourceDemand("vcs", draw(st.sampled_from([0.0, 1.0])), 0.0, [1])
            for _ in range(draw(st.integers(0, 1)))
        ],
    )
    idle = Idle(
        hosts=[],
        resources=[IdleResource("vcs", 1.0) for _ in range(draw(st.integers(0, 1)))],
    )
    hosts = [
        ProvisionedHost(
            f"h{i}", draw(templates), draw(st.sampled_from(["closed", "unreach"])),
            draw(times), draw(st.integers(1, 2)),
        )
        for i in range(draw(st.integers(0, 3)))
    ]
    in_flight = {t: draw(counts) for t in TEMPLATES}
    alive = {t: draw(counts) for t in TEMPLATES}
    joined = draw(st.lists(templates, max_size=2))
    inp = PolicyInput(
        now=now, demand=demand, idle=idle, hosts=hosts, in_flight=in_flight, alive=alive,
        failures=[], joined=joined,
    )
    memory = PolicyMemory(
        demand_since={t: draw(times) for t in draw(st.lists(templates, max_size=2))},
        backoff_until={t: draw(times) for t in draw(st.lists(templates, max_size=1))},
        backoff_delay={t: draw(times) for t in draw(st.lists(templates, max_size=2))},
    )
    config = PolicyConfig(
        persistence=draw(st.sampled_from([0.0, 60.0])),
        min_hosts={t: draw(counts) for t in draw(st.lists(templates, max_size=2))},
        max_lifetime=draw(st.sampled_from([0.0, 86400.0])),
    )
    return inp, memory, config


@PROPS
@given(rounds())
def test_a_skipped_policy_round_is_one_that_decides_nothing(
    drawn: tuple[PolicyInput, PolicyMemory, PolicyConfig],
) -> None:
    inp, memory, config = drawn
    quiet = quiet_memory(
        inp.demand, inp.idle, memory, config, inp.in_flight, inp.alive, list(inp.joined)
    )
    if quiet is None:
        return  # the simulator runs the round
    actions, after = decide(inp, memory, config, CATALOG)
    assert actions == []
    assert after == quiet


def test_quiet_rounds_do_occur() -> None:
    """The property above is not vacuous: an empty round is quiet."""
    memory = PolicyMemory(demand_since={"a": 5.0}, backoff_delay={"a": 60.0})
    quiet = quiet_memory(Demand(), Idle(), memory, PolicyConfig(), {}, {}, ["a"])
    assert quiet == PolicyMemory()
    inp = PolicyInput(now=100.0, demand=Demand(), idle=Idle(), hosts=[], in_flight={},
                      joined=["a"])
    assert decide(inp, memory, PolicyConfig(), CATALOG) == ([], quiet)


# ----------------------------------------------------------------------------- loop


@st.composite
def schedules(draw: st.DrawFn) -> tuple[list[float], list[tuple[int, float, int]]]:
    """Arrival times (sorted) and, per arrival, actions it schedules: (delay index,
    delay, priority)."""
    arrivals = sorted(draw(st.lists(st.sampled_from([0, 0.0, 1, 1.0, 2.5, 5, 10.0]),
                                    max_size=12)))
    follow = draw(st.lists(st.tuples(st.integers(0, 11), st.sampled_from([0, 0.0, 1.5, 3]),
                                     st.sampled_from([INPUT, SESSION, TIMER])),
                           max_size=12))
    return arrivals, follow


def _trace(arrivals: list[float], follow: list[tuple[int, float, int]], streamed: bool
           ) -> list[tuple[str, Any, str]]:
    loop = EventLoop()
    seen: list[tuple[str, Any, str]] = []

    def arrive(i: int) -> None:
        seen.append((f"arrival {i}", loop.now, type(loop.now).__name__))
        for k, (who, delay, priority) in enumerate(follow):
            if who == i:
                name = f"action {i}.{k}"
                loop.at(loop.now + delay, lambda name=name: seen.append(
                    (name, loop.now, type(loop.now).__name__)), priority)

    if streamed:
        loop.stream([max(t, loop.now) for t in arrivals], arrive)
    else:  # the old way: every arrival scheduled first
        for i, t in enumerate(arrivals):
            loop.at(t, lambda i=i: arrive(i))
    work = []
    while True:
        work.append(loop.work)
        if not loop.step():
            break
    seen.append(("work", tuple(work), ""))
    return seen


@PROPS
@given(schedules())
def test_streamed_arrivals_run_as_if_scheduled_first(
    drawn: tuple[list[float], list[tuple[int, float, int]]],
) -> None:
    arrivals, follow = drawn
    assert _trace(arrivals, follow, True) == _trace(arrivals, follow, False)


def test_a_stream_must_be_sorted_and_first() -> None:
    loop = EventLoop()
    with pytest.raises(ValueError, match="sorted"):
        loop.stream([2.0, 1.0], lambda i: None)
    loop.at(1.0, lambda: None)
    with pytest.raises(RuntimeError, match="first"):
        loop.stream([1.0], lambda i: None)


# ----------------------------------------------------------------------------- idle order


@st.composite
def idle_histories(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Provisioned hosts joining, running and finishing jobs at times that mostly go
    forward and sometimes back (as a recording restored mid-run may)."""
    ops: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 25))):
        ops.append((draw(st.sampled_from(["add", "start", "finish", "remove"])),
                    (draw(st.integers(0, 5)), draw(st.sampled_from([0.0, 5.0, 10.0, 20.0])),
                     draw(st.one_of(st.none(), st.sampled_from([1.0, 15.0]))))))
    return ops


@PROPS
@given(idle_histories())
def test_idle_in_order_means_idle_hosts_are_in_order_of_idle_time(
    ops: list[tuple[str, Any]],
) -> None:
    from xce.model.cluster import ClusterConfig, Queue
    from xce.model.events import HostAdded, HostRemoved, JobFinished, JobStarted, JobSubmitted
    from xce.model.jobs import JobSpec

    state = SchedulerState(ClusterConfig(queues=(Queue("normal", 30),), catalog=CATALOG))
    running: dict[str, int] = {}
    job = 0
    for op, (host_no, time, idle_since) in ops:
        name = f"a-{host_no}"
        if op == "add" and name not in state.host_by_name:
            state.apply(HostAdded(name=name, slots=4, template="a", time=time,
                                  idle_since=idle_since))
        elif op == "start" and name in state.host_by_name and name not in running:
            job += 1
            state.apply(JobSubmitted(job=JobSpec(id=job, user="u", queue="normal", n=1)))
            state.apply(JobStarted(job=job, hosts={name: 1}, time=time))
            running[name] = job
        elif op == "finish" and name in running:
            state.apply(JobFinished(job=running.pop(name), time=time))
        elif op == "remove" and name in state.host_by_name and name not in running:
            state.apply(HostRemoved(name=name))
        if state.idle_in_order:
            since = [h.idle_since for h in state.idle_provisioned.values()]
            assert since == sorted(since)
        # Hosts come and go (their indices reused) and run their first jobs: the label
        # order follows them, each label as its host is now.
        present = [h for h in state.hosts if h is not None]
        assert [state.labels[h.index] for h in present] == [label_of(state, h) for h in present]
        assert state.label_order == sorted(
            [h.index for h in present], key=lambda i: state.labels[i]
        )
        assert state.fresh == {h.index for h in present if label_of(state, h)[0] == FRESH}
        # ... and while the state says the hosts are numbered in that order, they are
        if state.indexed_labels:
            assert state.label_order == sorted(state.label_order)


# ----------------------------------------------------------------------------- placement


@st.composite
def capacities(draw: st.DrawFn) -> tuple[SchedulerState, list[int], int]:
    """Hosts with some free slots, candidates among them and a job's slot count."""
    from xce.model.cluster import ClusterConfig, HostSpec, Queue
    from xce.model.events import JobStarted, JobSubmitted
    from xce.model.jobs import JobSpec

    count = draw(st.integers(1, 8))
    slots = [draw(st.integers(1, 6)) for _ in range(count)]
    names = draw(st.permutations([f"n{i:02d}" for i in range(count)]))
    state = SchedulerState(ClusterConfig(
        hosts=tuple(HostSpec(name=names[i], slots=slots[i]) for i in range(count)),
        queues=(Queue("normal", 30),),
    ))
    uniform = draw(st.booleans())  # every host as free as the others, or not
    for i in range(count):
        used = slots[i] - 1 if uniform else draw(st.integers(0, slots[i] - 1))
        if used:
            state.apply(JobSubmitted(job=JobSpec(id=i + 1, user="u", queue="normal", n=used)))
            state.apply(JobStarted(job=i + 1, hosts={names[i]: used}, time=0.0))
    cands = sorted(draw(st.sets(st.sampled_from(sorted(state.open_free)), min_size=1))
                   if state.open_free else [])
    total = sum(state.free_slots[i] for i in cands)
    return state, cands, draw(st.integers(2, max(2, total)))


@PROPS
@given(capacities())
def test_plain_placement_is_place(drawn: tuple[SchedulerState, list[int], int]) -> None:
    state, cands, n = drawn
    cap = Capacity(state)
    fast = spread(default_ranked(cands, cap.free_slots, cap.labels, cap.label_order),
                  cap.free_slots.__getitem__, n)
    slow = place(Room(cap, cands, SLOTS_ONLY), n, None, None, HostOrder(cap, ()))
    assert fast == slow
    if slow is not None:
        assert list(fast or {}) == list(slow)  # the same hosts, in the same order
    # Candidates that are a whole set (every open host with a free slot).
    everywhere = spread_everywhere(cands, set(cands), cap.free_slots, cap.labels,
                                   cap.label_order, n, cap.widest)
    assert everywhere == slow and list(everywhere or {}) == list(slow or {})
    # The default order itself: most free slots first, then by name.
    expected = sorted(cands, key=lambda i: (-cap.free_slots[i], cap.names[i]))
    assert default_ranked(cands, cap.free_slots, cap.labels, cap.label_order) == expected
    # Whether it sorts the labels or takes the state's label order (fewer candidates).
    assert default_ranked(cands, cap.free_slots, cap.labels, []) == expected
    # The first pick's shortcut through the label order, when it finds one, is the
    # most preferred host (it finds one whenever a host of the most slots is all free).
    key = HostOrder(cap, ())
    found = key.widest(set(cands))
    assert found is None or found == key.best(cands) == expected[0]
    if any(cap.free_slots[i] == state.widest for i in cands):
        assert found == expected[0]
    # The state's label order: every host present, by name (static hosts: labels are
    # names).
    present = [h.index for h in state.hosts if h is not None]
    assert state.label_order == sorted(present, key=lambda i: state.names[i])
