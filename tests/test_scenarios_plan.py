"""Scenario specifications of the plan (ARCHITECTURE.md section 2a): run limits, the
profile of free capacity, reservations and backfill.

Each test is one small scenario with an inline cluster and the exact outcome section
2a gives, worked out by hand (the derivation is in the comments): which jobs start
now and where, which blocked jobs get a reservation (job, start, hosts), the pend
reasons as the core words them (`Reserved: expected to start at ...`, `Would delay
the reservation of job N (starts in ...)`) and the session's `next_due`.

The clock is at 1000 unless a test says otherwise. Most tests use two 4-slot hosts
that free at known times:

* n01: running job 1 (4 slots) planned to end at 2000;
* n02: running job 2 planned to end at 3000.

so an 8-slot job fits on both hosts from 3000 on, and a hole opens on n02 (its free
slots now) and on n01 (from 2000) until the reservation starts at 3000.
"""

from __future__ import annotations

from typing import Any

import pytest

HOSTS_2 = """
          hosts:
            - {name: n01, slots: 4}
            - {name: n02, slots: 4}
"""

HOSTS_3 = """
          hosts:
            - {name: n01, slots: 4}
            - {name: n02, slots: 4}
            - {name: n03, slots: 4}
"""


def reservations(obj: dict[str, Any]) -> list[tuple[int, float, dict[str, int]]]:
    """The session result's reservations as (job, start, hosts), in result order."""
    return [(r["job"], r["start"], r["hosts"]) for r in obj["reservations"]]


def without_stats(obj: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key != "stats"}


# ----------------------------------------------------------------------------- backfill

# n02 has 3 free slots now (job 2 holds 1 until 3000); the 8-slot job 10 reserves both
# hosts from 3000; jobs 11-14 try the hole on n02 [now, 3000) with different limits.
HOLE = """
        now: 1000
        cluster:
          reserve_depth: 1
{hosts}
          queues:
            - {{name: normal, backfill: {backfill}}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 1, state: RUN, hosts: {{n02: 1}}, start: 0, run_limit: 3000}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
          - {{id: 11, n: 2, submit: 20, run_limit: 2500}}
          - {{id: 12, n: 1, submit: 30, run_limit: 2001}}
          - {{id: 13, n: 2, submit: 40, run_limit: 1500}}
          - {{id: 14, n: 1, submit: 50, run_limit: 2000}}
"""


def test_a_short_job_fills_the_hole_before_a_reservation(session):
    s = session(HOLE.format(hosts=HOSTS_2, backfill="true"))
    # Job 10 (8 slots): 3 free now; n01 frees at 2000 (4), n02 at 3000 (3 + 1): it fits
    # over [3000, 4000) on both hosts. Then, on n02 (3 free until the reservation):
    # 11 needs [1000, 3500): crosses 3000 -> held back; 12 needs [1000, 3001): crosses
    # 3000 by one second -> held back; 13 needs [1000, 2500): fits (n02: 2);
    # 14 needs [1000, 3000): ends exactly when the reservation starts -> fits (n02: 1).
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4, "n02": 4})]
    assert s.dispatched == {13: {"n02": 2}, 14: {"n02": 1}}, (
        "in a backfill queue a job starts in the hole when its limit ends no later than "
        "the reservation's start (job 14's [1000, 3000) ends exactly at it); jobs 11 and "
        "12, whose limits reach past 3000, are held back"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        11: "Would delay the reservation of job 10 (starts in 33 min)",
        12: "Would delay the reservation of job 10 (starts in 33 min)",
    }
    assert s.json["next_due"] is None, (
        "a planned end (job 1's at 2000) is no timer: the job's end is an event"
    )


def test_a_queue_without_backfill_never_fills_a_hole(session):
    s = session(HOLE.format(hosts=HOSTS_2, backfill="false"))
    # The same plan; every job's window is [now, forever), and n02's free slots are
    # all taken by the reservation from 3000 on.
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4, "n02": 4})]
    assert s.dispatched == {}, (
        "without backfill a job must fit what stays free forever: the 3 free slots of "
        "n02 go to the reservation at 3000, so even jobs whose limits end before it pend"
    )
    delay = "Would delay the reservation of job 10 (starts in 33 min)"
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        11: delay,
        12: delay,
        13: delay,
        14: delay,
    }


