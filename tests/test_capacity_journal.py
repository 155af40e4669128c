"""A session changes the state's free slots and open hosts in place (a journaled
Capacity, sched/capacity.py) and must leave them as it found them: with
dispatches, reservations held back, virtual hosts of the catalog pass, and when the
session fails part way."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import World, worlds

from xce.config import load_config_text
from xce.model.events import JobSubmitted
from xce.model.jobs import JobSpec
from xce.sched.capacity import Capacity
from xce.sched.session import run_session
from xce.sched.state import SchedulerState
from xce.sched.usage import SLOTS_ONLY
from xce.sched.virtual import virtual_of

PROPS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def free_capacity(state: SchedulerState) -> tuple[list[int], set[int], dict[str, list[float]]]:
    return (
        list(state.free_slots),
        set(state.open_free),
        {res: list(column) for res, column in state.free_res.items()},
    )


@PROPS
@given(worlds("demand"))
def test_a_session_with_supply_leaves_the_state_as_found(world: World) -> None:
    state = world.state()
    before = free_capacity(state)
    result = run_session(state, world.now)
    assert free_capacity(state) == before
    # and a second session on the state decides the same (nothing left behind)
    assert run_session(state, world.now).dispatch == result.dispatch


@PROPS
@given(worlds("general"))
def test_a_session_leaves_the_state_as_found(world: World) -> None:
    state = world.state()
    before = free_capacity(state)
    run_session(state, world.now, reasons=False)
    assert free_capacity(state) == before


def test_restore_undoes_takes_hold_backs_and_virtual_hosts() -> None:
    state = SchedulerState(load_config_text(
        "hosts:\n  - {name: 'h[1-4]', slots: 4}\n"
        "queues:\n  - {name: normal, priority: 30, hosts: [all, 'template:*']}\n"
        "catalog:\n  templates:\n  - {name: t, provider: p, slots: 8, max: 4}\n"
    ))
    before = free_capacity(state)
    cap = Capacity(state, journaled=True)
    assert cap.free_slots is state.free_slots  # (changed in place: no copy)
    cap.take({0: 4, 1: 2}, SLOTS_ONLY, {}, ())
    cap.hold_back([(1, 2, ())], -1)
    cap.hold_back([(1, 1, ())], +1)
    record, resources = virtual_of(state, state.ranked[0])
    first = cap.add_hosts(record, resources, [3, 8], SLOTS_ONLY)
    assert state.free_slots[0] == 0 and 0 not in state.open_free
    assert first in state.open_free and len(state.free_slots) == 6
    assert cap.free_at_start() == 16
    cap.restore()
    assert free_capacity(state) == before
    cap.restore()  # (twice: nothing more to undo)
    assert free_capacity(state) == before


def test_a_session_that_fails_part_way_leaves_the_state_as_found() -> None:
    state = SchedulerState(load_config_text(
        "hosts:\n  - {name: 'h[1-2]', slots: 2}\nqueues:\n  - {name: normal, priority: 30}\n"
    ))
    state.apply(JobSubmitted(job=JobSpec(id=1, user="u", queue="normal", n=3, submit=0.0)))
    before = free_capacity(state)
    calls = 0

    def clock() -> float:  # fails when read after the real pass (its dispatch made)
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("the clock failed")
        return 0.0

    with pytest.raises(RuntimeError):
        run_session(state, 1.0, timer=clock)
    assert free_capacity(state) == before
    assert run_session(state, 1.0).dispatch[0].hosts == {"h1": 2, "h2": 1}
