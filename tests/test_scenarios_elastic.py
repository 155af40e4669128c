"""Scenario specifications of supply held in the plan (ARCHITECTURE.md section 2a,
"Elastic"; issue 18): hosts obtained for a job go to that job.

Each test is one small scenario worked out by hand. The clock is at 1000. The common
cluster has one static 4-slot host n01, busy with job 1 until 100000, and a burst
template of 4-slot hosts with an expected lead time of 120 s. Two burst hosts have
joined (burst-1, burst-2, idle since they joined, long enough to be reclaimable)
and one more was requested at 900 and is in flight: expected at 900 + 120 = 1020.

Job 10 (12 slots, limit 3600) is the wide job they were obtained for: 8 slots on the
joined hosts now, 4 more on the host in flight.
"""

from __future__ import annotations

from typing import Any

from xce.model.events import JobKilled

CLUSTER = """
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}]
  queues:
    - {name: high, priority: 50, backfill: true}
    - {name: normal, priority: 30, backfill: true}
    - {name: strict, priority: 30}
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, rank: 1, expected_lead_time: 120}
hosts:
  - {name: burst-1, template: burst, state: ok, joined: 200, idle_since: 200}
  - {name: burst-2, template: burst, state: ok, joined: 210, idle_since: 210}
supply:
  in_flight: {burst: 1}
  requested: {burst: [900]}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 100000}
"""

WIDE = "  - {id: 10, queue: normal, n: 12, submit: 10, run_limit: 3600}\n"


def scenario(*jobs: str) -> str:
    return CLUSTER + WIDE + "".join(jobs)


def hold_of(s: Any, job: int) -> dict[str, Any] | None:
    found = [r for r in s.json.get("holds", []) if r["job"] == job]
    assert len(found) <= 1
    return found[0] if found else None


def test_a_wide_job_keeps_the_hosts_that_joined_for_it(session):
    s = session(scenario())
    assert s.dispatched == {}, "12 slots: only 8 are there"
    assert hold_of(s, 10) == {
        "job": 10, "start": 1020.0, "end": 4620.0, "virtual": True,
        "hosts": {"burst-1": 4, "burst-2": 4, "burst:virtual": 4},
    }, "the joined hosts and the host in flight, from its expected arrival (900 + 120)"
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 0, "in_flight_used": 1, "jobs": [10]}
    ], "the rest is in flight: nothing new is asked for"
    assert s.idle["hosts"] == [], (
        "burst-1 and burst-2 have been idle 800 s (>= 600), but job 10 holds them"
    )
    trace = [e.detail for e in s.trace(10) if e.stage == "plan"]
    assert trace and "Held: 8 slots on burst-1 burst-2 (4 slots each)" in trace[0], trace


def test_a_later_job_from_a_queue_without_backfill_cannot_take_them(session):
    s = session(scenario("  - {id: 11, queue: strict, n: 1, submit: 20, run_limit: 10}\n"))
    assert s.dispatched == {}, (
        "job 11 would use a held host for ever after (its queue does not backfill)"
    )
    assert s.reason(11) == (
        "Waiting for provisioning: fits on template burst (1 new host requested this session)"
    )
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 1, "jobs": [10, 11]}
    ], "job 11 needs a host of its own: the joined ones and the one in flight are job 10's"


def test_a_short_backfill_job_can_take_them_and_a_long_one_cannot(session):
    s = session(scenario(
        "  - {id: 12, queue: normal, n: 1, submit: 20, run_limit: 20}\n",
        "  - {id: 13, queue: normal, n: 1, submit: 30, run_limit: 100}\n",
    ))
    # Job 12 runs [1000, 1020): it ends when job 10's hold starts -> backfill. Job 13
    # would run until 1100, past 1020 -> held back.
    assert s.dispatched == {12: {"burst-1": 1}}
    assert s.result.backfilled == [12], "it starts while job 10 holds the joined hosts"
    assert hold_of(s, 10)["hosts"] == {"burst-1": 4, "burst-2": 4, "burst:virtual": 4}
    assert s.reason(13) is not None and s.reason(13).startswith("Waiting for provisioning")
    assert [d["count"] for d in s.demand["hosts"]] == [1], "job 13 gets a host of its own"