def test_a_job_held_back_by_a_reservation_may_reserve_while_depth_remains(session):
    s = session(
        HOLE.format(hosts=HOSTS_2, backfill="true").replace("reserve_depth: 1", "reserve_depth: 2")
    )
    # As in the hole test, job 11 (2 slots, [1000, 3500)) fits now only on what job 10
    # holds from 3000: that is a failure on resources, and one reservation is left. Its
    # earliest start with 2 slots free for 2500 s: not 2000 (n01 is reserved at 3000),
    # not 3000; at 4000 both hosts are free for ever: the usual placement, most free
    # first (4 and 4), then name: n01. Job 12 then finds the depth used up.
    assert reservations(s.json) == [
        (10, 3000.0, {"n01": 4, "n02": 4}),
        (11, 4000.0, {"n01": 2}),
    ], "a job held back by a reservation failed on resources: it reserves while depth remains"
    assert s.dispatched == {13: {"n02": 2}, 14: {"n02": 1}}
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        11: "Reserved: expected to start at 4000 (in 50 min) on n01 (2 slots)",
        12: "Would delay the reservation of job 10 (starts in 33 min)",
    }


def test_would_delay_names_the_reservation_the_job_would_delay(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 2
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 3, state: RUN, hosts: {{n01: 3}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 3, state: RUN, hosts: {{n02: 3}}, start: 0, run_limit: 3000}}
          - {{ids: "10-11", n: 4, res: "span[hosts=1]", submit: 10, run_limit: 5000}}
          - {{id: 13, n: 1, res: "select[hname==n02]", submit: 20, run_limit: 2500}}
    """)
    # 10 reserves n01 from 2000, 11 n02 from 3000. Job 13 may run only on n02: its
    # one free slot there is taken by job 11 at 3000, inside [1000, 3500). Job 10's
    # reservation is on n01, which job 13 cannot use: it is job 11's it would delay.
    assert reservations(s.json) == [(10, 2000.0, {"n01": 4}), (11, 3000.0, {"n02": 4})]
    assert s.dispatched == {}
    assert s.reasons[13] == "Would delay the reservation of job 11 (starts in 33 min)", (
        "the reason names the reservation that holds capacity the job could use, not the "
        "first reservation on some other host"
    )


def test_a_long_job_goes_where_the_reservation_needs_no_capacity(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 2, state: RUN, hosts: {{n01: 2}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 3, state: RUN, hosts: {{n02: 3}}, start: 0, run_limit: 5000}}
          - {{id: 10, n: 4, res: "span[hosts=1]", submit: 10, run_limit: 1000}}
          - {{id: 11, n: 1, submit: 20, run_limit: 100000}}
          - {{id: 12, n: 2, submit: 30, run_limit: 100000}}
    """)
    # Free now: n01 2, n02 1. Job 10 (4 on one host) fits on n01 when job 1 ends at 2000.
    # Job 11 (window [1000, 101000)) would take n01 by the usual placement (2 free > 1),
    # but n01's free slots are all held by the reservation within its window; n02 is
    # not in the reservation. Job 12 fits now only on n01: it would delay job 10.
    assert reservations(s.json) == [(10, 2000.0, {"n01": 4})]
    assert s.dispatched == {11: {"n02": 1}}, (
        "a job whose limit outlasts the reservation's start still starts now on a host "
        "the reservation does not use (n02), not on the reserved host the usual "
        "placement would prefer"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots)",
        12: "Would delay the reservation of job 10 (starts in 17 min)",
    }


