"""A job wider than its template's max runs on real hosts with all the template's
hosts (sched/holds_wide.py; admission: sched/ever.py; docs/scheduling.md section 6,
"Wider than a template's max").

Four static one-slot hosts n01-n04; template burst has one-slot hosts, max 2, lead
time 120 s. Job 1 runs on n01 until its limit, job 2 on n02 until 3000. Job 8 (5
slots, limit 500) is wider than the static hosts (4) and than burst's max (2): it
runs on both, 3 real slots and 2 burst hosts. The clock is at 1000, so new burst
hosts would join at 1120.
"""

from __future__ import annotations

from test_scenarios_plan import reservations

CLUSTER = """
now: {now}
cluster:
  reserve_depth: 1
  hosts: [{{name: "n[01-04]", slots: 1}}]
  queues: [{{name: normal, priority: 30, backfill: true}}]
  catalog:
    idle_time: 600
    templates: [{{name: burst, provider: cloud, slots: 1, max: 2, expected_lead_time: 120}}]
jobs:
  - {{id: 1, n: 1, state: RUN, hosts: {{n01: 1}}, start: 0, run_limit: {end}}}
  - {{id: 2, n: 1, state: RUN, hosts: {{n02: 1}}, start: 0, run_limit: 3000}}
  - {{id: 8, n: 5, submit: 10, run_limit: 500}}
"""


def scenario(end: float, *jobs: str, now: float = 1000) -> str:
    return CLUSTER.format(now=now, end=end) + "".join(f"  - {job}\n" for job in jobs)


# Two burst hosts in flight, requested at 990: due at 1110.
TWO_IN_FLIGHT = "supply:\n  in_flight: {burst: 2}\n  requested: {burst: [990, 990]}\njobs:\n"

ASKED = [{"template": "burst", "count": 2, "in_flight_used": 0, "jobs": [8]}]


def holds(s) -> list[tuple[int, float, dict[str, int]]]:
    return [(h["job"], h["start"], h["hosts"]) for h in s.json.get("holds", [])]


def test_real_hosts_free_before_the_template_hosts_come_it_asks_now(session):
    """n01 frees at 1001 (job 1 is past its limit), so by 1120 the three free real
    hosts n01, n03, n04 and two new burst hosts take job 8: it holds all five from 1120
    and asks for the two burst hosts now."""
    s = session(scenario(1000))
    assert s.demand["hosts"] == ASKED
    assert holds(s) == [(8, 1120.0, {"burst:virtual": 2, "n01": 1, "n03": 1, "n04": 1})]
    assert s.reason(8) == (
        "Waiting for provisioning: fits on template burst (2 new hosts requested this "
        "session); holds 3 slots on 3 hosts (3 static)"
    )


def test_real_hosts_free_later_the_template_hosts_are_asked_for_in_time(session):
    """n01 frees at 2000: hosts asked for now would idle from 1120 to 2000. Job 8 is
    booked on n01, n03 and n04 from 2000 and asks for nothing yet; the session's
    next_due is 1880, when hosts asked for join by 2000."""
    s = session(scenario(2000))
    assert s.demand["hosts"] == [], "nothing is asked for before 1880"
    assert s.json["next_due"] == 1880.0
    assert s.reason(8) == (
        "Reserved: expected to start at 2000 (in 17 min) on n01 n03 n04 (1 slot each) "
        "with 2 more slots on hosts of template burst, to be requested at 1880 (in 15 "
        "min) so that they join by then (the job is wider than the template's max of 2 "
        "hosts)"
    )


def test_at_its_due_time_it_asks_for_the_template_hosts(session):
    s = session(scenario(2000, now=1880))
    assert s.demand["hosts"] == ASKED
    assert holds(s) == [(8, 2000.0, {"burst:virtual": 2, "n01": 1, "n03": 1, "n04": 1})]


def test_a_later_job_takes_neither_the_booked_real_hosts_nor_the_template_hosts(session):
    """Job 9 (1 slot, limit 5000) would hold n03 past 2000 and a burst host is job 8's:
    it waits for n01 after job 8 (2500) and buys nothing."""
    s = session(scenario(2000, "{id: 9, n: 1, submit: 20, run_limit: 5000}"))
    assert s.dispatched == {}
    assert s.demand["hosts"] == []
    assert reservations(s.json) == [(9, 2500.0, {"n01": 1})]
    assert s.reason(9) == (
        "Reserved: expected to start at 2500 (in 25 min) on n01 (1 slot); template burst's "
        "hosts are kept for job 8 from 2000 (it is wider than the template's max): this "
        "job would keep one busy past then"
    )


