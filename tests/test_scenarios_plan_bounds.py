"""Boundary specifications of the plan (ARCHITECTURE.md section 2a; docs/scheduling.md
section 6) that no other test pinned: each scenario is small, its exact outcome worked
out by hand in the comments. (Found by a mutation audit: each test fails when the rule
it names is broken in src/xce/sched.)

The clock is at 1000. Windows are half-open: a job's window is [now, now + limit), a
reservation holds its hosts over [start, start + limit).
"""

from __future__ import annotations

from typing import Any


def reservations(obj: dict[str, Any]) -> list[tuple[int, float, dict[str, int]]]:
    return [(r["job"], r["start"], r["hosts"]) for r in obj["reservations"]]


# ------------------------------------------------------- a window ending at a start

# n01 is full until 2000, n02 has 3 free slots now (job 2 holds 1 until 3000): the
# 8-slot job 10 reserves n01 and n02 from 3000. Jobs 14 and 15 ask for `order[-slots]`
# (the fewest free slots first), a host order under which a placement on the free
# capacity is not taken as undisturbed by the reservation: what it holds back within
# each job's window is asked for.
ORDER_PACKING = """
    now: 1000
    cluster:
      reserve_depth: 1
      hosts:
        - {name: n01, slots: 4}
        - {name: n02, slots: 4}
      queues:
        - {name: normal, backfill: true}
    jobs:
      - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 2000}
      - {id: 2, n: 1, state: RUN, hosts: {n02: 1}, start: 0, run_limit: 3000}
      - {id: 10, n: 8, submit: 10, run_limit: 1000}
      - {id: 14, n: 1, submit: 50, run_limit: 2000, res: "order[-slots]"}
      - {id: 15, n: 1, submit: 60, run_limit: 2001, res: "order[-slots]"}
"""


def test_a_job_ending_when_the_reservation_starts_backfills_under_any_host_order(session):
    s = session(ORDER_PACKING)
    # Job 14's window [1000, 3000) ends exactly when job 10's reservation starts: it
    # holds nothing job 10 needs, so it backfills on n02 (the only host with a free
    # slot). Job 15's window [1000, 3001) crosses 3000 by one second: held back.
    assert reservations(s.json) == [(10, 3000.0, {"n01": 4, "n02": 4})]
    assert s.dispatched == {14: {"n02": 1}}, (
        "a job whose window ends exactly at the reservation's start never delays it, "
        "whatever its order[]"
    )
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        15: "Would delay the reservation of job 10 (starts in 33 min)",
    }


# ------------------------------------------- a reservation ending at another's start


def test_a_second_reservation_may_end_exactly_when_the_first_starts(session):
    s = session(
        """
        now: 1000
        cluster:
          reserve_depth: 2
          hosts:
            - {name: n01, slots: 4}
            - {name: n02, slots: 4}
          queues:
            - {name: normal, backfill: true}
        jobs:
          - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 2000}
          - {id: 2, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 3000}
          - {id: 10, n: 8, submit: 10, run_limit: 1000}
          - {id: 11, n: 4, submit: 20, run_limit: 1000}
        """
    )
    # Job 10 (8 slots) fits on both hosts from 3000, over [3000, 4000). Job 11 (4 slots,
    # 1000 s) fits on n01 over [2000, 3000): n01 frees at 2000 and job 10 takes it only
    # from 3000, the very end of job 11's window. So it is reserved at 2000, not after
    # job 10 at 4000.
    assert reservations(s.json) == [
        (10, 3000.0, {"n01": 4, "n02": 4}),
        (11, 2000.0, {"n01": 4}),
    ]
    assert s.reasons == {
        10: "Reserved: expected to start at 3000 (in 33 min) on n01 n02 (4 slots each)",
        11: "Reserved: expected to start at 2000 (in 17 min) on n01 (4 slots)",
    }


# ------------------------------------------------------------ exclusive jobs (-x)