def test_a_job_without_a_limit_cannot_backfill(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 2, state: RUN, hosts: {{n02: 2}}, start: 0, run_limit: 3000}}
          - {{id: 10, n: 8, submit: 10}}
          - {{id: 11, n: 2, submit: 20}}
          - {{id: 12, n: 2, submit: 30, run_limit: 1500}}
    """)
    # Job 10 has no limit: it reserves both hosts from 3000 for ever after. Job 11 has
    # no limit either: its window is [now, forever) even in a backfill queue, and the 2
    # free slots of n02 go to job 10 at 3000. Job 12 ends at 2500: it backfills.
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4, "n02": 4})]
    assert "end" not in s.json["reservations"][0], "a reservation without a limit never ends"
    assert s.dispatched == {12: {"n02": 2}}, (
        "a job without a run limit never fits a hole before a reservation (its window is "
        "forever); the same job with a limit ending before 3000 does"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        11: "Would delay the reservation of job 10 (starts in 33 min)",
    }


@pytest.mark.parametrize(
    ("queue_limit", "dispatched", "reasons"),
    [
        (1500, {11: {"n02": 2}}, {}),
        (2500, {}, {11: "Would delay the reservation of job 10 (starts in 33 min)"}),
    ],
    ids=["default-ends-before-reservation", "default-reaches-past-it"],
)
def test_the_queue_default_limit_decides_whether_a_job_backfills(
    session, queue_limit, dispatched, reasons
):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true, run_limit: {queue_limit}}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 2, state: RUN, hosts: {{n02: 2}}, start: 0, run_limit: 3000}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
          - {{id: 11, n: 2, submit: 20}}
    """)
    # Job 11 gives no limit: it has the queue's, so its window is [1000, 1000 + Q).
    # Q = 1500 ends at 2500, before job 10's reservation at 3000; Q = 2500 at 3500.
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4, "n02": 4})]
    assert s.dispatched == dispatched, (
        "a job without its own run limit has its queue's run_limit: it backfills only "
        "when now + that default ends before the reservation's start"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        **reasons,
    }


def test_a_queue_maximum_alone_is_the_limit_of_jobs_without_one(session):
    # LSF's RUNLIMIT with one value is the hard limit of every job: job 1 runs
    # without a limit of its own in a queue with only max_run_limit 2000, so it is
    # planned to end at 2000 (not never), and job 10 gets its reservation at 3000.
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true, max_run_limit: 2000}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 1000}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
    """)
    assert reservations(s.json) == [(10, 2000.0, {"n01": 4, "n02": 4})]
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on n01 n02 (4 slots each)",
    }


def test_a_running_job_without_its_own_limit_ends_at_its_queue_default(session):
    s = session("""
        now: 1000
        cluster:
          reserve_depth: 1
          hosts:
            - {name: n01, slots: 4}
          queues:
            - {name: normal, backfill: true, run_limit: 2500}
        jobs:
          - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 500}
          - {id: 10, n: 4, submit: 10}
    """)
    # Job 1 has the queue's limit: planned to end at 500 + 2500 = 3000 (not never).
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4})], (
        "a running job without its own limit is planned to end at start + its queue's run_limit"
    )
    assert s.reasons == {10: "Reserved: expected to start at 3000 (in 33 min) on n01 (4 slots)"}


# ----------------------------------------------------------------------------- profile


def test_a_running_job_without_a_limit_never_frees_its_host(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_3}
          queues:
            - {{name: first, priority: 50, hosts: [n01], backfill: true}}
            - {{name: normal, priority: 30, backfill: true}}
        jobs:
          - {{id: 1, queue: normal, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0}}
          - {{id: 2, queue: normal, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0,
              run_limit: 3000}}
          - {{id: 3, queue: normal, n: 4, state: RUN, hosts: {{n03: 4}}, start: 0,
              run_limit: 2000}}
          - {{id: 20, queue: first, n: 1, submit: 50, run_limit: 100}}
          - {{id: 10, queue: normal, n: 8, submit: 10, run_limit: 1000}}
    """)
    # Job 1 has no limit (nor its queue): n01 is held for ever. Job 20 (queue first,
    # scheduled first) can run only on n01: it never fits, takes no reservation, and
    # leaves the depth to job 10, which cannot count on n01 either: 4 slots at 2000
    # (n03), 8 at 3000 (n02 + n03).
    assert reservations(s.json) == [(10, 3000.0, {"n02": 4, "n03": 4})], (
        "a running job without a limit is planned never to end: no reservation uses its "
        "host, and a job that fits only there takes none"
    )
    assert s.dispatched == {}
    assert s.reasons == {
        20: "Not enough job slots: 1 needed, 0 free on eligible hosts",
        10: "Reserved: expected to start at 3000 (in 33 min) on n02 n03 (4 slots each)",
    }