def test_a_higher_priority_job_can_take_them_and_the_displaced_demand_grows(session):
    s = session(scenario("  - {id: 20, queue: high, n: 4, submit: 50, run_limit: 100}\n"))
    assert s.dispatched == {20: {"burst-1": 4}}, (
        "job 20 comes first in scheduling order: its plan is made first"
    )
    assert hold_of(s, 10) == {
        "job": 10, "start": 1120.0, "end": 4720.0, "virtual": True,
        "hosts": {"burst-2": 4, "burst:virtual": 8},
    }, "job 10 keeps burst-2; it now needs the host in flight and a new one (now + 120)"
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 1, "jobs": [10]}
    ], "its demand grew by one new host"


def test_a_job_killed_while_its_supply_is_coming_frees_it_for_the_next_job(session):
    s = session(
        scenario(
            "  - {id: 11, queue: strict, n: 1, submit: 20, run_limit: 10}\n",
            "  - {id: 13, queue: normal, n: 7, submit: 30, run_limit: 100}\n",
        ),
        [JobKilled(job=10, time=1000)],
    )
    assert s.dispatched == {11: {"burst-1": 1}, 13: {"burst-1": 3, "burst-2": 4}}, (
        "nothing holds the joined hosts any more: the next jobs in order run on them"
    )
    assert hold_of(s, 10) is None
    assert s.demand["hosts"] == [], "nobody needs the host in flight"
    assert s.demand["surplus"] == {"hosts": [{"template": "burst", "count": 1}], "resources": []}


DEAR_IN_FLIGHT = """
now: 1000
cluster:
  hosts: [{name: n01, slots: 1}]
  catalog:
    templates:
      - {name: cheap, provider: aws, slots: 4, max: 10, rank: 1}
      - {name: dear, provider: aws, slots: 4, max: 10, rank: 2}
supply:
  in_flight: {dear: 1}
jobs:
  - {id: 1, n: 1, state: RUN, hosts: {n01: 1}, start: 0}
  - {id: 2, n: N}
"""


def test_in_flight_hosts_of_a_lower_ranked_template_come_before_a_new_host(session):
    s = session(DEAR_IN_FLIGHT.replace("n: N", "n: 4"))
    assert s.demand["hosts"] == [
        {"template": "dear", "count": 0, "in_flight_used": 1, "jobs": [2]}
    ], "the in-flight host of the lower-ranked template, not a new host of the better one"


def test_a_job_wider_than_the_in_flight_hosts_takes_them_and_new_hosts_of_theirs(session):
    # Job 2 (8 slots) needs two 4-slot hosts: the one of `dear` in flight and one new
    # host of `dear` (a job goes wholly on one template), not two new hosts of `cheap`
    # with the in-flight host left as surplus.
    s = session(DEAR_IN_FLIGHT.replace("n: N", "n: 8"))
    assert s.demand["hosts"] == [
        {"template": "dear", "count": 1, "in_flight_used": 1, "jobs": [2]}
    ]
    assert "surplus" not in s.demand


# ------------------------------------------------------------------- nothing bought late

LATE = """
now: 1000
cluster:
  hosts: [{name: n01, slots: 4}, {name: n02, slots: 4}]
  queues: [{name: normal, backfill: true}]
  catalog:
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 10, expected_lead_time: 300}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 1200}
  - {id: 2, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 5000}
"""


def test_nothing_is_bought_for_a_job_real_capacity_serves_first(session):
    s = session(LATE + """
  - {id: 10, n: 4, submit: 10, run_limit: 600}
  - {id: 11, n: 4, submit: 20, run_limit: 600}
""")
    # n01 frees at 1200, before a new host could join (1000 + 300): job 10 is booked
    # there and asks for nothing. Job 11 then finds n01 taken until 1800 and n02 busy
    # until 5000: a new host (at 1300) serves it first.
    assert s.reason(10) == (
        "Expected to start at 1200 (in 3 min) on n01 (4 slots), no later than "
        "new hosts could join: nothing requested"
    )
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [11]}
    ]


def test_nothing_is_bought_for_a_job_whose_reservation_starts_first(session):
    # With reserve_depth 1 the real pass gives job 10 its reservation: n01 at 1200.
    # That is before a new host could join (1300), so it asks for nothing and holds
    # nothing more; job 11 (n01 taken until 1800, n02 busy until 5000) gets a host.
    s = session(LATE.replace("cluster:\n", "cluster:\n  reserve_depth: 1\n") + """
  - {id: 10, n: 4, submit: 10, run_limit: 600}
  - {id: 11, n: 4, submit: 20, run_limit: 600}
""")
    assert s.reason(10) == (
        "Expected to start at 1200 (in 3 min) on n01 (4 slots), no later than "
        "new hosts could join: nothing requested"
    )
    assert s.json["reservations"] == [
        {"job": 10, "start": 1200.0, "hosts": {"n01": 4}, "end": 1800.0}
    ]
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [11]}
    ]
    assert [hold["job"] for hold in s.json["holds"]] == [11]


