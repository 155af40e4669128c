"""Issue 21 part 5 (and -m/-x of part 4): host groups and user groups in the cluster
file, queue `users:`, `bsub -m` host lists and `bsub -x` exclusive jobs, each checked
on a small scenario with its exact outcome (docs/configuration.md, docs/cli.md)."""

from __future__ import annotations

import textwrap

import pytest

from xce.config import ConfigError, load_config_text
from xce.model.events import JobFinished, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.scenario import load_scenario_text
from xce.sched import run_session
from xce.sched.state import SchedulerState, SubmitError

GROUPS = """\
hosts:
  - {name: "n[01-10]", slots: 4}
host_groups:
  gpu_hosts: ["n[01-04]", n09]
  big: [n10, "template:aws.r5*", gpu_hosts]
user_groups:
  eda: [alice, bob, "group:other"]
  other: [carol]
queues:
  - {name: short, hosts: [big], users: [dave, "group:eda"]}
  - {name: normal, hosts: [gpu_hosts, n05]}
shared:
  vcs: [{pool: site, total: 4, hosts: [gpu_hosts]}]
resources:
  vcs: {shared: true}
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config_text(textwrap.dedent(text), "cluster.yaml")
    return str(caught.value)


# --------------------------------------------------------------------------- config


def test_groups_expand_into_host_lists_and_user_lists() -> None:
    config = load_config_text(GROUPS.replace("resources:\n  vcs: {shared: true}\n", "")
                              .replace("shared:\n  vcs: [{pool: site, total: 4, hosts: "
                                       "[gpu_hosts]}]\n", ""), "cluster.yaml")
    assert config.host_groups == {
        "gpu_hosts": ("n01", "n02", "n03", "n04", "n09"),
        "big": ("n10", "template:aws.r5*", "n01", "n02", "n03", "n04", "n09"),
    }
    assert config.user_groups == {"eda": ("alice", "bob", "carol"), "other": ("carol",)}
    short, normal = config.queues
    assert short.hosts == ("n10", "template:aws.r5*", "n01", "n02", "n03", "n04", "n09")
    assert short.hosts_as_written == ("big",)
    assert short.users == ("dave", "alice", "bob", "carol")
    assert short.users_as_written == ("dave", "group:eda")
    assert normal.hosts == ("n01", "n02", "n03", "n04", "n09", "n05")
    assert normal.users is None


def test_a_shared_pool_takes_host_groups() -> None:
    text = "resources:\n  vcs: {shared: true}\n" + GROUPS.split("resources:")[0]
    config = load_config_text(text, "cluster.yaml")
    assert config.shared["vcs"][0].hosts == ("n01", "n02", "n03", "n04", "n09")


def test_users_all_is_everyone() -> None:
    config = load_config_text(
        "queues:\n  - {name: q, users: [all, bob]}\n", "cluster.yaml"
    )
    assert config.queues[0].users is None


@pytest.mark.parametrize(("text", "message"), [
    ("hosts:\n  - {name: n01, slots: 1}\nhost_groups:\n  g: [n01, n99]\n",
     "cluster.yaml:4: host_groups.g[1]: unknown host 'n99'"),
    ("hosts:\n  - {name: n01, slots: 1}\nhost_groups:\n  n01: [n01]\n",
     "cluster.yaml:4: host_groups.n01: host group 'n01' is named like a host"),
    ("hosts:\n  - {name: n01, slots: 1}\nhost_groups:\n  a: [b]\n  b: [n01, a]\n",
     "cluster.yaml:5: host_groups.b[1]: host group cycle: a -> b -> a"),
    ("hosts:\n  - {name: n01, slots: 1}\nhost_groups:\n  a: [a]\n",
     "cluster.yaml:4: host_groups.a[0]: host group cycle: a -> a"),
    ("hosts:\n  - {name: n01, slots: 1}\nhost_groups:\n  a: []\n",
     "cluster.yaml:4: host_groups.a: must not be empty"),
    ("hosts:\n  - {name: n01, slots: 1}\nqueues:\n  - {name: q, hosts: [nogroup]}\n",
     "cluster.yaml:4: queues[0].hosts[0]: unknown host 'nogroup'"),
    ("user_groups:\n  eda: [alice, 'group:nope']\n",
     "cluster.yaml:2: user_groups.eda[1]: unknown user group 'nope'"),
    ("user_groups:\n  a: ['group:b']\n  b: ['group:a']\n",
     "cluster.yaml:3: user_groups.b[0]: user group cycle: a -> b -> a"),
    ("queues:\n  - {name: q, users: ['group:eda']}\n",
     "cluster.yaml:2: queues[0].users[0]: unknown user group 'eda'"),
    ("queues:\n  - {name: q, users: []}\n",
     "cluster.yaml:2: queues[0].users: must not be empty (omit users for every user)"),
    ("queues:\n  - {name: q, users: bob}\n",
     "cluster.yaml:2: queues[0].users: expected a list, got a string ('bob')"),
])
def test_group_and_access_errors_name_file_line_and_field(text: str, message: str) -> None:
    assert error_of(text) == message


# --------------------------------------------------------------------------- the core


def state_of(text: str) -> SchedulerState:
    return SchedulerState(load_config_text(textwrap.dedent(text), "cluster.yaml"))


def test_a_user_not_in_the_queue_users_is_refused_in_the_core() -> None:
    state = state_of(GROUPS)
    with pytest.raises(SubmitError) as caught:
        state.resolve(JobSpec(id=1, user="erin", queue="short"))
    assert str(caught.value) == (
        "User erin cannot use queue short (queue users: dave, group:eda)"
    )
    assert state.resolve(JobSpec(id=1, user="carol", queue="short")).queue == "short"
    # a job taken again (a log, a new configuration) is not refused: it was checked
    state.apply(JobSubmitted(JobSpec(id=2, user="erin", queue="short")))
    assert 2 in state.pending
    assert state.resolve(JobSpec(id=3, user="erin", queue="normal")).queue == "normal"


def test_m_resolves_groups_and_refuses_unknown_names() -> None:
    state = state_of(GROUPS)
    spec = state.resolve(JobSpec(id=1, queue="normal", hosts=("gpu_hosts", "n05")))
    assert spec.hosts == ("n01", "n02", "n03", "n04", "n09", "n05")
    spec = state.resolve(JobSpec(id=1, queue="normal", hosts=("template:aws.*",)))
    assert spec.hosts == ("template:aws.*",)
    with pytest.raises(SubmitError) as caught:
        state.resolve(JobSpec(id=1, queue="normal", hosts=("n01", "nope")))
    assert str(caught.value) == "-m: unknown host or host group 'nope'"


SMALL = """\
now: 100
cluster:
  hosts:
    - {name: "n[01-03]", slots: 4}
  host_groups:
    two: [n02, n03]
  catalog:
    templates:
      - {name: aws.c5, provider: aws, slots: 4, max: 5}