def test_the_profile_holds_consumables_as_well_as_slots(session):
    s = session("""
        now: 1000
        cluster:
          reserve_depth: 1
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: n01, slots: 8, resources: {mem: 100}}
          queues:
            - {name: normal, backfill: true}
        jobs:
          - {id: 1, n: 1, res: "rusage[mem=80]", state: RUN, hosts: {n01: 1}, start: 0,
             run_limit: 2000}
          - {id: 10, n: 4, res: "rusage[mem=25]", submit: 10, run_limit: 1000}
          - {id: 11, n: 1, submit: 20, run_limit: 100000}
          - {id: 12, n: 1, res: "rusage[mem=10]", submit: 30, run_limit: 100000}
          - {id: 13, n: 1, res: "rusage[mem=10]", submit: 40, run_limit: 500}
    """)
    # Free now: 7 slots, 20 mem. Job 10 needs 100 mem: it fits when job 1 ends at 2000
    # and holds 4 slots and all 100 mem over [2000, 3000). Job 11 (no mem) leaves 4 slots
    # of the 7 free alone: it starts. Job 12 needs 10 mem past 2000: all of it is held.
    # Job 13 ends at 1500: it backfills.
    assert reservations(s.json) == [(10, 2000.0, {"n01": 4})]
    assert s.dispatched == {11: {"n01": 1}, 13: {"n01": 1}}, (
        "a reservation holds its per-slot consumables in the profile: a job that needs "
        "them past the reservation's start is held back, one that needs none is not"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots)",
        12: "Would delay the reservation of job 10 (starts in 17 min)",
    }


def test_reserved_hosts_are_the_most_free_first_then_by_name(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_3}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 3, state: RUN, hosts: {{n01: 3}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 3, state: RUN, hosts: {{n02: 3}}, start: 0, run_limit: 3000}}
          - {{id: 3, n: 3, state: RUN, hosts: {{n03: 3}}, start: 0, run_limit: 3000}}
          - {{id: 10, n: 5, submit: 10, run_limit: 1000}}
    """)
    # 3 free now; at 2000: n01 4, n02 1, n03 1 over [2000, 3000): 6 slots. The usual
    # placement: n01 (most free), then n02 before n03 (same free slots: by name).
    assert reservations(s.json) == [(10, 2000.0, {"n01": 4, "n02": 1})], (
        "a reservation's hosts are what the usual placement picks on the capacity free "
        "over its window: most free first, then name"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots) n02 (1 slot)",
    }


def test_jobs_pending_for_a_limit_or_a_hold_take_no_reservation(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
          limits:
            - {{name: per-user, users: each, slots: 8}}
        jobs:
          - {{id: 1, user: alice, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0,
              run_limit: 2000}}
          - {{id: 2, user: carol, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0,
              run_limit: 3000}}
          - {{id: 8, user: dave, n: 8, submit: 0, run_limit: 1000, hold: true}}
          - {{id: 9, user: alice, n: 8, submit: 5, run_limit: 1000}}
          - {{id: 10, user: bob, n: 8, submit: 10, run_limit: 1000}}
    """)
    # Job 8 is held; job 9's user runs 4 of her 8 slots: 4 + 8 > 8, a limit. Neither
    # fails on resources: the one reservation goes to job 10.
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4, "n02": 4})], (
        "only a job that fails on resources reserves; held jobs and jobs at a limit take "
        "none and leave the depth to the next"
    )
    assert s.reasons == {
        8: "The job was suspended by the user while pending",
        9: "The user has reached the limit per-user (8 slots)",
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
    }


@pytest.mark.parametrize(
    ("limit", "expected", "reason", "next_due"),
    [
        (
            "run_limit: 3000",
            [(10, 4000.0, {"n01": 4, "n02": 4})],
            "Reserved: expected to start at 4000 (in 50 min) on n01 n02 (4 slots each)",
            None,
        ),
        ("", [], "Not enough job slots: 8 needed, 0 free on eligible hosts", None),
    ],
    ids=["dispatched-with-limit", "dispatched-without-limit"],
)
def test_a_job_dispatched_this_session_holds_its_hosts_for_its_limit(
    session, limit, expected, reason, next_due
):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 9, n: 4, submit: 0, {limit}}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
    """)
    # Job 9 takes n02 now, for its limit (3000 s: until 4000) or for ever (no limit).
    # Job 10 then fits both hosts at 4000, or never.
    assert s.dispatched == {9: {"n02": 4}}
    assert reservations(s.json) == expected, (
        "a job dispatched this session holds its hosts in the profile from now for its "
        "limit (for ever without one)"
    )
    assert s.reasons == {10: reason}
    assert s.json["next_due"] == next_due


@pytest.mark.parametrize("limit", [500, 1000], ids=["past-its-limit", "at-its-limit"])
def test_a_job_past_its_limit_is_planned_to_end_one_second_from_now(session, limit):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: {limit}}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 10000}}
          - {{id: 10, n: 4, submit: 10, run_limit: 1000}}
    """)
    # start + limit <= now: job 1 is still running past its limit; planned end 1001.
    assert reservations(s.json) == [(10, 1001.0, {"n01": 4})], (
        "a running job whose start + limit is not after now is planned to end one second "
        "from now (not never, not in the past): the reservation starts at now + 1"
    )
    assert s.reasons == {10: "Reserved: expected to start at 1001 (in 1 s) on n01 (4 slots)"}
    assert s.json["next_due"] is None, (
        "a reservation one second from now waits for a job past its limit, whose end is an "
        "event: the plan is re-made at the next event's session, not timed"
    )


