"""Scenario specifications of fairshare (docs/scheduling.md, "Fairshare").

Each test is a small cluster, a usage history given as the events that make it (jobs
started and ended at given times), and the exact order LSF's formula gives, worked out
by hand in the test:

    priority = shares / (cpu_time x 0.7 + run_time x 0.7 + (1 + running slots) x 3)

with cpu_time the slot-hours of ended jobs halved every hist_hours (5 h) since they
ended, run_time the slot-hours running jobs have run so far.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import run_scenario

from xce.config import ConfigError, load_config_text
from xce.model.events import Event, FairshareRestored, JobFinished, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.scenario import load_scenario_text
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events

HOUR = 3600.0

# Four slots; alice 10 shares, bob 5, everyone else (carol) 1.
SHARED = """
    now: {now}
    cluster:
      fairshare: {{hist_hours: {hist_hours}}}
      hosts:
        - {{name: h1, slots: 2}}
        - {{name: h2, slots: {h2}}}
      queues:
        - {{name: shared, priority: 30, fairshare: {{alice: 10, bob: 5, default: 1}}}}
    jobs:
      - {{id: 1, user: alice, queue: shared, submit: 100}}
      - {{id: 2, user: bob, queue: shared, submit: 50}}
      - {{id: 3, user: carol, queue: shared, submit: 10}}
      - {{id: 4, user: alice, queue: shared, submit: 200}}
      - {{id: 5, user: bob, queue: shared, submit: 60, priority: {priority}}}
"""


def shared(now: float, hist_hours: float = 5, h2: int = 2, priority: int = 0) -> str:
    return SHARED.format(now=now, hist_hours=hist_hours, h2=h2, priority=priority)


def ran(job: int, user: str, slots: int, start: float, end: float | None,
        queue: str = "shared", hosts: dict[str, int] | None = None) -> list[Event]:
    """The events of a job of `user` that ran `slots` slots from `start` (to `end`)."""
    spec = JobSpec(id=job, user=user, queue=queue, n=slots, submit=0)
    placed = hosts or {"h1": 2, "h2": 2}
    events: list[Event] = [
        JobSubmitted(job=spec), JobStarted(job=job, hosts=placed, time=start)
    ]
    if end is not None:
        events.append(JobFinished(job=job, time=end))
    return events


def state_of(text: str, events: list[Event]) -> tuple[SchedulerState, float]:
    scenario = load_scenario_text(textwrap.dedent(text), "scenario.yaml")
    state = scenario.state()
    state.apply_all(events)
    return state, scenario.now


def test_without_usage_users_go_by_shares_then_their_own_jobs_by_submit_time():
    s = run_scenario(shared(now=1000))
    assert s.dispatch_order == [1, 4, 2, 5], (
        "priorities 10/3 (alice) > 5/3 (bob) > 1/3 (carol, default): all of alice's jobs, "
        "then bob's, though carol's job 3 and bob's jobs were submitted first"
    )
    assert s.reasons == {3: "Not enough job slots: 1 needed, 0 free on eligible hosts"}
    assert [(e.job, e.detail) for e in s.result.trace if e.check == "fairshare"] == [
        (2, "Fairshare in queue shared: user bob (dynamic priority 1.667) comes after "
            "user alice (3.333)"),
        (3, "Fairshare in queue shared: user carol (dynamic priority 0.333) comes after "
            "user bob (1.667)"),
    ], "the trace says who fairshare put each user behind, with both priorities"


def test_decayed_usage_puts_a_heavy_user_behind_a_lighter_one():
    # alice ran 4 slots for 5 h, ended at 5 h; at 10 h her 20 slot-hours count 10:
    # 10 / (10 x 0.7 + 3) = 1.0 < bob's 5 / 3.
    history = ran(90, "alice", 4, 0, 5 * HOUR)
    s = run_scenario(shared(now=int(10 * HOUR)), history)
    assert s.dispatch_order == [2, 5, 1, 4]
    state, now = state_of(shared(now=int(10 * HOUR)), history)
    (table,) = state.fairshare_table("shared", now)
    assert [(r.user, r.cpu_time, r.priority) for r in table.users] == [
        ("bob", 0.0, 5 / 3), ("alice", 10.0, 1.0), ("carol", 0.0, 1 / 3),
    ]


@pytest.mark.parametrize(
    ("hours_after", "order"),
    [
        # 20 x 0.5^2 = 5 slot-hours: 10 / (3.5 + 3) = 1.54 < 1.67: bob first
        (10, [2, 5, 1, 4]),
        # 20 x 0.5^2.4 = 3.79: 10 / (2.65 + 3) = 1.77 > 1.67: alice first again
        (12, [1, 4, 2, 5]),
    ],
)
def test_usage_decays_with_the_half_life_until_the_order_turns_back(hours_after, order):
    history = ran(90, "alice", 4, 0, 5 * HOUR)
    now = int((5 + hours_after) * HOUR)
    assert run_scenario(shared(now=now), history).dispatch_order == order


def test_hist_hours_is_the_half_life():
    # With hist_hours 1, 10 h after it ended alice's usage is 20 / 2^10 slot-hours:
    # 10 / (0.0137 + 3) = 3.32 > bob's 5/3, she is first again (with 5 h: bob first).
    history = ran(90, "alice", 4, 0, 5 * HOUR)
    assert run_scenario(shared(now=15 * HOUR, hist_hours=1), history).dispatch_order == [
        1, 4, 2, 5
    ]
    assert run_scenario(shared(now=15 * HOUR), history).dispatch_order == [2, 5, 1, 4]


def test_running_slots_and_run_time_count_against_a_user():
    # alice runs 2 slots since 1 h: 10 / (2 x 0.7 + 3 x 3) = 0.96 < bob's 5/3 and also
    # above carol's 1/3; 2 slots are free.
    history = ran(90, "alice", 2, 0, None, hosts={"h1": 2})
    s = run_scenario(shared(now=int(HOUR)), history)
    assert s.dispatch_order == [2, 5]
    state, now = state_of(shared(now=int(HOUR)), history)
    (table,) = state.fairshare_table(None, now)
    alice = next(r for r in table.users if r.user == "alice")
    assert (alice.started, alice.run_time, alice.priority) == (2, 2.0, 10 / (1.4 + 9))


GROUPS = """
    now: 3600
    cluster:
      user_groups: {eda: [carol, dave]}
      hosts:
        - {name: h1, slots: 4}
      queues:
        - {name: shared, fairshare: {alice: 10, "group:eda": 20}}
    jobs:
      - {id: 9, user: carol, queue: shared, state: RUN, hosts: {h1: 1}, start: 0}
      - {id: 10, user: carol, queue: shared, submit: 0}
      - {id: 11, user: dave, queue: shared, submit: 5}
      - {id: 12, user: alice, queue: shared, submit: 9}
      - {id: 13, user: carol, queue: shared, submit: 1}
