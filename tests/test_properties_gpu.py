"""Property tests of GPUs as LSF counts them (docs/scheduling.md, "GPUs").

Small clusters of hosts with and without GPUs, jobs asking for GPUs per host (with
and without span, order[] and select[] on ngpus), several sessions in a row with jobs
starting where the session dispatched them and some ending in between. Usage is
recomputed from the drawn jobs and the dispatches (each job counts its GPUs on every
host it runs on), never read from the scheduler's counters.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.model.cluster import (
    Catalog,
    ClusterConfig,
    HostSpec,
    HostTemplate,
    Queue,
)
from xce.model.events import ConfigLoaded, JobFinished, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.sched.session import run_session
from xce.sched.state import SchedulerState

PROPS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REQS = ("", "", "span[hosts=1]", "span[ptile=2]", "order[ngpus]", "order[-ngpus]",
        "select[ngpus>0]", "select[ngpus>=2] span[ptile=3]")


@dataclass(frozen=True)
class World:
    config: ClusterConfig
    jobs: tuple[JobSpec, ...]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    count = draw(st.integers(1, 4))
    hosts = tuple(
        HostSpec(name=f"h{i}", slots=draw(st.integers(1, 8)), gpus=draw(st.integers(0, 4)))
        for i in range(count)
    )
    templates: tuple[HostTemplate, ...] = ()
    if draw(st.booleans()):
        templates = (
            HostTemplate(name="gpu", provider="p", slots=draw(st.integers(1, 8)),
                         gpus=draw(st.integers(0, 8)), max=draw(st.integers(0, 3))),
        )
    config = ClusterConfig(
        hosts=hosts,
        queues=(Queue(name="normal", priority=30, backfill=draw(st.booleans())),),
        reserve_depth=draw(st.integers(0, 2)),
        catalog=Catalog(templates=templates),
    )
    jobs = tuple(
        JobSpec(
            id=job_id, n=draw(st.integers(1, 6)), gpus=draw(st.integers(0, 3)),
            res=draw(st.sampled_from(REQS)), submit=float(job_id),
            run_limit=draw(st.sampled_from([None, 10.0, 100.0, 1000.0])),
        )
        for job_id in range(1, draw(st.integers(1, 10)) + 1)
    )
    return World(config, jobs)


def check_usage(world: World, running: dict[int, dict[str, int]]) -> None:
    """No host gives more slots or GPUs than it has to the jobs running on it, and a
    GPU job runs only on hosts with at least its GPUs."""
    by_id = {job.id: job for job in world.jobs}
    for host in world.config.hosts:
        slots = gpus = 0
        for job_id, placed in running.items():
            if host.name in placed:
                slots += placed[host.name]
                gpus += by_id[job_id].gpus
                assert by_id[job_id].gpus <= host.gpus, (job_id, host)
        assert slots <= host.slots, (host, running)
        assert gpus <= host.gpus, (host, running)


@PROPS
@given(worlds(), st.data())
def test_gpus_are_never_over_allocated_on_any_host(world: World, data: st.DataObject) -> None:
    state = SchedulerState()
    state.apply(ConfigLoaded(config=world.config))
    for job in world.jobs:
        state.apply(JobSubmitted(job=job))
    running: dict[int, dict[str, int]] = {}
    now = 100.0
    for _ in range(4):
        result = run_session(state, now)
        for d in result.dispatch:
            assert d.job not in running
            running[d.job] = d.hosts
            state.apply(JobStarted(job=d.job, hosts=d.hosts, time=now))
        check_usage(world, running)
        ending = data.draw(st.sets(st.sampled_from(sorted(running)))) if running else set()
        now += 50.0
        for job_id in sorted(ending):
            del running[job_id]
            state.apply(JobFinished(job=job_id, time=now))
        column = state.free_res.get("ngpus")
        by_id = {job.id: job for job in world.jobs}
        for host in world.config.hosts:
            used = sum(by_id[j].gpus for j, placed in running.items() if host.name in placed)
            if column is not None:
                index = state.host_by_name[host.name].index
                assert column[index] == host.gpus - used, "the state counts GPUs as the model"


@PROPS
@given(worlds())
def test_reservations_book_no_more_gpus_than_their_hosts_have(world: World) -> None:
    """A reservation's hosts each have the job's GPUs per host (configured), and a
    job pending for GPUs asks for some."""
    state = SchedulerState()
    state.apply(ConfigLoaded(config=world.config))
    for job in world.jobs:
        state.apply(JobSubmitted(job=job))
    result = run_session(state, 100.0)
    gpus_of = {host.name: host.gpus for host in world.config.hosts}
    by_id = {job.id: job for job in world.jobs}
    for booked in result.reservations:
        for name in booked.hosts:
            if name in gpus_of:
                assert by_id[booked.job].gpus <= gpus_of[name]
    for group in result.pending:
        if group.reason.startswith("Not enough GPUs"):
            assert all(by_id[job].gpus for job in group.jobs)