# One 4-slot host n01 and a burst template of the same hosts that join in 300 s.
ONE_HOST = """
now: 1000
cluster:
  hosts: [{{name: n01, slots: 4}}]
  queues: [{{name: normal{backfill}}}]
  catalog:
    templates:
      - {{name: burst, provider: cloud, slots: 4, max: 10, expected_lead_time: 300}}
jobs:
"""


def test_nothing_is_bought_for_a_job_a_dispatch_of_this_session_makes_room_for(session):
    # Job 9 starts now on the only host, n01, until 1100 (its limit): job 10 fits
    # there from 1100, before a new host could join (1300). No host is bought.
    s = session(ONE_HOST.format(backfill=", backfill: true") + """\
  - {id: 9, n: 4, submit: 5, run_limit: 100}
  - {id: 10, n: 4, submit: 10, run_limit: 50}
""")
    assert s.dispatched == {9: {"n01": 4}}
    assert s.reason(10) == (
        "Expected to start at 1100 (in 2 min) on n01 (4 slots), no later than "
        "new hosts could join: nothing requested"
    )
    assert s.demand["hosts"] == []


def test_a_dispatch_frees_its_hosts_at_its_own_limit_in_a_queue_without_backfill(session):
    # With reserve_depth 0 and a queue without backfill, the job started now still
    # ends at its own limit (1100), so job 10 is served there before a new host could
    # join (1300).
    s = session(ONE_HOST.format(backfill="") + """\
  - {id: 9, n: 4, submit: 5, run_limit: 100}
  - {id: 10, n: 4, submit: 10, run_limit: 50}
""")
    assert s.dispatched == {9: {"n01": 4}}
    assert s.demand["hosts"] == []
    assert s.reason(10).startswith("Expected to start at 1100 (in 2 min) on n01 (4 slots)")


def test_a_pending_job_booked_on_real_capacity_ends_at_its_own_limit(session):
    # reserve_depth 0, a queue without backfill: job 10 is booked on n01 from 1100
    # (job 1's limit) until 1150, its own limit, so job 11 fits there from 1150,
    # before a new host could join (1300): nothing is bought for either.
    s = session(ONE_HOST.format(backfill="") + """\
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 1100}
  - {id: 10, n: 4, submit: 10, run_limit: 50}
  - {id: 11, n: 3, submit: 20, run_limit: 5000}
""")
    assert s.demand["hosts"] == []
    assert s.reason(11) == (
        "Expected to start at 1150 (in 3 min) on n01 (3 slots), no later than "
        "new hosts could join: nothing requested"
    )


def test_a_host_in_flight_that_comes_before_real_capacity_is_used(session):
    # n01 frees at 1100; a new host would join at 1300, but the one in flight since
    # 750 is expected at 750 + 300 = 1050: job 10 takes it (nothing new, no surplus).
    s = session(LATE.replace("run_limit: 1200", "run_limit: 1100").replace(
        "jobs:\n", "supply: {in_flight: {burst: 1}, requested: {burst: [750]}}\njobs:\n"
    ) + "  - {id: 10, n: 4, submit: 10, run_limit: 100}\n")
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 0, "in_flight_used": 1, "jobs": [10]}
    ]
    assert "surplus" not in s.demand
    assert [(h["job"], h["start"]) for h in s.json["holds"]] == [(10, 1050.0)]


def test_without_run_limits_every_blocked_job_gets_its_demand(session):
    s = session(LATE.replace(", run_limit: 1200", "").replace(", run_limit: 5000", "") + """
  - {id: 10, n: 4, submit: 10}
  - {id: 11, n: 4, submit: 20}
""")
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 2, "in_flight_used": 0, "jobs": [10, 11]}
    ], "real ends are unknown: the plan changes nothing"


def test_a_ptile_job_keeps_the_joined_hosts_its_pieces_fit(session):
    wide = '  - {id: 10, n: 12, res: "span[ptile=4]", submit: 10, run_limit: 3600}\n'
    s = session(CLUSTER + wide)
    assert hold_of(s, 10) == {
        "job": 10, "start": 1020.0, "end": 4620.0, "virtual": True,
        "hosts": {"burst-1": 4, "burst-2": 4, "burst:virtual": 4},
    }, "two 4-slot pieces on the joined hosts, the third on the host in flight"
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 0, "in_flight_used": 1, "jobs": [10]}
    ]
