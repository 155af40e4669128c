"""Scenario specifications of holds on free real hosts for a job no template can take
wholly (sched/holds_real.py; docs/scheduling.md section 6, "Supply held in the plan").

The clock is at 1000. Two static 4-slot hosts n01 and n02 are free. The burst
template (4-slot hosts, max 3, expected lead time 120 s) has one host, burst-1, busy
with job 1 until 100000. Job 10 needs 12 slots: wholly on burst hosts that is three
hosts, and the template allows only two more. It could run on n01, n02 and one new
burst host.
"""

from __future__ import annotations

from test_scenarios_elastic import hold_of

CLUSTER = """
now: 1000
cluster:
  hosts: [{name: "n[01-02]", slots: 4}]
  queues:
    - {name: normal, priority: 30, backfill: true}
  catalog:
    idle_time: 600
    templates:
      - {name: burst, provider: cloud, slots: 4, max: 3, expected_lead_time: 120}
hosts:
  - {name: burst-1, template: burst, state: ok, joined: 200, idle_since: 200}
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {burst-1: 4}, start: 200, run_limit: 100000}
  - {id: 10, n: 12, submit: 10, run_limit: 3600}
"""


def test_a_job_the_template_cannot_take_wholly_holds_free_static_hosts(session):
    s = session(CLUSTER)
    assert s.dispatched == {}
    assert hold_of(s, 10) == {
        "job": 10, "start": 1120.0, "end": 4720.0, "virtual": True,
        "hosts": {"n01": 4, "n02": 4, "burst:virtual": 4},
    }, "the free static hosts from when the one new host is expected (now + 120)"
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [10]}
    ], "one new host for the rest, not three"
    assert s.reason(10) == (
        "Waiting for provisioning: fits on template burst (1 new host requested this "
        "session); holds 8 slots on 2 hosts (2 static)"
    )


def test_later_jobs_use_the_held_static_hosts_only_as_backfill(session):
    s = session(CLUSTER + "  - {id: 11, n: 1, submit: 20, run_limit: 60}\n"
                "  - {id: 12, n: 1, submit: 30, run_limit: 3600}\n")
    assert s.dispatched == {11: {"n01": 1}}, (
        "job 11 ends at 1060, before the hold starts; job 12 would run past it"
    )
    assert s.reason(12) == (
        "Waiting for provisioning: fits on template burst (2 new hosts requested this "
        "session)"
    ), "job 12 gets the template's last new host"
    assert [d["count"] for d in s.demand["hosts"]] == [2]


def test_the_job_starts_on_the_static_hosts_and_its_new_host_when_it_joins(session):
    s = session(_joined())
    assert s.dispatched == {10: {"burst-2": 4, "n01": 4, "n02": 4}}
    assert s.demand["hosts"] == []


def _joined() -> str:
    """The cluster at 1130, the new host burst-2 joined at 1125 for job 10."""
    return CLUSTER.replace("now: 1000", "now: 1130").replace(
        "hosts:\n  - {name: burst-1",
        "hosts:\n  - {name: burst-2, template: burst, state: ok, joined: 1125, "
        "idle_since: 1125, requested_for: [10]}\n  - {name: burst-1",
    )


def test_nothing_changes_where_the_template_can_take_the_job_wholly(session):
    s = session(CLUSTER.replace("max: 3", "max: 4"))
    assert hold_of(s, 10) == {
        "job": 10, "start": 1120.0, "end": 4720.0, "virtual": True,
        "hosts": {"burst:virtual": 12},
    }, "three new hosts: the catalog pass places a job wholly on one template"
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 3, "in_flight_used": 0, "jobs": [10]}
    ]


def test_new_hosts_counted_for_one_hold_are_not_counted_again_for_the_next(session):
    """burst-2 (of type CLOUD) has joined and is idle, so the template allows one
    more host. Job 10, on CLOUD hosts only, holds burst-2 and that one new host. Job
    11 (12 slots, any host) could hold n01 and n02 only with a new host for the rest,
    and none is left: it holds nothing, and job 12 runs."""
    s = session(
        CLUSTER.replace(
            "hosts:\n  - {name: burst-1",
            "hosts:\n  - {name: burst-2, template: burst, state: ok, joined: 200, "
            "idle_since: 200}\n  - {name: burst-1",
        )
        .replace("slots: 4, max: 3", "slots: 4, type: CLOUD, max: 3")
        .replace("{id: 10, n: 12,", '{id: 10, n: 8, res: "select[type==CLOUD]",')
        + "  - {id: 11, n: 12, submit: 20, run_limit: 3600}\n"
        "  - {id: 12, n: 4, submit: 30, run_limit: 3600}\n"
    )
    assert hold_of(s, 10) == {
        "job": 10, "start": 1120.0, "end": 4720.0, "virtual": True,
        "hosts": {"burst-2": 4, "burst:virtual": 4},
    }
    assert hold_of(s, 11) is None, "the template's last new host is job 10's"
    assert s.dispatched == {12: {"n01": 4}}
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [10]}
    ]
