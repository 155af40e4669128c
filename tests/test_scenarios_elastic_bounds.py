"""Boundary specifications of supply held in the plan (ARCHITECTURE.md section 2a,
"Elastic"; docs/scheduling.md, "Supply held in the plan") that no other test pinned.
Each scenario is worked out by hand in its comments. (Found by a mutation audit: each
test fails when the rule it names is broken in src/xce/sched.) The clock is at 1000.
"""

from __future__ import annotations

from typing import Any


def holds(s: Any) -> list[tuple[int, float, dict[str, int]]]:
    return [(h["job"], h["start"], h["hosts"]) for h in s.json.get("holds", [])]


# n01 frees at 1300, exactly when a new host could join (1000 + 300); n02 at 5000.
EXACTLY_WHEN_HOSTS_JOIN = """
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}, {name: n02, slots: 4}]
  queues: [{name: normal, backfill: true}]
  catalog:
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, expected_lead_time: 300}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 1300}
  - {id: 2, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 5000}
  - {id: 10, n: 4, submit: 10, run_limit: 600}
"""


def test_real_capacity_freeing_exactly_when_new_hosts_could_join_buys_nothing(session):
    s = session(EXACTLY_WHEN_HOSTS_JOIN)
    # A new host could join at 1000 + 300 = 1300; n01 frees at 1300 too. Real
    # capacity serves job 10 "no later than" supply could come: nothing is bought.
    assert s.reason(10) == (
        "Expected to start at 1300 (in 5 min) on n01 (4 slots), no later than "
        "new hosts could join: nothing requested"
    )
    assert s.demand["hosts"] == []
    assert holds(s) == []


def test_a_reservation_starting_exactly_when_new_hosts_could_join_buys_nothing(session):
    s = session(EXACTLY_WHEN_HOSTS_JOIN.replace("cluster:\n", "cluster:\n  reserve_depth: 1\n"))
    # With reserve_depth 1 job 10 is reserved on n01 at 1300: that is no later than a
    # new host could join (1300), so it asks for nothing and holds no supply.
    assert s.json["reservations"] == [
        {"job": 10, "start": 1300.0, "hosts": {"n01": 4}, "end": 1900.0}
    ]
    assert s.reason(10) == (
        "Expected to start at 1300 (in 5 min) on n01 (4 slots), no later than "
        "new hosts could join: nothing requested"
    )
    assert s.demand["hosts"] == []
    assert holds(s) == []


def test_an_overdue_host_in_flight_is_expected_one_second_from_now(session):
    s = session("""
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}]
  queues:
    - {name: normal, priority: 30, backfill: true}
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, rank: 1, expected_lead_time: 120}
hosts:
  - {name: burst-1, template: burst, state: ok, joined: 200, idle_since: 200}
supply:
  in_flight: {burst: 1}
  requested: {burst: [800]}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 100000}
  - {id: 10, n: 8, submit: 10, run_limit: 3600}
  - {id: 12, n: 1, submit: 20, run_limit: 1}
""")
    # The host in flight was requested at 800: expected at 920, overdue, so "one second
    # from now" (ARCHITECTURE.md 2a, "Profile"): 1001. Job 10 (8 slots) holds burst-1
    # from 1001 with that host for the rest. Job 12 ([1000, 1001)) ends by then: it
    # backfills on burst-1 and needs no host of its own.
    assert holds(s) == [(10, 1001.0, {"burst-1": 4, "burst:virtual": 4})]
    assert s.dispatched == {12: {"burst-1": 1}}
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 0, "in_flight_used": 1, "jobs": [10]}
    ]


def test_a_hold_starts_when_the_last_host_in_flight_it_counts_on_arrives(session):
    s = session("""
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}]
  queues:
    - {name: normal, priority: 30, backfill: true}
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, rank: 1, expected_lead_time: 120}
hosts:
  - {name: burst-1, template: burst, state: ok, joined: 200, idle_since: 200}
supply:
  in_flight: {burst: 2}
  requested: {burst: [900, 950]}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 100000}
  - {id: 10, n: 12, submit: 10, run_limit: 3600}
  - {id: 12, n: 1, submit: 20, run_limit: 60}
""")
    # Job 10 (12 slots) holds burst-1 (4) and counts on both hosts in flight for its
    # other 8 slots: they are expected at 900 + 120 = 1020 and 950 + 120 = 1070, so it
    # holds burst-1 from 1070 (when all of its supply is there), not from 1020.
    # Job 12 (1 slot, [1000, 1060)) ends before 1070: it backfills on burst-1 and
    # needs no host of its own.
    assert holds(s) == [(10, 1070.0, {"burst-1": 4, "burst:virtual": 8})]
    assert s.dispatched == {12: {"burst-1": 1}}
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 0, "in_flight_used": 2, "jobs": [10]}
    ]
    trace = [e.detail for e in s.trace(10) if e.stage == "plan"]
    assert trace and "(joined from template burst) from 1070 (in 1 min)" in trace[0], trace