def test_a_short_job_backfills_the_booked_real_hosts(session):
    """Job 9 (limit 500) ends at 1500, before job 8's start at 2000: it runs on n03."""
    s = session(scenario(2000, "{id: 9, n: 1, submit: 20, run_limit: 500}"))
    assert s.dispatched == {9: {"n03": 1}}
    assert s.result.backfilled == [9]


def test_a_job_wider_than_the_static_hosts_and_the_template_max_is_refused(session):
    s = session(scenario(2000, "{id: 9, n: 7, submit: 20}"))
    assert s.reason(9) == (
        "No host or template can ever run this job: job requests 7 slots; the most this "
        "cluster offers is 6 (the static hosts with template burst (max 2))"
    )


KEPT_FOR_8 = (
    "Template burst's hosts are kept for job 8 from 2000 (it is wider than the template's "
    "max): this job would keep one busy past then"
)


def test_the_template_hosts_kept_for_it_take_only_jobs_that_end_by_its_start(session):
    """Queue cloud runs on burst hosts alone. Until job 8 asks for its two burst hosts
    (at 1880, to join by 2000), a job may have new burst hosts only if it is done by
    2000: job 9 (limit 500: 1120 to 1620) gets one; job 10 (limit 5000) gets none."""
    text = scenario(
        2000,
        "{id: 9, n: 1, submit: 20, queue: cloud, run_limit: 500}",
        "{id: 10, n: 1, submit: 30, queue: cloud, run_limit: 5000}",
    ).replace(
        "queues: [{name: normal, priority: 30, backfill: true}]",
        'queues: [{name: normal, priority: 30, backfill: true}, '
        '{name: cloud, priority: 20, backfill: true, hosts: ["template:burst"]}]',
    )
    s = session(text)
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [9]}
    ]
    assert s.reason(10) == KEPT_FOR_8


def test_without_reservations_it_holds_only_real_hosts_free_when_the_template_hosts_come(session):
    """reserve_depth 0: no reservation ahead of time. n01 frees at 2000, after new burst
    hosts would come (1120): job 8 holds nothing, asks for nothing and waits."""
    s = session(scenario(2000).replace("reserve_depth: 1", "reserve_depth: 0"))
    assert s.demand["hosts"] == []
    assert "next_due" not in s.json or s.json["next_due"] is None
    assert s.reason(8) == (
        "No template can host this job wholly (template burst would need 5 hosts for the "
        "job, max 2): waiting for free hosts to run it with the template's"
    )
    held = session(scenario(1000).replace("reserve_depth: 1", "reserve_depth: 0"))
    assert held.demand["hosts"] == ASKED, "n01 is free by 1120: it holds and asks"


def test_the_hold_asked_for_later_is_listed_with_the_hosts_to_come(session):
    """The session result's `holds` lists the real part booked from 2000 and the two
    burst slots still to come (FORMATS.md keeps `reservations` for reserve_depth)."""
    s = session(scenario(2000))
    assert holds(s) == [(8, 2000.0, {"n01": 1, "n03": 1, "n04": 1, "burst:virtual": 2})]
    assert reservations(s.json) == []


NO_BACKFILL = """
now: 1000
cluster:
  reserve_depth: 1
  hosts: [{name: "n[01-04]", slots: 1}]
  queues:
    - {name: normal, priority: 30}
    - {name: urgent, priority: 50, backfill: true, hosts: [all]}
  catalog:
    idle_time: 600
    templates: [{name: burst, provider: cloud, slots: 1, max: 2, expected_lead_time: 120}]
jobs:
  - {id: 1, n: 1, state: RUN, hosts: {n01: 1}, start: 0, run_limit: 3000}
  - {id: 5, n: 4, queue: urgent, submit: 5, run_limit: 1000}
  - {id: 8, n: 5, submit: 10, run_limit: 500}
"""


