"""A start of the last session's own dispatch takes the hosts that session found, by
index (sched/running.py `start_job`, `Placed`): the same running job as a start
resolved by name, and never a stale index once hosts came or went."""

from __future__ import annotations

import textwrap

import pytest

from xce.config import load_config_text
from xce.model.events import (
    ConfigLoaded,
    HostAdded,
    HostRemoved,
    JobStarted,
    JobSubmitted,
)
from xce.model.jobs import JobSpec
from xce.sched.errors import SchedulerInputError
from xce.sched.session import run_session
from xce.sched.state import SchedulerState

CLUSTER = textwrap.dedent("""\
    cluster: placed
    hosts:
      - {name: "h[001-004]", slots: 2}
    queues:
      - {name: normal, priority: 30}
    catalog:
      templates:
        - {name: burst, provider: cloud, slots: 2, max: 4}
    """)


def loaded(*jobs: JobSpec) -> SchedulerState:
    state = SchedulerState(load_config_text(CLUSTER, "placed.yaml"))
    for job in jobs:
        state.apply(JobSubmitted(job=job))
    return state


def test_a_dispatch_started_as_dispatched_runs_where_a_start_by_name_runs() -> None:
    jobs = [JobSpec(id=1, n=3), JobSpec(id=2, n=2, res="span[hosts=1]"),
            JobSpec(id=3, n=1, exclusive=True)]
    own, named = loaded(*jobs), loaded(*jobs)
    result = run_session(own, 0, None, False)
    assert [d.job for d in result.dispatch] == [1, 2, 3]
    assert set(own.placed) == {1, 2, 3}
    for d in result.dispatch:
        own.apply(JobStarted(job=d.job, hosts=d.hosts, time=0))  # the result's object
        named.apply(JobStarted(job=d.job, hosts=dict(d.hosts), time=0))  # a copy
    for d in result.dispatch:
        run = own.running[d.job]
        assert {own.names[i]: slots for i, slots in run.hosts.items()} == d.hosts
        assert run.hosts == named.running[d.job].hosts
        assert run.held == named.running[d.job].held
    assert own.free_slots == named.free_slots == [0, 1, 0, 0]
    assert own.open_free == named.open_free == {1}
    assert own.busy_slots == named.busy_slots == 6


def test_a_host_gone_since_the_session_is_not_started_on_by_its_old_index() -> None:
    """h001 leaves and a burst host joins in its index: the dispatch on h001 names a
    host that is no more, and is refused as any start on an unknown host is."""
    state = loaded(JobSpec(id=1, n=2))
    result = run_session(state, 0, None, False)
    (dispatch,) = result.dispatch
    assert dispatch.hosts == {"h001": 2}
    state.apply(HostRemoved(name="h001", time=1))
    state.apply(HostAdded(name="burst-1", slots=2, template="burst", time=1))
    assert state.names.index("burst-1") == 0, "the index h001 had"
    with pytest.raises(SchedulerInputError, match="unknown host 'h001'"):
        state.apply(JobStarted(job=1, hosts=dispatch.hosts, time=1))
    assert not state.running and state.free_slots[0] == 2


@pytest.mark.parametrize("hosts", ['- {name: "g[001-004]", slots: 2}', "[]"])
def test_a_new_configuration_without_the_hosts_refuses_the_old_dispatch(hosts: str) -> None:
    """Other hosts, or none (a new configuration's hosts are put in label order anew:
    then none is)."""
    state = loaded(JobSpec(id=1, n=2))
    (dispatch,) = run_session(state, 0, None, False).dispatch
    text = CLUSTER.replace('\n  - {name: "h[001-004]", slots: 2}', " " + hosts if hosts == "[]"
                           else "\n  " + hosts)
    state.apply(ConfigLoaded(config=load_config_text(text, "placed.yaml")))
    with pytest.raises(SchedulerInputError, match="unknown host 'h001'"):
        state.apply(JobStarted(job=1, hosts=dispatch.hosts, time=1))
    assert not state.running
