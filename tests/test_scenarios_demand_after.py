"""A queue's `demand_after` (sched/demand_after.py; docs/policy.md, "demand_after"):
a job asks for no supply until it has pended that long, and the session says when
that comes (`next_due`).

The clock is at 1000. One static 4-slot host, n01, runs job 1 until 5000. The burst
template has 4-slot hosts (max 10). Queue `batch` waits 600 s before bursting (LSF's
RC_DEMAND_POLICY THRESHOLD[[1, 10]]); queue `urgent` bursts at once.
"""

from __future__ import annotations

import textwrap

CLUSTER_FILE = """session_interval: 60
hosts: [{name: n01, slots: 4}]
queues:
  - {name: batch, priority: 30, demand_after: 600}
  - {name: urgent, priority: 50}
catalog:
  templates: [{name: burst, provider: cloud, slots: 4, max: 10}]
"""
CLUSTER = (
    "now: 1000\ncluster:\n" + textwrap.indent(CLUSTER_FILE, "  ")
    + "jobs:\n  - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0}\n"
)

YOUNG = "Pending less than queue batch's demand_after (10 min): no supply requested yet"


def scenario(*jobs: str, hosts: str = "") -> str:
    return CLUSTER + "".join(f"  - {job}\n" for job in jobs) + hosts


def requested(s) -> list[tuple[str, int, list[int]]]:  # type: ignore[no-untyped-def]
    return [(d["template"], d["count"], d["jobs"]) for d in s.demand["hosts"]]


def test_a_job_pending_less_than_demand_after_asks_for_nothing(session):
    s = session(scenario("{id: 2, n: 4, queue: batch, submit: 700}",
                         "{id: 3, n: 4, queue: batch, submit: 900}"))
    assert requested(s) == [], "pending 300 s and 100 s of 600: no host requested"
    assert s.reason(2) == YOUNG and s.reason(3) == YOUNG
    assert s.json["next_due"] == 1300, "job 2 comes of age at 700 + 600"


def test_a_job_that_has_pended_long_enough_asks_and_the_younger_waits(session):
    s = session(scenario("{id: 2, n: 4, queue: batch, submit: 400}",
                         "{id: 3, n: 4, queue: batch, submit: 900}"))
    assert requested(s) == [("burst", 1, [2])], "job 2 pended 600 s: one host for it"
    assert s.reason(3) == YOUNG
    assert s.json["next_due"] == 1500


def test_another_queue_without_it_bursts_at_once(session):
    s = session(scenario("{id: 2, n: 4, queue: batch, submit: 900}",
                         "{id: 3, n: 4, queue: urgent, submit: 990}"))
    assert requested(s) == [("burst", 1, [3])]
    assert s.reason(2) == YOUNG


def test_a_job_of_higher_priority_does_not_hold_back_older_ones(session):
    """Job 3 (young, a higher user priority: `bsub -sp`) comes before job 2 (old)
    in their queue: job 2 still asks for its host."""
    s = session(scenario("{id: 2, n: 4, queue: batch, submit: 100}",
                         "{id: 3, n: 4, queue: batch, submit: 950, priority: 90}"))
    assert requested(s) == [("burst", 1, [2])]
    assert s.reason(3) == YOUNG


def test_supply_requested_for_a_young_job_stays_its_own(session):
    """A host that joined for job 2 (requested before demand_after was raised) runs
    it: demand_after holds back requests, not supply already obtained."""
    joined = "hosts:\n  - {name: burst-1, template: burst, joined: 990, requested_for: [2]}\n"
    s = session(scenario("{id: 2, n: 4, queue: batch, submit: 900}", hosts=joined))
    assert s.dispatched == {2: {"burst-1": 4}}


def test_a_young_job_holds_no_free_provisioned_host_for_supply_to_come(session):
    """burst-1 joined for a job that started elsewhere. Job 2 (8 slots) could hold it
    while a second host comes (sched/holds.py); young, it asks for none, so it holds
    nothing: burst-1 stays free for others, and goes back when idle long enough."""
    free = "hosts:\n  - {name: burst-1, template: burst, joined: 900}\n"
    s = session(scenario("{id: 2, n: 8, queue: batch, submit: 900}", hosts=free))
    assert requested(s) == [] and s.json["reservations"] == []
    assert s.reason(2) == YOUNG


def test_without_demand_after_nothing_changes(session):
    s = session(scenario("{id: 2, n: 4, queue: urgent, submit: 999}"))
    assert requested(s) == [("burst", 1, [2])]
    assert s.json["next_due"] is None


def test_the_simulator_bursts_when_the_job_comes_of_age(tmp_path):
    """No event comes between the submissions and 2,000 s: the session that asks for
    job 2's host runs at 600 because the last one said so (`next_due`), then the
    policy's round requests it and it joins 120 s later."""
    from xce.config import load_config_text
    from xce.sim.driver import Simulator
    from xce.sim.workload import load_workload

    config = load_config_text(CLUSTER_FILE + """policy: {persistence: 0}
simulation: {providers: {cloud: {lead_time: 120}}}
""", "cluster.yaml")
    path = tmp_path / "w.yaml"
    path.write_text("""jobs:
  - {id: 1, run: 2000, n: 4, queue: urgent}
  - {id: 2, run: 100, n: 4, queue: batch}
  - {id: 3, run: 2000, n: 4, queue: urgent, submit: 1}
""")
    sim = Simulator(config, load_workload(path))
    sim.run()
    assert sim.metrics.started == {1: 0, 3: 180, 2: 720}, (
        "job 3 (urgent) bursts at the first round (60 s; its host joins at 180); job 2"
        " (batch, 2 000 s before any host frees) at 600, its host joining at 720"
    )


def test_queues_l_shows_it_and_the_api_carries_it():
    from xce.cli.queue_long import queue_long
    from xce.config import load_config_text
    from xce.controller.queue_info import queue_infos

    config = load_config_text(CLUSTER_FILE, "cluster.yaml")
    batch, urgent = queue_infos(config, [], lambda _job: False)
    assert (batch.demand_after, urgent.demand_after) == (600.0, 0.0)
    assert "SCHEDULING POLICIES:  -\nDEMAND_AFTER:  10.0 min\n" in "\n".join(queue_long(batch))
    assert "DEMAND_AFTER" not in "\n".join(queue_long(urgent))