def test_an_end_within_the_second_comes_before_a_job_past_its_limit(session):
    s = session(f"""
        now: 1000.5
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 500}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 1000.75}}
          - {{id: 10, n: 4, submit: 10, run_limit: 1000}}
    """)
    # Limits not in whole seconds: job 2 is planned to end at 1000.75, before job 1,
    # past its limit, at 1001.5 (one second from now).
    assert reservations(s.json) == [(10, 1000.75, {"n02": 4})]


# ----------------------------------------------------------------------------- reservations


@pytest.mark.parametrize("backfill", ["true", "false"])
def test_reserve_depth_2_stacks_the_second_reservation_after_the_first(session, backfill):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 2
{HOSTS_2}
          queues:
            - {{name: normal, backfill: {backfill}}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 3000}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
          - {{id: 11, n: 8, submit: 20, run_limit: 500}}
          - {{id: 12, n: 4, submit: 30, run_limit: 900}}
    """)
    # Job 10 holds both hosts over [3000, 4000) (a reservation lasts the job's limit,
    # with or without backfill); job 11's earliest start with 8 slots free for 500 s is
    # when job 10's reservation ends. The depth is then used up:
    # job 12 (which would fit n01 over [2000, 2900)) gets none.
    assert reservations(s.json) == [
        (10, 3000.0, {"n01": 4, "n02": 4}),
        (11, 4000.0, {"n01": 4, "n02": 4}),
    ], "the first reservation is booked in the profile: the second starts when it ends"
    assert s.dispatched == {}
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        11: "Reserved: expected to start at 4000 (in 50 min) on n01 n02 (4 slots each)",
        12: "Not enough job slots: 4 needed, 0 free on eligible hosts",
    }
    assert s.json["next_due"] is None


def test_twins_with_depth_2_each_get_their_own_reservation_beside_each_other(session):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 2
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 3000}}
          - {{ids: "10-12", n: 4, res: "span[hosts=1]", submit: 10, run_limit: 5000}}
    """)
    # 10: n01 over [2000, 7000). 11 (its twin): n01 is reserved then, n02 frees at 3000.
    # 12: the depth is used up; it pends with the failure its twins met now.
    assert reservations(s.json) == [(10, 2000.0, {"n01": 4}), (11, 3000.0, {"n02": 4})], (
        "twins of a job that failed now fail now too, but each gets its own reservation "
        "while depth remains: the second beside the first"
    )
    assert s.dispatched == {}
    assert s.reasons == {
        10: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots)",
        11: "Reserved: expected to start at 3000 (in 33 min) on n02 (4 slots)",
        12: "Not enough job slots: 4 needed, 0 free on eligible hosts",
    }