"""


def test_a_group_is_one_account_and_its_members_split_its_shares():
    # eda: 20 / (1 slot-hour x 0.7 + (1 + 1) x 3) = 2.985 < alice's 10/3; within eda,
    # dave (10 shares, nothing used: 3.333) before carol (10 / 6.7 = 1.49).
    s = run_scenario(GROUPS)
    assert s.dispatch_order == [12, 11, 10], "alice, then eda's members: dave, then carol"
    assert s.reasons == {13: "Not enough job slots: 1 needed, 0 free on eligible hosts"}
    state, now = state_of(GROUPS, [])
    (table,) = state.fairshare_table("shared", now)
    assert [
        (r.user, r.account, r.shares, r.user_shares, r.started, r.priority, r.priority_within)
        for r in table.users
    ] == [
        ("alice", "alice", 10.0, 10.0, 0, 10 / 3, None),
        ("dave", "group:eda", 20.0, 10.0, 1, 20 / 6.7, 10 / 3),
        ("carol", "group:eda", 20.0, 10.0, 1, 20 / 6.7, 10 / 6.7),
    ]
    assert any(
        e.detail == "Fairshare in queue shared: user carol (dynamic priority 1.493 within "
        "group:eda) comes after user dave (3.333)" for e in s.result.trace
    )


def test_a_user_with_no_share_and_no_default_comes_last():
    text = shared(now=1000).replace(", default: 1", "")
    s = run_scenario(text)
    assert s.dispatch_order == [1, 4, 2, 5]
    assert s.reasons == {3: "Not enough job slots: 1 needed, 0 free on eligible hosts"}


def test_job_priority_orders_a_users_own_jobs_not_users():
    s = run_scenario(shared(now=1000, h2=1, priority=90))
    assert s.dispatch_order == [1, 4, 5], (
        "bob's priority-90 job goes before his older job 2, but after alice's jobs"
    )


def test_queue_priority_comes_before_fairshare_and_equal_priority_fairshare_first():
    text = """
        now: 100
        cluster:
          hosts:
            - {name: h1, slots: 2}
          queues:
            - {name: urgent, priority: 50}
            - {name: shared, priority: 30, fairshare: {default: 1}}
            - {name: normal, priority: 30}
        jobs:
          - {id: 1, user: a, queue: normal, submit: 0}
          - {id: 2, user: b, queue: shared, submit: 5}
          - {id: 3, user: c, queue: urgent, submit: 9}
    """
    assert run_scenario(text).dispatch_order == [3, 2]


def test_a_rebuilt_state_keeps_the_history_and_the_order_exactly():
    history = [
        *ran(90, "alice", 4, 0, 5 * HOUR), *ran(91, "bob", 1, 100, 2 * HOUR, hosts={"h1": 1})
    ]
    text = shared(now=int(7 * HOUR))
    state, now = state_of(text, history)
    rebuilt = SchedulerState()
    events = state_events(state)
    assert [e for e in events if isinstance(e, FairshareRestored)] == [
        FairshareRestored(usage=state.fairshare.history())
    ]
    rebuilt.apply_all(events)
    assert rebuilt.fairshare_table(None, now) == state.fairshare_table(None, now)
    assert run_session(rebuilt, now).dispatch == run_session(state, now).dispatch


# --------------------------------------------------------------------- bad input


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config_text(textwrap.dedent(text), "cluster.yaml")
    return str(caught.value)


@pytest.mark.parametrize(
    ("shares", "message"),
    [
        ('{"group:ops": 5}',
         "queues[0].fairshare.group:ops: unknown user group 'ops' (user_groups: eda)"),
        ("{alice: 0}", "queues[0].fairshare.alice: shares must be > 0"),
        ("{alice: -2}", "queues[0].fairshare.alice: shares must be > 0"),
        ("{alice: lots}", "queues[0].fairshare.alice: expected a number, got a string ('lots')"),
        ("{}", "queues[0].fairshare: needs at least one share (omit fairshare: for none)"),
        ("[alice]", "queues[0].fairshare: expected a mapping, got a list"),
        ('{"two words": 1}', "queues[0].fairshare.two words: invalid user name 'two words'"),
    ],
)
def test_bad_shares_name_file_line_and_field(shares, message):
    text = f"""\
        user_groups: {{eda: [carol]}}
        hosts: [{{name: n01, slots: 4}}]
        queues:
          - name: shared
            fairshare: {shares}
    """
    assert error_of(text) == f"cluster.yaml:5: {message}"


@pytest.mark.parametrize(
    ("factors", "message"),
    [
        ("{run_job_factor: 0}", "fairshare.run_job_factor: run_job_factor must be > 0"),
        ("{cpu_time_factor: -1}", "fairshare.cpu_time_factor: cpu_time_factor must be >= 0"),
        ("{hist_hours: 0}", "fairshare.hist_hours: hist_hours must be > 0"),
        ("{half_life: 5}", "fairshare.half_life: unknown key 'half_life'"),
    ],
)
def test_bad_factors_name_file_line_and_field(factors, message):
    assert error_of(f"hosts: [{{name: n01, slots: 4}}]\nfairshare: {factors}\n") == (
        f"cluster.yaml:2: {message}"
    )


def test_any_user_name_may_hold_shares():
    config = load_config_text(
        "queues:\n  - {name: s, fairshare: {nobody_known: 3, default: 1}}\n", "c.yaml"
    )
    assert config.queues[0].fairshare == (("nobody_known", 3.0), ("default", 1.0))


def test_the_bundled_example_gives_the_order_docs_scheduling_md_works_out():
    from xce.cli.sched_cmd import example_path
    from xce.scenario import load_scenario

    scenario = load_scenario(example_path("fairshare"))
    state = scenario.state()
    result = run_session(state, scenario.now)
    assert [d.job for d in result.dispatch] == [12, 13]
    (table,) = state.fairshare_table("shared", scenario.now)
    assert [(r.user, round(r.priority, 3)) for r in table.users] == [
        ("carol", 6.667), ("dave", 6.667), ("bob", 1.667), ("alice", 0.847), ("erin", 0.333)
    ]
    assert result.trace_of(11)[0].detail == (
        "Fairshare in queue shared: user alice (dynamic priority 0.847) comes after user "
        "bob (1.667)"
    )