def test_in_a_queue_without_backfill_the_real_part_is_free_for_ever(session):
    """Queue normal has no backfill: job 8's real part must be free for ever from its
    start, not over its limit alone. Job 5 (urgent) is reserved on n01-n04 from 3000
    to 4000. Over its limit n02-n04 are free from 1120 (hosts bought for that start
    would join and never run it: it could not start on capacity job 5 needs); for
    ever, from 4000, when all four static hosts are: it will ask for one burst host,
    and for nothing before 3880."""
    s = session(NO_BACKFILL)
    assert s.demand["hosts"] == []
    assert reservations(s.json) == [(5, 3000.0, {"n01": 1, "n02": 1, "n03": 1, "n04": 1})]
    assert holds(s) == [
        (8, 4000.0, {"n01": 1, "n02": 1, "n03": 1, "n04": 1, "burst:virtual": 1})
    ]
    assert s.json["next_due"] == 3880.0


def test_hosts_in_flight_are_not_waited_for_when_the_real_part_frees_later(session):
    """Two burst hosts are in flight (requested at 990, due at 1110); the real part
    frees at 2000. Hosts asked for at 1880 join by 2000 (lead 120 s), whatever the
    in-flight ones would do: the job asks then, and the in-flight hosts are surplus."""
    text = scenario(2000).replace("jobs:\n", TWO_IN_FLIGHT)
    s = session(text)
    assert s.demand["hosts"] == []
    assert s.json["next_due"] == 1880.0
    assert holds(s) == [(8, 2000.0, {"n01": 1, "n03": 1, "n04": 1, "burst:virtual": 2})]


RANKED = """
now: 1000
cluster:
  reserve_depth: 1
  hosts: [{name: "n[01-04]", slots: 1}]
  queues: [{name: normal, priority: 30, backfill: true}]
  catalog:
    idle_time: 600
    templates:
      - {name: a, provider: cloud, slots: 1, max: 2, rank: 10, expected_lead_time: 120}
      - {name: b, provider: cloud, slots: 1, max: 3, rank: 20, expected_lead_time: 120}
jobs:
  - {id: 1, n: 1, state: RUN, hosts: {n01: 1}, start: 0, run_limit: 5000}
  - {id: 8, n: 6, submit: 10, run_limit: 500}
"""


def test_a_template_that_starts_the_job_sooner_wins_over_rank(session):
    """Job 8 (6 slots) is wider than both templates. With a (rank 10, max 2) it needs
    all four static hosts, so it would start when n01 frees at 5000; with b (rank 20,
    max 3) three free static hosts do, from 1120: it takes b and asks for three
    hosts now."""
    s = session(RANKED)
    assert s.demand["hosts"] == [
        {"template": "b", "count": 3, "in_flight_used": 0, "jobs": [8]}
    ]
    assert holds(s) == [(8, 1120.0, {"n02": 1, "n03": 1, "n04": 1, "b:virtual": 3})]


def test_a_job_not_of_slots_alone_is_refused_saying_why(session):
    """Job 9 (6 slots with order[]) would fit the static hosts with burst's max, as
    job 8 does, but only a job of slots alone runs on both: the refusal says so."""
    s = session(scenario(2000, '{id: 9, n: 6, res: "order[-slots]", submit: 20}'))
    assert s.reason(9) == (
        "No host or template can ever run this job: job requests 6 slots; the most this "
        "cluster offers is 4 (all hosts); static hosts and a template's hosts run a job "
        "together only when it asks for slots alone (no span[], per-slot consumable, GPU, "
        "shared resource, order[] or -x)"
    )


def test_it_asks_only_for_the_hosts_it_lacks_beyond_free_real_hosts(session):
    """Eight free static hosts, burst's max 4: job 8 (9 slots) holds all eight and asks
    for one burst host, not four; job 9 (queue cloud, burst hosts only) gets another."""
    s = session("""
now: 1000
cluster:
  reserve_depth: 1
  hosts: [{name: "n[01-08]", slots: 1}]
  queues:
    - {name: normal, priority: 30, backfill: true}
    - {name: cloud, priority: 20, backfill: true, hosts: ["template:burst"]}
  catalog:
    idle_time: 600
    templates: [{name: burst, provider: cloud, slots: 1, max: 4, expected_lead_time: 120}]
jobs:
  - {id: 8, n: 9, submit: 10, run_limit: 500}
  - {id: 9, n: 1, submit: 20, queue: cloud, run_limit: 3600}
""")
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 2, "in_flight_used": 0, "jobs": [8, 9]}
    ]
    static = {f"n0{i}": 1 for i in range(1, 9)}
    assert holds(s) == [
        (8, 1120.0, {**static, "burst:virtual": 1}), (9, 1120.0, {"burst:virtual": 1})
    ]