def test_reserve_depth_0_gives_exactly_todays_decisions(run):
    base = """
        now: 1000
        cluster:
          {depth}
{hosts}
          queues:
            - {{name: normal{backfill}}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 1, state: RUN, hosts: {{n02: 1}}, start: 0, run_limit: 3000}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
          - {{id: 11, n: 2, submit: 20, run_limit: 2500}}
          - {{id: 12, n: 1, submit: 30, run_limit: 2001}}
          - {{id: 13, n: 2, submit: 40, run_limit: 1500}}
          - {{id: 14, n: 1, submit: 50, run_limit: 2000}}
    """
    depth0 = run(base.format(hosts=HOSTS_2, depth="reserve_depth: 0", backfill=", backfill: true"))
    no_key = run(base.format(hosts=HOSTS_2, depth="", backfill=", backfill: true"))
    today = run(base.format(hosts=HOSTS_2, depth="", backfill=""))
    # No plan: every lower job takes what is free now (3 slots on n02) in order.
    assert depth0["dispatch"] == [
        {"job": 11, "hosts": {"n02": 2}},
        {"job": 12, "hosts": {"n02": 1}},
    ], "without reservations a lower job takes whatever is free now, whatever its limit"
    assert depth0["pending"] == [
        {"job": 10, "reason": "Not enough job slots: 8 needed, 3 free on eligible hosts"},
        {"job": 13, "reason": "Not enough job slots: 2 needed, 0 free on eligible hosts"},
        {"job": 14, "reason": "Not enough job slots: 1 needed, 0 free on eligible hosts"},
    ]
    assert depth0["reservations"] == []
    assert depth0["next_due"] is None, "without a plan nothing changes without an event"
    assert without_stats(depth0) == without_stats(no_key) == without_stats(today), (
        "reserve_depth: 0 (the default) gives the same session result as a cluster without "
        "the key, with or without backfill"
    )


@pytest.mark.parametrize(
    ("x", "y", "winner"),
    [
        ("queue: high, priority: 0, submit: 500", "queue: low, priority: 100, submit: 0", 20),
        ("queue: high, priority: 10, submit: 500", "queue: high, priority: 0, submit: 0", 20),
        ("queue: high, submit: 0", "queue: high, submit: 500", 20),
        ("queue: high, submit: 0", "queue: high, submit: 0", 10),
    ],
    ids=["queue-priority", "job-priority", "submit-time", "job-id"],
)
def test_the_first_blocked_job_in_scheduling_order_gets_the_reservation(session, x, y, winner):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: high, priority: 50, backfill: true}}
            - {{name: low, priority: 10, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 3000}}
          - {{id: 20, n: 8, run_limit: 1000, {x}}}
          - {{id: 10, n: 4, run_limit: 1000, {y}}}
    """)
    # X = job 20 (8 slots) would reserve both hosts at 3000; Y = job 10 (4 slots) n01 at
    # 2000. Each case sets one sort key for X and the keys after it against X.
    if winner == 20:
        expected = [(20, 3000.0, {"n01": 4, "n02": 4})]
        reasons = {
            20: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
            10: "Not enough job slots: 4 needed, 0 free on eligible hosts",
        }
    else:
        expected = [(10, 2000.0, {"n01": 4})]
        reasons = {
            10: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots)",
            20: "Not enough job slots: 8 needed, 0 free on eligible hosts",
        }
    assert reservations(s.json) == expected, (
        "the single reservation goes to the first blocked job in scheduling order: queue "
        "priority, then job priority, then submit time, then job id"
    )
    assert s.reasons == reasons


@pytest.mark.parametrize(
    ("res", "expected", "reason"),
    [
        (
            "span[hosts=1]",
            (10, 2500.0, {"n02": 4}),
            "Reserved: expected to start at 2500 (in 25 min) on n02 (4 slots)",
        ),
        (
            "",
            (10, 1500.0, {"n01": 2, "n03": 2}),
            "Reserved: expected to start at 1500 (in 8 min) on n01 n03 (2 slots each)",
        ),
    ],
    ids=["span-hosts-1", "no-span"],
)
def test_span_hosts_1_reserves_the_host_that_frees_first(session, res, expected, reason):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_3}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 2, state: RUN, hosts: {{n01: 2}}, start: 0, run_limit: 1500}}
          - {{id: 4, n: 2, state: RUN, hosts: {{n01: 2}}, start: 0, run_limit: 4000}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 2500}}
          - {{id: 3, n: 2, state: RUN, hosts: {{n03: 2}}, start: 0, run_limit: 3500}}
          - {{id: 10, n: 4, res: "{res}", submit: 10, run_limit: 1000}}
    """)
    # Free now: n01 0, n02 0, n03 2. At 1500 n01 has 2 (job 4 holds 2 until 4000): 4
    # slots in all, enough for a job that may spread, not for one on one host; at 2500
    # n02 is wholly free: the first host with 4 free slots (n01 and n03 only at 3500+).
    assert reservations(s.json) == [expected], (
        "span[hosts=1] reserves the first host on which all the slots free, not the "
        "first moment enough slots are free in all"
    )
    assert s.reasons == {10: reason}