def test_a_host_idle_since_now_with_an_idle_time_of_zero_is_due_now_in_any_host_order(session):
    s = session("""
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}]
  queues: [{name: normal}]
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, idle_time: 0}
hosts:
  - {name: burst-1, template: burst, joined: 100, idle_since: 1000}
  - {name: burst-2, template: burst, joined: 100, idle_since: 500}
jobs: []
""")
    # The template's idle time is 0: both hosts are idle supply now. burst-1 went idle
    # at 1000 itself: "a host that went idle at `now` with an idle time of 0 is due
    # now" (sched/idle.py idle_due; tests/test_sim.py's simulation of it has its hosts
    # in idle order, here they are listed out of it), so next_due is 1000.
    assert s.idle["hosts"] == [
        {"host": "burst-1", "template": "burst", "idle_for": 0},
        {"host": "burst-2", "template": "burst", "idle_for": 500},
    ]
    assert s.json["next_due"] == 1000


# n01 and n02 (static) are busy until 2000 and 3000; burst-1 has joined. Lead time 120:
# new hosts are expected at 1120.
DEPTH_AND_HOLDS = """
now: 1000
cluster:
  reserve_depth: 1
  hosts: [{name: n01, slots: 4}, {name: n02, slots: 4}]
  queues:
    - {name: normal, priority: 30, backfill: true}
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, expected_lead_time: 120}
hosts:
  - {name: burst-1, template: burst, state: ok, joined: 200, idle_since: 200}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 2000}
  - {id: 2, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 3000}
  - {id: 10, n: 8, submit: 10, run_limit: 1000}
  - {id: 11, n: 4, submit: 20, run_limit: 1000, res: "span[hosts=1]"}
"""


def test_holds_on_joined_hosts_do_not_use_up_the_reserve_depth(session):
    s = session(DEPTH_AND_HOLDS)
    # Job 10 (8 slots, spread) holds burst-1 from 1120 with a new host for the rest:
    # a hold, which "does not count toward reserve_depth" (ARCHITECTURE.md 2a). Job 11
    # (4 slots on one host) would need burst-1 over [1000, 2000), past 1120: held
    # back. The depth of 1 is still there: it is reserved on n01 at 2000.
    assert s.dispatched == {}
    assert [(r["job"], r["start"], r["hosts"]) for r in s.json["reservations"]] == [
        (11, 2000.0, {"n01": 4})
    ]
    assert holds(s)[0] == (10, 1120.0, {"burst-1": 4, "burst:virtual": 4})


def test_a_joined_host_a_reservation_has_is_not_held_by_a_later_job(session):
    s = session("""
now: 1000
cluster:
  reserve_depth: 1
  hosts: [{name: n01, slots: 4}]
  queues:
    - {name: normal, priority: 30, backfill: true}
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, expected_lead_time: 120}
hosts:
  - {name: burst-1, template: burst, state: ok, joined: 200, idle_since: 200}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 100000}
  - {id: 3, n: 2, state: RUN, hosts: {burst-1: 2}, start: 0, run_limit: 1500}
  - {id: 10, n: 4, submit: 10, run_limit: 1000, res: "span[hosts=1]"}
  - {id: 11, n: 8, submit: 20, run_limit: 1000}
""")
    # Job 10 (4 slots on one host) holds no joined hosts (only jobs that spread do) and
    # takes the reservation: burst-1 from 1500, when job 3 ends. Job 11 (8 slots, spread)
    # may hold joined hosts no earlier reservation has: burst-1's 2 free slots are
    # job 10's from 1500 (job 11 would hold them from 1120 for 1000 s). It holds
    # nothing and waits for new hosts.
    assert [(r["job"], r["start"], r["hosts"]) for r in s.json["reservations"]] == [
        (10, 1500.0, {"burst-1": 4})
    ]
    assert holds(s) == [
        (10, 1120.0, {"burst:virtual": 4}),
        (11, 1120.0, {"burst:virtual": 8}),
    ]
    assert s.reason(11) == (
        "Waiting for provisioning: fits on template burst (3 new hosts requested this session)"
    )


def test_a_job_on_a_virtual_host_opened_for_an_earlier_job_starts_when_that_host_joins(session):
    s = session("""
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}]
  queues: [{name: normal, backfill: true}]
  catalog:
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, expected_lead_time: 120}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 100000}
  - {id: 10, n: 2, submit: 10, run_limit: 600}
  - {id: 11, n: 2, submit: 20, run_limit: 600}
""")
    # Job 10 opens a new burst host (expected at 1000 + 120); job 11 fits the other 2
    # slots of that same virtual host: its supply is expected at 1120 too, not now.
    assert holds(s) == [
        (10, 1120.0, {"burst:virtual": 2}),
        (11, 1120.0, {"burst:virtual": 2}),
    ]
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [10, 11]}
    ]