CLOUD_QUEUE = (
    "queues: [{name: normal, priority: 30, backfill: true}, "
    '{name: cloud, priority: PRIORITY, backfill: true, hosts: ["template:burst"]}]'
)


def with_cloud_queue(text: str, priority: int) -> str:
    return text.replace(
        "queues: [{name: normal, priority: 30, backfill: true}]",
        CLOUD_QUEUE.replace("PRIORITY", str(priority)),
    )


def test_a_job_ahead_that_only_the_template_can_take_has_its_hosts_first(session):
    """Queue cloud (priority 40: ahead of job 8) runs on burst hosts alone. Job 9 (no
    run limit) takes a new burst host for ever: one is left of the two job 8 counted
    on, so job 8 holds no hosts to come this session (none listed, none kept) and
    plans again at the next."""
    s = session(with_cloud_queue(scenario(2000, "{id: 9, n: 1, submit: 20, queue: cloud}"), 40))
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [9]}
    ]
    assert holds(s) == [(9, 1120.0, {"burst:virtual": 1})]
    assert s.reason(8) == (
        "Not enough hosts of template burst to come: the job needs 2 more (it is wider "
        "than the template's max of 2 hosts) and jobs ahead of it take all but 1 this "
        "session; planned again at the next session"
    )


def test_a_host_a_short_job_ahead_takes_is_free_again_for_the_wide_job(session):
    """Job 9, ahead of job 8 as above, has a limit of 500: its burst host (1120 to
    1620) is free again by 2000, so job 8 keeps its hold on both burst hosts."""
    s = session(with_cloud_queue(scenario(
        2000, "{id: 9, n: 1, submit: 20, queue: cloud, run_limit: 500}"
    ), 40))
    assert holds(s) == [
        (9, 1120.0, {"burst:virtual": 1}),
        (8, 2000.0, {"n01": 1, "n03": 1, "n04": 1, "burst:virtual": 2}),
    ]
    assert s.reason(8).startswith("Reserved: expected to start at 2000")


def test_a_host_that_joins_for_a_short_job_is_not_shared_past_the_wide_start(session):
    """Template burst has one 2-slot host (max 1); job 8 (5 slots) counts on it from
    2000 with n01, n03 and n04. Job 9 (limit 500) may have it until 1620; job 10 (limit
    5000) would share it past 2000, when job 8 needs the whole host: it gets none."""
    text = with_cloud_queue(scenario(
        2000,
        "{id: 9, n: 1, submit: 20, queue: cloud, run_limit: 500}",
        "{id: 10, n: 1, submit: 30, queue: cloud, run_limit: 5000}",
    ), 20).replace("slots: 1, max: 2", "slots: 2, max: 1")
    s = session(text)
    assert holds(s) == [
        (8, 2000.0, {"n01": 1, "n03": 1, "n04": 1, "burst:virtual": 2}),
        (9, 1120.0, {"burst:virtual": 1}),
    ]
    assert s.demand["hosts"] == [
        {"template": "burst", "count": 1, "in_flight_used": 0, "jobs": [9]}
    ]
    assert s.reason(10) == KEPT_FOR_8



def test_hosts_in_flight_beyond_a_lowered_max_hold_the_job_wholly(session):
    """Template burst, now of 4-slot hosts, had its max lowered to 1 while two of its
    hosts were in flight (due at 1110); n01-n03 are busy. Job 8, made 6 slots, is
    wider than the max, but the two hosts to come hold it wholly: it holds them and
    no real slot. (It once held minus two slots on n04, the free one-slot host, so a
    later job could be reserved three slots there.)"""
    text = (
        scenario(5000, "{id: 3, n: 1, state: RUN, hosts: {n03: 1}, start: 0, run_limit: 5000}")
        .replace("slots: 1, max: 2,", "slots: 4, max: 1,")
        .replace("{id: 8, n: 5,", "{id: 8, n: 6,")
        .replace("jobs:\n", TWO_IN_FLIGHT)
    )
    s = session(text)
    assert holds(s) == [(8, 1110.0, {"burst:virtual": 6})]
    assert s.demand["hosts"] == [{"template": "burst", "count": 0, "in_flight_used": 2,
                                  "jobs": [8]}]