%s
"""


def session_of(jobs: str, *events: object):
    sc = load_scenario_text(SMALL % textwrap.indent(textwrap.dedent(jobs), ""), "s.yaml")
    state = sc.state()
    for event in events:
        state.apply(event)  # type: ignore[arg-type]
    return state, run_session(state, sc.now)


def test_m_restricts_the_hosts_a_job_may_use() -> None:
    _state, result = session_of("""\
        jobs:
          - {id: 1, n: 4, hosts: [n03]}
          - {id: 2, n: 8, hosts: [two]}
          - {id: 3, n: 2, hosts: [n01]}
        """)
    placed = {d.job: d.hosts for d in result.dispatch}
    # job 1 takes n03 whole; job 2 needs 8 slots on n02+n03 and finds only n02's 4
    assert placed == {1: {"n03": 4}, 3: {"n01": 2}}


def test_m_naming_only_static_hosts_creates_no_template_demand() -> None:
    _state, result = session_of("""\
        jobs:
          - {id: 10, n: 12, state: RUN, hosts: {n01: 4, n02: 4, n03: 4}, start: 0}
          - {id: 2, n: 4, hosts: [two], submit: 1}
          - {id: 3, n: 4, hosts: ["template:aws.*"], submit: 2}
          - {id: 4, n: 4, submit: 3}
        """)
    assert result.dispatch == []
    demand = result.to_json_obj()["demand"]
    assert demand["hosts"] == [
        {"template": "aws.c5", "count": 2, "in_flight_used": 0, "jobs": [3, 4]}
    ]
    assert result.reason_of(2) == "Not enough job slots: 4 needed, 0 free on eligible hosts"
    assert [(t.check, t.detail) for t in result.trace_of(2) if t.stage == "catalog"] == [
        ("hosts", "the job's host list (-m) does not name template aws.c5")
    ]


def test_an_exclusive_job_waits_for_an_empty_host_and_then_runs_alone() -> None:
    state, result = session_of("""\
        jobs:
          - {id: 10, n: 1, state: RUN, hosts: {n01: 1}, start: 0}
          - {id: 11, n: 1, state: RUN, hosts: {n02: 1}, start: 0}
          - {id: 12, n: 1, state: RUN, hosts: {n03: 1}, start: 0}
          - {id: 1, n: 2, exclusive: true, hosts: [n01, n02, n03], submit: 1}
          - {id: 2, n: 1, submit: 2}
        """)
    placed = {d.job: d.hosts for d in result.dispatch}
    assert placed == {2: {"n01": 1}}  # job 1 waits: every host runs a job
    assert result.reason_of(1) == (
        "Exclusive job (-x): no eligible host is free of other jobs (3 open, each running jobs)"
    )
    state.apply(JobStarted(job=2, hosts={"n01": 1}, time=100))
    state.apply(JobFinished(job=11, time=100))  # n02 empties
    result = run_session(state, 101)
    assert {d.job: d.hosts for d in result.dispatch} == {1: {"n02": 2}}
    state.apply(JobStarted(job=1, hosts={"n02": 2}, time=101))
    assert state.host_by_name["n02"].running == {1: 4}  # it holds the whole host
    # A job that would fit in n02's 2 free slots does not start there
    state.apply(JobSubmitted(JobSpec(id=3, n=2, hosts=("n02",), submit=102)))
    result = run_session(state, 102)
    assert result.dispatch == []
    assert result.reason_of(3) == "Not enough job slots: 2 needed, 0 free on eligible hosts"
    state.apply(JobFinished(job=1, time=103))
    result = run_session(state, 103)
    assert {d.job: d.hosts for d in result.dispatch} == {3: {"n02": 2}}


def test_an_exclusive_job_in_the_catalog_pass_takes_whole_new_hosts() -> None:
    _state, result = session_of("""\
        jobs:
          - {id: 10, n: 12, state: RUN, hosts: {n01: 4, n02: 4, n03: 4}, start: 0}
          - {id: 1, n: 1, exclusive: true, submit: 1}
          - {id: 2, n: 1, exclusive: true, submit: 2}
          - {id: 3, n: 1, submit: 3}
          - {id: 4, n: 1, submit: 4}
        """)
    demand = result.to_json_obj()["demand"]
    # jobs 1 and 2 each need a host of their own; 3 and 4 share a third
    assert demand["hosts"] == [
        {"template": "aws.c5", "count": 3, "in_flight_used": 0, "jobs": [1, 2, 3, 4]}
    ]


def test_scenario_hosts_is_a_list_for_pending_jobs_and_a_mapping_for_running_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        session_of("jobs:\n  - {id: 1, hosts: {n01: 1}}\n")
    assert str(caught.value) == (
        "s.yaml:11: jobs[0].hosts: hosts is a list of host names or groups (bsub -m); "
        "a mapping is only for RUN jobs"
    )
    with pytest.raises(ConfigError) as caught:
        session_of("jobs:\n  - {id: 1, hosts: [n09]}\n")
    assert str(caught.value) == "s.yaml:11: jobs[0]: -m: unknown host or host group 'n09'"


def test_a_yaml_workload_carries_hosts_and_exclusive(tmp_path) -> None:
    from xce.sim.workload import load_workload

    path = tmp_path / "w.yaml"
    path.write_text("jobs:\n  - {id: 1, run: 5, hosts: [two, n01], exclusive: true}\n"
                    "  - {id: 2, run: 5}\n")
    first, second = load_workload(path).jobs
    assert (first.hosts, first.exclusive) == (("two", "n01"), True)
    assert (second.hosts, second.exclusive) == ((), False)


def test_the_simulator_runs_exclusive_jobs_alone_and_refuses_queue_users(tmp_path) -> None:
    from xce.sim.driver import Simulator
    from xce.sim.workload import load_workload

    config = load_config_text(textwrap.dedent("""\
        session_interval: 10
        hosts:
          - {name: n01, slots: 4}
        queues:
          - {name: normal}
          - {name: private, users: [bob]}
        """), "cluster.yaml")
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent("""\
        jobs:
          - {id: 1, run: 100, n: 1}
          - {id: 2, run: 50, n: 1, exclusive: true, submit: 5}
          - {id: 3, run: 10, n: 1, submit: 6}
          - {id: 4, run: 10, n: 1, user: alice, queue: private, submit: 7}
        """))
    sim = Simulator(config, load_workload(path))
    sim.run()
    # job 3 starts beside job 1; job 2 waits for n01 to empty (job 3 ends at 20, job
    # 1 at 100), then runs alone
    assert sim.metrics.started == {1: 0, 3: 10, 2: 100}
    assert sim.metrics.refused == [4]
