"""Property tests of a queue's `demand_after` (sched/demand_after.py; docs/policy.md,
"demand_after"), on the random demand worlds of tests/strategies.py (jobs submitted
at 0 to 30, the session at 1000, templates and countable resources).

* No job that has pended less than its queue's `demand_after` is in any demand
  (hosts or tokens), and each such job the catalog pass reached says why.
* The session falls due (`next_due`) no later than the first of those comes of age.
* A `demand_after` every job has outlived changes nothing: the session is the one
  without it, to the last field.
"""

from __future__ import annotations

import dataclasses

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import World, comparable, worlds

from xce.model.events import ConfigLoaded
from xce.model.result import SessionResult
from xce.sched.session import run_session

PROPS = settings(max_examples=300, deadline=None)
YOUNG = "Pending less than queue "


def with_demand_after(world: World, after: list[float]) -> World:
    """The world with its queues' `demand_after` (one value per queue, cycled)."""
    queues = tuple(
        msgspec.structs.replace(q, demand_after=after[i % len(after)])
        for i, q in enumerate(world.config.queues)
    )
    config = msgspec.structs.replace(world.config, queues=queues)
    assert isinstance(world.events[0], ConfigLoaded)
    return dataclasses.replace(
        world, config=config, events=[ConfigLoaded(config=config), *world.events[1:]]
    )


def session(world: World) -> SessionResult:
    return run_session(world.state(), world.now)


def demanded(result: SessionResult) -> set[int]:
    jobs = {j for h in result.demand.hosts for j in h.jobs}
    return jobs | {j for r in result.demand.resources for j in r.jobs}


# Ages at the session are 970 to 1000 s: these straddle them.
AFTERS = st.lists(st.sampled_from([0.0, 975.0, 985.0, 995.0, 5000.0]), min_size=1, max_size=3)


@PROPS
@given(worlds(flavor="demand"), AFTERS)
def test_young_jobs_ask_for_nothing_and_the_session_says_when_they_will(
    world: World, after: list[float]
) -> None:
    world = with_demand_after(world, after)
    result = session(world)
    now = world.now

    def young(job: int) -> bool:
        spec = world.jobs[job]
        return now - spec.submit < world.queue(spec.queue).demand_after

    assert not {j for j in demanded(result) if young(j)}, "a young job in the demand"
    told = {j for g in result.pending for j in g.jobs if g.reason.startswith(YOUNG)}
    assert all(young(j) for j in told), "an old job told it is young"
    if told:
        assert result.next_due <= min(
            world.jobs[j].submit + world.queue(world.jobs[j].queue).demand_after
            for j in told
        ), "a young job comes of age before the session falls due"


@PROPS
@given(worlds(flavor="demand"), st.sampled_from([1.0, 500.0, 970.0]))
def test_a_demand_after_every_job_has_outlived_changes_nothing(
    world: World, after: float
) -> None:
    assert comparable(session(with_demand_after(world, [after]))) == comparable(
        session(world)
    )