@pytest.mark.parametrize(
    "wide",
    [
        "{id: 10, n: 16, submit: 0, run_limit: 1000}",
        '{id: 10, n: 6, res: "span[hosts=1]", submit: 0, run_limit: 1000}',
    ],
    ids=["more-slots-than-the-hosts-have", "more-than-one-host-has"],
)
def test_a_job_that_can_never_fit_takes_no_reservation_nor_the_depth(session, wide):
    s = session(f"""
        now: 1000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 0, run_limit: 2000}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: 0, run_limit: 3000}}
          - {wide}
          - {{id: 11, n: 4, submit: 10, run_limit: 1000}}
    """)
    # Job 10 needs 16 slots (the hosts have 8), or 6 on one 4-slot host: no change point
    # ever lets it fit. Job 11, next in order, gets the one reservation: n01 at 2000.
    assert reservations(s.json) == [(11, 2000.0, {"n01": 4})], (
        "a job that can never fit takes no reservation and does not use up the depth: "
        "the next blocked job gets it"
    )
    never = (
        "job requests 16 slots; the most this cluster offers is 8 (all hosts)"
        if "n: 16" in wide else
        "job requests 6 slots on one host; the most this cluster offers is 4 (host n01)"
    )
    assert s.reasons == {
        10: f"No host or template can ever run this job: {never}",
        11: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots)",
    }


# ----------------------------------------------------------------------------- output


def test_a_reservation_start_is_no_timer(run):
    obj = run("""
        now: 1000
        cluster:
          reserve_depth: 1
          hosts:
            - {name: n01, slots: 4}
          queues:
            - {name: normal, backfill: true}
        jobs:
          - {id: 9, n: 4, submit: 0, run_limit: 3000}
          - {id: 10, n: 4, submit: 10, run_limit: 1000}
    """)
    # Nothing runs before the session; job 9 starts now until 4000, job 10 reserves
    # n01 from 4000. The plan changes then only if job 9 ends (an event) or runs past
    # its limit (re-planned at the next event, as the reference EASY does).
    assert obj["dispatch"] == [{"job": 9, "hosts": {"n01": 4}}]
    assert reservations(obj) == [(10, 4000.0, {"n01": 4})]
    assert obj["next_due"] is None, (
        "neither a planned end nor a reservation's start (4000) is a timer of the session"
    )


def test_the_reserved_reason_on_an_epoch_clock_gives_the_date_and_minute(session):
    now = 1796133600  # 2026-12-01 14:00 UTC
    s = session(f"""
        now: {now}
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: {now - 200}, run_limit: 2000}}
          - {{id: 2, n: 4, state: RUN, hosts: {{n02: 4}}, start: {now - 200}, run_limit: 2000}}
          - {{id: 12, n: 8, submit: 10, run_limit: 1000}}
          - {{id: 13, n: 8, submit: 20, run_limit: 1000}}
    """)
    assert reservations(s.json) == [(12, now + 1800.0, {"n01": 4, "n02": 4})]
    assert s.reasons == {
        12: "Reserved: expected to start at 2026-12-01 14:30 UTC (in 30 min) "
        "on n01 n02 (4 slots each)",
        13: "Not enough job slots: 8 needed, 0 free on eligible hosts",
    }, "the live controller's clock is an epoch: the reason names the UTC date and minute"


def test_the_reserved_reason_on_a_long_scenario_clock_gives_the_exact_second(session):
    # Simulated traces run for months: times of 10^7 s and more are common.
    s = session(f"""
        now: 12345000
        cluster:
          reserve_depth: 1
{HOSTS_2}
          queues:
            - {{name: normal, backfill: true}}
        jobs:
          - {{id: 1, n: 4, state: RUN, hosts: {{n01: 4}}, start: 12340000, run_limit: 5678}}
          - {{id: 10, n: 8, submit: 10, run_limit: 1000}}
    """)
    # Job 1 ends at 12345678; n02 is free: job 10 (8 slots) reserves both then.
    assert reservations(s.json) == [(10, 12345678.0, {"n01": 4, "n02": 4})]
    assert s.reasons == {
        10: "Reserved: expected to start at 12345678 (in 11 min) on n01 n02 (4 slots each)",
    }, "a scenario clock's start is given in whole seconds, not rounded to 6 digits"
