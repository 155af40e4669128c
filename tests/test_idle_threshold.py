"""An idle provisioned host's threshold is one sum, idle_since + its idle time: at
every instant the host is either idle (in the session's idle supply) or has that time
still to come as the session's `next_due` (`xce.sched.idle`). Two forms of the same
test (now - idle_since >= limit against idle_since + limit > now) disagree by a
rounding error, and a host could be neither: no timer, no reclaim until some other
event ran a session."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from xce.model.cluster import Catalog, ClusterConfig, HostTemplate, Queue
from xce.model.events import HostAdded
from xce.sched.capacity import Capacity
from xce.sched.idle import idle_due, idle_supply
from xce.sched.state import SchedulerState


def idle_host(idle_since: float, idle_time: float) -> SchedulerState:
    catalog = Catalog(templates=(
        HostTemplate(name="a", provider="p", slots=4, max=5, idle_time=idle_time),
    ))
    state = SchedulerState(ClusterConfig(queues=(Queue("normal", 30),), catalog=catalog))
    state.apply(HostAdded(name="a-1", slots=4, template="a", time=idle_since,
                          idle_since=idle_since))
    return state


def is_idle(state: SchedulerState, now: float) -> bool:
    return [h.host for h in idle_supply(state, now, [], Capacity(state)).hosts] == ["a-1"]


def test_a_host_at_its_threshold_is_idle_though_the_difference_rounds_below() -> None:
    idle_since, idle_time = 76096.24449125756, 120.7
    now = idle_since + idle_time
    assert now - idle_since < idle_time, "the case: the difference rounds below the limit"
    state = idle_host(idle_since, idle_time)
    assert is_idle(state, now), "due at idle_since + idle time: idle then"
    assert idle_due(state, now) == math.inf, "idle now: no later threshold"


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0, 1e7, allow_nan=False),
    st.floats(0.001, 1e5, allow_nan=False),
    st.floats(-2.0, 2.0, allow_nan=False),
)
def test_an_idle_host_is_idle_or_due_later(
    idle_since: float, idle_time: float, offset: float
) -> None:
    state = idle_host(idle_since, idle_time)
    due = idle_since + idle_time
    for now in (due, math.nextafter(due, -math.inf), due + offset):
        if now < idle_since:
            continue
        idle = is_idle(state, now)
        timer = idle_due(state, now)
        assert idle != (timer > now and timer != math.inf), (now, idle, timer)
        if not idle:
            assert timer == due, "not idle yet: due at idle_since + its idle time"
