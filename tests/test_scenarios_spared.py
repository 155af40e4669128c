"""A reservation later than now spares supply it does not need (sched/earliest.py
`_place_at`, sched/requested.py `spared_by_later_starts`; docs/scheduling.md section
6, "Reservations spare supply").

The clock is at 1000. Two static 4-slot hosts, n01 and n02, are busy until 2000 (jobs
1 and 2, run limits). The burst template has 4-slot hosts. Job 8 (8 slots, submitted
first) is the head job: nothing fits it now, and at 2000 n01 and n02 free up, so its
reservation starts at 2000 (the burst template, max 1, has its one host: no new host
could start it sooner). A provisioned host free now is free at 2000 too, and with
static hosts first the usual placement would put a host that has just joined first:
the reservation would hold it idle for 1000 s, away from the job it was obtained for,
or from being given back.
"""

from __future__ import annotations

from test_scenarios_plan import reservations

CLUSTER = """
now: 1000
cluster:
  reserve_depth: 1
  hosts: [{name: "n[01-02]", slots: 4}]
  queues: [{name: normal, priority: 30, backfill: true}]
  catalog:
    idle_time: 600
    templates: [{name: burst, provider: cloud, slots: 4, max: 1, expected_lead_time: 120}]
jobs:
  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 2000}
  - {id: 2, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 2000}
"""

REQUESTED = """hosts:
  - {name: burst-1, template: burst, joined: 1000, requested_for: [10]}
"""


def scenario(hosts: str, *jobs: str) -> str:
    return CLUSTER + "".join(f"  - {job}\n" for job in jobs) + hosts


def test_the_host_requested_for_a_later_job_goes_to_that_job(session):
    s = session(scenario(REQUESTED, "{id: 8, n: 8, submit: 1, run_limit: 1000}",
                         "{id: 10, n: 4, submit: 10, run_limit: 3600}"))
    assert reservations(s.json) == [(8, 2000.0, {"n01": 4, "n02": 4})], (
        "job 8 starts at 2000 without burst-1: it leaves it to job 10"
    )
    assert s.dispatched == {10: {"burst-1": 4}}
    assert s.demand["hosts"] == [], "nothing more is requested for job 10"
    assert s.reason(8) == (
        "Reserved: expected to start at 2000 (in 17 min) on n01 n02 (4 slots each); "
        "no template can host this job wholly (template burst would need 2 hosts for "
        "the job, max 1): waiting for free hosts to run it with the template's"
    ), "its reservation, then why no new host could start it sooner"


def test_a_higher_job_that_needs_it_still_takes_it(session):
    s = session(scenario(REQUESTED, "{id: 8, n: 12, submit: 1, run_limit: 1000}",
                         "{id: 10, n: 4, submit: 10, run_limit: 3600}"))
    assert reservations(s.json)[0] == (8, 2000.0, {"burst-1": 4, "n01": 4, "n02": 4}), (
        "without burst-1 job 8 could never start (12 slots): it takes it"
    )
    assert s.dispatched == {}
    assert s.reason(10) == "Template burst allows no more hosts (max 1)", (
        "job 10 pends without the host obtained for it, visibly"
    )


def test_an_idle_provisioned_host_is_not_held_for_a_later_start(session):
    """burst-1 joined at 100 for a job that started elsewhere: free, never used,
    idle 900 s. A reservation that held it would keep it from being given back."""
    idle = "hosts:\n  - {name: burst-1, template: burst, joined: 100}\n"
    s = session(scenario(idle, "{id: 8, n: 8, submit: 1, run_limit: 1000}"))
    assert reservations(s.json) == [(8, 2000.0, {"n01": 4, "n02": 4})]
    assert [h["host"] for h in s.idle["hosts"]] == ["burst-1"], "it can go back"


def test_a_start_now_is_not_changed(session):
    """Only reservations later than now spare hosts: a job that fits now on a host
    that joined for another job may take it (the usual preference)."""
    s = session(scenario(REQUESTED, "{id: 9, n: 4, submit: 1, run_limit: 60}",
                         "{id: 10, n: 4, submit: 10, run_limit: 3600}"))
    assert s.dispatched == {9: {"burst-1": 4}}