def test_an_exclusive_job_takes_no_reservation(session):
    s = session(
        """
        now: 1000
        cluster:
          reserve_depth: 1
          hosts:
            - {name: n01, slots: 4}
            - {name: n02, slots: 4}
            - {name: n03, slots: 4}
          queues:
            - {name: normal, backfill: true}
        jobs:
          - {id: 1, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 2000}
          - {id: 2, n: 4, state: RUN, hosts: {n03: 4}, start: 0, run_limit: 3000}
          - {id: 10, n: 8, submit: 10, run_limit: 1000, exclusive: true}
          - {id: 11, n: 4, submit: 20, run_limit: 5000}
        """
    )
    # Job 10 (-x, 8 slots) has one empty host now (n01, 4 slots): it fails on slots.
    # docs/scheduling.md, "Host lists": an exclusive job "takes no reservation itself
    # ... and waits until a host empties" (were it reserved, at 2000 on n01 and n02,
    # job 11 could not take n01 for 5000 s). So the depth is left unused and job 11
    # starts now on n01.
    assert s.json["reservations"] == []
    assert s.dispatched == {11: {"n01": 4}}
    assert s.reasons == {10: "Not enough job slots: 8 needed, 4 free on eligible hosts"}


def test_the_reservation_named_as_delayed_is_the_one_the_window_crosses(session):
    s = session(
        """
        now: 1000
        cluster:
          reserve_depth: 2
          hosts:
            - {name: n01, slots: 4}
            - {name: n02, slots: 4}
          queues:
            - {name: normal, backfill: true}
        jobs:
          - {id: 1, n: 2, state: RUN, hosts: {n01: 2}, start: 0, run_limit: 2000}
          - {id: 2, n: 4, state: RUN, hosts: {n02: 4}, start: 0, run_limit: 3000}
          - {id: 10, n: 8, submit: 10, run_limit: 1000}
          - {id: 11, n: 4, submit: 20, run_limit: 1000}
          - {id: 12, n: 2, submit: 30, run_limit: 2000}
        """
    )
    # Job 10 (8 slots): n01 has 2 free now and 4 from 2000, n02 4 from 3000: reserved
    # on both over [3000, 4000). Job 11 (4 slots, 1000 s): n01 over [2000, 3000), before
    # job 10 takes it. Job 12 (2 slots, [1000, 3000)) fits now on n01's 2 free slots,
    # but job 11 needs them from 2000: it would delay job 11's reservation. Job 10's
    # starts at 3000, when job 12's window ends: job 12 does not delay that one, so the
    # reason names job 11 (the first booking in scheduling order whose start falls
    # within the window), not job 10.
    assert reservations(s.json) == [
        (10, 3000.0, {"n01": 4, "n02": 4}),
        (11, 2000.0, {"n01": 4}),
    ]
    assert s.dispatched == {}
    assert s.reason(12) == "Would delay the reservation of job 11 (starts in 17 min)"


# ------------------------------------------------------------------ run limits


def test_a_queue_default_run_limit_comes_before_its_maximum(session):
    s = session(
        """
        now: 1000
        cluster:
          reserve_depth: 1
          hosts:
            - {name: n01, slots: 4}
            - {name: n02, slots: 4}
          queues:
            - {name: normal, backfill: true, run_limit: 1000, max_run_limit: 5000}
        jobs:
          - {id: 1, n: 4, state: RUN, hosts: {n01: 4}, start: 0, run_limit: 2000}
          - {id: 2, n: 1, state: RUN, hosts: {n02: 1}, start: 0, run_limit: 3000}
          - {id: 10, n: 8, submit: 10}
          - {id: 13, n: 2, submit: 40}
        """
    )
    # docs/scheduling.md section 6: a job's limit is its own, else its queue's
    # `run_limit`, else its `max_run_limit`. Neither job has its own: both are planned
    # for 1000 s (not 5000). Job 10 (8 slots) is reserved on both hosts over
    # [3000, 4000); job 13 (2 slots) fits the hole on n02 over [1000, 2000).
    assert [(r["job"], r["start"], r.get("end"), r["hosts"]) for r in s.json["reservations"]] == [
        (10, 3000.0, 4000.0, {"n01": 4, "n02": 4})
    ]
    assert s.dispatched == {13: {"n02": 2}}
