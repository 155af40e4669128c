"""Admission means what it says (issue 21, part 6), as a property: on an empty cluster,
a job admission accepts is eventually placed by the scheduler when the supply its
demand asks for arrives (hosts of templates join, tokens are lent); a job it refuses
is never placed and never asks for anything. (Limits are left out: admission does not
read them.)"""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from strategies import worlds

from xce.model.cluster import ClusterConfig
from xce.model.events import HostAdded, JobSubmitted, SupplyChanged
from xce.model.jobs import JobSpec
from xce.sched.admission import refusal
from xce.sched.errors import SubmitError
from xce.sched.session import run_session
from xce.sched.state import SchedulerState

PROPS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ROUNDS = 6  # sessions: supply for what one asked for arrives before the next


def eventually(config: ClusterConfig, spec: JobSpec) -> tuple[bool, bool]:
    """Whether the job, alone on the empty cluster, is placed within ROUNDS sessions
    given what each session's demand asks for; and whether it asked for anything."""
    state = SchedulerState(config)
    state.apply(JobSubmitted(job=spec))
    joined, borrowed, asked = 0, dict[str, float](), False
    for step in range(ROUNDS):
        now = 1000.0 + step
        result = run_session(state, now)
        if any(d.job == spec.id for d in result.dispatch):
            return True, asked
        demand = result.demand
        if not demand.hosts and not demand.resources:
            return False, asked
        asked = True
        for entry in demand.hosts:
            template = state.templates[entry.template]
            for _ in range(entry.count):
                joined += 1
                state.apply(HostAdded(
                    name=f"{template.name}-{joined}", slots=template.slots,
                    type=template.type, model=template.model,
                    resources=dict(template.resources), template=template.name, time=now,
                ))
        for token in demand.resources:
            borrowed[token.resource] = borrowed.get(token.resource, 0.0) + token.amount
        if demand.resources:
            state.apply(SupplyChanged(borrowed=dict(borrowed), time=now))
    return False, asked


@PROPS
@given(world=worlds())
def test_accepted_jobs_eventually_run_and_refused_ones_never_do(world: object) -> None:
    config = msgspec.structs.replace(world.config, limits=())  # type: ignore[attr-defined]
    specs = list(world.jobs.values())[:4]  # type: ignore[attr-defined]
    for spec in specs:
        spec = msgspec.structs.replace(spec, hold=False, priority=0)
        state = SchedulerState(config)
        try:
            spec = state.resolve(spec)
        except SubmitError:
            continue
        why = refusal(state, spec)
        placed, asked = eventually(config, spec)
        if why is None:
            assert placed, f"job {spec.n} x {spec.res!r} (gpus {spec.gpus}) was accepted " \
                           "but never ran"
        else:
            assert not placed and not asked, (
                f"job {spec.n} x {spec.res!r} was refused ({why}) yet "
                f"{'ran' if placed else 'asked for supply'}"
            )
