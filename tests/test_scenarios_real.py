"""Scenario specifications of the real pass (docs/scheduling.md sections 1-3).

Each test is one small scenario with an inline cluster and the exact outcome the
documented semantics give, worked out by hand. Unless a test says otherwise the
cluster has no catalog (no templates, no countables): nothing could be provisioned,
so every pend reason is the real pass's own.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from xce.cli.main import main
from xce.config import ConfigError
from xce.scenario import load_scenario_text
from xce.sched.reasons import NEVER_RUNS

SCENARIO_FILE = "scenario.yaml"


# --------------------------------------------------------------------------- order


def test_higher_priority_queue_is_scheduled_first_whatever_the_job_priority(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h1, slots: 1}
          queues:
            - {name: low, priority: 10}
            - {name: high, priority: 50}
        jobs:
          - {id: 1, queue: low, priority: 100, submit: 0}
          - {id: 2, queue: high, submit: 500}
    """)
    assert s.dispatched == {2: {"h1": 1}}, (
        "queue priority is the first sort key: the high queue's job takes the only slot "
        "even though the low queue's job is older and has a higher job priority"
    )
    assert s.reasons == {1: "Not enough job slots: 1 needed, 0 free on eligible hosts"}


def test_fcfs_within_a_queue_by_submit_time_then_job_id(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: h1, slots: 3, resources: {mem: 100}}
        jobs:
          - {id: 9, submit: 10}
          - {id: 8, submit: 10}
          - {id: 3, submit: 20}
          - {id: 4, submit: 10, res: "rusage[mem=1]"}
    """)
    assert s.dispatch_order == [4, 8, 9], (
        "within a queue and job priority, jobs go by submit time, then id, across "
        "buckets (4, 8, 9 submitted at 10) before job 3 (submitted at 20)"
    )
    assert s.reasons == {3: "Not enough job slots: 1 needed, 0 free on eligible hosts"}


def test_job_priority_orders_jobs_of_one_queue_before_submit_time(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h1, slots: 1}
        jobs:
          - {id: 1, submit: 0}
          - {id: 2, submit: 50, priority: 10}
    """)
    assert s.dispatched == {2: {"h1": 1}}, (
        "job priority (high first) comes before submit time within a queue"
    )
    assert s.reasons == {1: "Not enough job slots: 1 needed, 0 free on eligible hosts"}


# --------------------------------------------------------------------------- host lists


def test_queue_with_named_hosts_uses_only_those_hosts(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
            - {name: b, slots: 4}
            - {name: c, slots: 4}
          queues:
            - {name: normal, priority: 30}
            - {name: conly, priority: 20, hosts: [c]}
        jobs:
          - {id: 1, queue: conly, n: 2, submit: 0}
          - {id: 2, queue: conly, n: 3, submit: 10}
    """)
    assert s.dispatched == {1: {"c": 2}}, (
        "a queue listing host c places only on c, although a and b are free and come "
        "first by name"
    )
    assert s.reasons == {2: "Not enough job slots: 3 needed, 2 free on eligible hosts"}, (
        "only the 2 slots left on c count as free on eligible hosts"
    )


CLUSTER_WITH_PROVISIONED_HOST = """
    now: 1000
    cluster:
      hosts:
        - {{name: a, slots: 2}}
      queues:
        - {queue}
      catalog:
        templates:
          - {{name: t, provider: aws, slots: 8, max: 10}}
    hosts:
      - {{name: c1, template: t, joined: 0}}
    jobs:
      - {{id: 1, n: 2, submit: 0}}
      - {{id: 2, n: 1, submit: 10}}
"""


def test_queue_list_all_means_every_static_host_and_no_provisioned_one(session):
    s = session(CLUSTER_WITH_PROVISIONED_HOST.format(queue="{name: statics, hosts: [all]}"))
    assert s.dispatched == {1: {"a": 2}}, (
        "'all' is every static host: the provisioned host c1 (8 free slots, preferred by "
        "the spread default) is not in the list"
    )
    assert s.reasons == {2: "Not enough job slots: 1 needed, 0 free on eligible hosts"}, (
        "a list without template: entries never bursts: the real-pass reason stays"
    )
    assert s.demand["hosts"] == []


def test_queue_without_host_list_uses_static_and_provisioned_hosts(session):
    s = session(CLUSTER_WITH_PROVISIONED_HOST.format(queue="{name: normal}"))
    assert s.dispatched == {1: {"c1": 2}, 2: {"c1": 1}}, (
        "a queue without hosts: may use provisioned hosts; c1 has the most free slots"
    )


# --------------------------------------------------------------------------- limits


def test_limit_users_each_counts_every_user_separately(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 16}
          limits:
            - {name: per-user, users: each, slots: 4}
        jobs:
          - {id: 1, user: alice, n: 3, state: RUN, hosts: {h: 3}, start: 0}
          - {id: 10, user: alice, n: 2, submit: 10}
          - {id: 11, user: alice, n: 1, submit: 20}
          - {id: 12, user: bob, n: 2, submit: 30}
    """)
    assert s.dispatched == {11: {"h": 1}, 12: {"h": 2}}, (
        "alice runs 3 of her 4 slots: a 1-slot job still fits; bob has his own counter, "
        "so his job, the twin of alice's job 10, starts"
    )
    assert s.reasons == {10: "The user has reached the limit per-user (4 slots)"}


def test_limit_with_a_user_list_counts_those_users_together(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 16}
          limits:
            - {name: eda, users: [alice, bob], jobs: 2}
        jobs:
          - {id: 1, user: alice, state: RUN, hosts: {h: 1}, start: 0}
          - {id: 10, user: bob, submit: 10}
          - {id: 11, user: alice, submit: 20}
          - {id: 12, user: carol, submit: 30}
    """)
    assert s.dispatched == {10: {"h": 1}, 12: {"h": 1}}, (
        "alice and bob share one counter of 2 jobs (alice's running job + bob's new one); "
        "carol is not in the list"
    )
    assert s.reasons == {11: "The user has reached the limit eda (2 jobs)"}, (
        "a job dispatched earlier in the same session counts against the limit"
    )


def test_limit_with_a_queue_list_counts_those_queues_together(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 16}
          queues:
            - {name: normal, priority: 30}
            - {name: other, priority: 10}
          limits:
            - {name: normal-q, queues: [normal], slots: 4}
        jobs:
          - {id: 1, queue: normal, n: 3, submit: 0}
          - {id: 2, queue: normal, n: 2, submit: 10}
          - {id: 3, queue: other, n: 2, submit: 20}
    """)
    assert s.dispatched == {1: {"h": 3}, 3: {"h": 2}}, (
        "queue normal has 4 slots in all; queue other is not limited"
    )
    assert s.reasons == {2: "The queue has reached the limit normal-q (4 slots)"}


def test_limit_queues_each_counts_every_queue_separately(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 16}
          queues:
            - {name: qa, priority: 20}
            - {name: qb, priority: 10}
          limits:
            - {name: per-q, queues: each, slots: 2}
        jobs:
          - {id: 1, queue: qa, n: 2, submit: 0}
          - {id: 2, queue: qa, n: 1, submit: 10}
          - {id: 3, queue: qb, n: 2, submit: 20}
    """)
    assert s.dispatched == {1: {"h": 2}, 3: {"h": 2}}, "each queue has its own 2 slots"
    assert s.reasons == {2: "The queue has reached the limit per-q (2 slots)"}


def test_job_count_limit_without_users_or_queues_counts_every_job(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 16}
          limits:
            - {name: total, jobs: 2}
        jobs:
          - {id: 1, user: alice, state: RUN, hosts: {h: 1}, start: 0}
          - {id: 2, user: bob, submit: 10}
          - {id: 3, user: carol, submit: 20}
    """)
    assert s.dispatched == {2: {"h": 1}}, "one running and one new job reach 2 jobs"
    assert s.reasons == {3: "The limit total has been reached (2 jobs)"}


def test_slot_limit_without_users_or_queues_counts_every_slot(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 16}
          limits:
            - {name: cap, slots: 3}
        jobs:
          - {id: 1, n: 2, state: RUN, hosts: {h: 2}, start: 0}
          - {id: 2, n: 2, submit: 10}
          - {id: 3, n: 1, submit: 20}
    """)
    assert s.dispatched == {3: {"h": 1}}, "2 running slots + 1 = 3 fits, + 2 does not"
    assert s.reasons == {2: "The limit cap has been reached (3 slots)"}


# --------------------------------------------------------------------------- consumables


def test_per_slot_rusage_is_counted_on_each_host_for_the_slots_placed_there(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 4, resources: {mem: 8000}}
            - {name: b, slots: 4, resources: {mem: 8000}}
        jobs:
          - {id: 1, n: 4, res: "rusage[mem=3000]", submit: 0}
          - {id: 2, n: 2, res: "rusage[mem=3000]", submit: 10}
    """)
    assert s.dispatched == {1: {"a": 2, "b": 2}}, (
        "8000 MB holds two 3000 MB slots per host: 4 slots spread 2 + 2"
    )
    assert s.reasons == {
        2: "Not enough mem: 2 slots x 3000 needed, room for 0 slots on eligible hosts"
    }, "each host keeps 2000 MB after job 1: no room for a 3000 MB slot"


def test_running_jobs_hold_their_per_slot_consumables(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 8, resources: {mem: 10000}}
        jobs:
          - {id: 1, n: 2, res: "rusage[mem=3000]", state: RUN, hosts: {a: 2}, start: 0}
          - {id: 2, n: 2, res: "rusage[mem=3000]", submit: 10}
    """)
    assert s.reasons == {
        2: "Not enough mem: 2 slots x 3000 needed, room for 1 slots on eligible hosts"
    }, "the running job holds 2 x 3000 MB, leaving 4000 MB: room for one 3000 MB slot"


# --------------------------------------------------------------------------- shared pools


def test_shared_shorthand_pool_is_consumed_once_per_job(session):
    s = session("""
        now: 1000
        cluster:
          resources: {vcs: {type: numeric, consumable: true, shared: true}}
          hosts:
            - {name: h, slots: 8}
          shared:
            vcs: {total: 2}
        jobs:
          - {id: 1, n: 2, res: "rusage[vcs=1]", submit: 0}
          - {id: 2, n: 1, res: "rusage[vcs=1]", submit: 10}
          - {id: 3, n: 1, res: "rusage[vcs=1]", submit: 20}
    """)
    assert s.dispatched == {1: {"h": 2}, 2: {"h": 1}}, (
        "a 2-slot job takes one vcs token, not two: jobs 1 and 2 use the 2 tokens"
    )
    assert s.reasons == {3: "Short 1 of vcs (shared): 0 free"}


SEVERAL_POOLS = """
    now: 1000
    cluster:
      resources: {hspice: {type: numeric, consumable: true, shared: true}}
      hosts:
        - {name: a, slots: SLOTS}
        - {name: b, slots: SLOTS}
      shared:
        hspice:
          - {pool: site, total: SITE, hosts: [a]}
          - {pool: wide, total: WIDE, hosts: [a, b]}
    jobs:
"""


def test_shared_tokens_come_from_the_first_pool_in_order_that_reaches_the_hosts(session):
    s = session(
        SEVERAL_POOLS.replace("SLOTS", "2").replace("SITE", "1").replace("WIDE", "1")
        + """
      - {id: 1, n: 2, res: "rusage[hspice=1] span[hosts=1]", submit: 0}
      - {id: 2, n: 2, res: "rusage[hspice=1] span[hosts=1]", submit: 10}
    """
    )
    assert s.dispatched == {1: {"a": 2}, 2: {"b": 2}}, (
        "job 1 on a takes pool site (first in order reaching a), leaving pool wide for "
        "job 2 on b"
    )
    assert [d.pools for d in s.result.dispatch] == [{"hspice": "site"}, {"hspice": "wide"}]


def test_shared_tokens_need_a_pool_reaching_every_host_of_the_job(session):
    s = session(
        SEVERAL_POOLS.replace("SLOTS", "1").replace("SITE", "5").replace("WIDE", "0")
        + """
      - {id: 1, n: 2, res: "rusage[hspice=1]", submit: 0}
      - {id: 2, n: 1, res: "rusage[hspice=1]", submit: 10}
    """
    )
    assert s.reasons == {1: NEVER_RUNS + ": job requests 2 slots; the most this cluster "
                            "offers with 1 hspice from one pool is 1 (all hosts)"}, (
        "job 1 spreads over a and b; site does not reach b and wide, the only pool "
        "reaching both, has no token and none to borrow: it can never run"
    )
    assert s.dispatched == {2: {"a": 1}}, "a 1-slot job on a takes its token from site"


# --------------------------------------------------------------------------- span


def test_span_hosts_1_puts_all_slots_on_one_host(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
            - {name: b, slots: 4}
        jobs:
          - {id: 1, n: 2, state: RUN, hosts: {a: 1, b: 1}, start: 0}
          - {id: 2, n: 4, res: "span[hosts=1]", submit: 10}
          - {id: 3, n: 3, res: "span[hosts=1]", submit: 20}
          - {id: 4, n: 3, submit: 30}
    """)
    assert s.reasons == {2: "Not enough hosts to meet the span requirement"}, (
        "6 slots are free, but no single host has 4"
    )
    assert s.dispatched == {3: {"a": 3}, 4: {"b": 3}}


def test_span_ptile_places_exactly_n_per_host_and_the_last_host_fewer(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
            - {name: b, slots: 4}
            - {name: c, slots: 4}
        jobs:
          - {id: 1, n: 5, res: "span[ptile=2]", submit: 0}
          - {id: 2, n: 4, res: "span[ptile=4]", submit: 10}
    """)
    assert s.dispatched == {1: {"a": 2, "b": 2, "c": 1}}, (
        "ptile=2: 2 slots per host although each host has 4 free; the last gets 1"
    )
    assert s.reasons == {2: "Not enough hosts to meet the span requirement"}, (
        "7 slots are free (2, 2, 3) but no host can take a tile of 4"
    )


def test_span_ptile_skips_hosts_with_room_for_less_than_a_tile(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 3}
            - {name: b, slots: 1}
            - {name: c, slots: 2}
        jobs:
          - {id: 1, n: 4, res: "span[ptile=2]"}
    """)
    assert s.dispatched == {1: {"a": 2, "c": 2}}, (
        "a takes exactly 2 (not its 3), b's single slot cannot hold a tile of 2"
    )


# --------------------------------------------------------------------------- order


ORDER_CLUSTER = """
    now: 1000
    cluster:
      hosts:
        - {name: a, slots: 4}
        - {name: b, slots: 4}
    jobs:
      - {id: 1, state: RUN, hosts: {a: 1}, start: 0}
"""


def test_default_order_spreads_to_the_host_with_most_free_slots(session):
    s = session(ORDER_CLUSTER + """
      - {id: 2, n: 1, submit: 10}
      - {id: 3, n: 5, submit: 20}
    """)
    assert s.dispatched == {2: {"b": 1}, 3: {"a": 3, "b": 2}}, (
        "without order[]: most free slots first (b: 4 > a: 3), then name on ties "
        "(a: 3 = b: 3, so a is filled first)"
    )


def test_order_minus_slots_packs_onto_the_host_with_fewest_free_slots(session):
    s = session(ORDER_CLUSTER + """
      - {id: 2, n: 1, res: "order[-slots]", submit: 10}
      - {id: 3, n: 1, res: "order[-slots]", submit: 20}
      - {id: 4, n: 4, res: "order[-slots]", submit: 30}
    """)
    assert s.dispatched == {2: {"a": 1}, 3: {"a": 1}, 4: {"a": 1, "b": 3}}, (
        "order[-slots] prefers the least free slots: a (3, then 2, then 1 free) "
        "before b (4 free)"
    )


def test_order_mem_prefers_the_host_with_most_free_mem(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 4, resources: {mem: 8000}}
            - {name: b, slots: 2, resources: {mem: 16000}}
        jobs:
          - {id: 1, res: "order[mem]", submit: 0}
          - {id: 2, submit: 10}
    """)
    assert s.dispatched == {1: {"b": 1}, 2: {"a": 1}}, (
        "order[mem] picks b (16000 MB free); the default picks a (4 free slots > 1)"
    )


# --------------------------------------------------------------------------- host state


def test_closed_hosts_get_no_jobs(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
            - {name: b, slots: 8}
        hosts:
          - {name: b, state: closed}
        jobs:
          - {id: 1, n: 1, submit: 0}
          - {id: 2, n: 6, submit: 10}
    """)
    assert s.dispatched == {1: {"a": 1}}, "b has the most free slots but is closed"
    assert s.reasons == {2: "Not enough job slots: 6 needed, 3 free on eligible hosts"}, (
        "only open hosts count: 3 slots left on a"
    )


def test_pend_reason_when_every_eligible_host_is_closed_or_unavailable(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
            - {name: b, slots: 4}
            - {name: c, slots: 4}
          queues:
            - {name: bc, hosts: [b, c]}
        hosts:
          - {name: b, state: closed}
          - {name: c, state: unavail}
        jobs:
          - {id: 1}
    """)
    assert s.reasons == {1: "No eligible host is open: 2 closed or unavailable"}


# --------------------------------------------------------------------------- pend reasons


def test_pend_reason_no_host_satisfies_select(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 4, resources: {mem: 64000}}
        jobs:
          - {id: 1, res: "select[mem>500000]"}
    """)
    assert s.reasons == {1: NEVER_RUNS + ": No host or template satisfies "
                            "select[mem>500000] (largest mem: 64000 on a)"}


def test_pend_reason_no_host_available_to_queue_without_select(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
          queues:
            - {name: cloud, hosts: ["template:aws.*"]}
        jobs:
          - {id: 1}
    """)
    assert s.reasons == {
        1: NEVER_RUNS + ": queue cloud has no host nor template that may ever run jobs"
    }, (
        "the queue's list names only templates and no template of them is configured"
    )


def test_pend_reason_not_enough_consumable(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 8, resources: {mem: 16000}}
        jobs:
          - {id: 9, n: 1, res: "rusage[mem=8000]", state: RUN, hosts: {a: 1}, start: 0}
          - {id: 1, n: 4, res: "rusage[mem=4000]"}
    """)
    assert s.reasons == {
        1: "Not enough mem: 4 slots x 4000 needed, room for 2 slots on eligible hosts"
    }


def test_first_failing_check_is_the_pend_reason_slots_before_consumables(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 8, resources: {mem: 16000}}
        jobs:
          - {id: 9, n: 6, res: "rusage[mem=2000]", state: RUN, hosts: {a: 6}, start: 0}
          - {id: 1, n: 4, res: "rusage[mem=4000]"}
    """)
    assert s.reasons == {1: "Not enough job slots: 4 needed, 2 free on eligible hosts"}, (
        "check 4 (slots) fails before check 5 (consumables) is looked at"
    )


def test_first_failing_check_is_the_pend_reason_limit_before_resources(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: a, slots: 4, resources: {mem: 64000}}
          limits:
            - {name: per-user, users: each, slots: 2}
        jobs:
          - {id: 1, user: alice, n: 2, state: RUN, hosts: {a: 2}, start: 0}
          - {id: 2, user: alice, res: "select[mem>500000]", submit: 10}
    """)
    assert s.reasons == {2: "The user has reached the limit per-user (2 slots)"}, (
        "check 1 (limits) comes before check 2 (select), even for a job nothing could "
        "ever run"
    )
    assert [(e.stage, e.check) for e in s.trace(2)] == [("real", "limit")]


def test_held_job_pends_as_suspended_and_is_never_considered(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 1}
        jobs:
          - {id: 1, submit: 0, hold: true}
          - {id: 2, submit: 10}
    """)
    assert s.dispatched == {2: {"h": 1}}, "the older held job does not take the slot"
    assert s.reasons == {1: "The job was suspended by the user while pending"}


# --------------------------------------------------------------------------- buckets


def test_failed_bucket_pends_its_later_jobs_but_other_buckets_still_start(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: a, slots: 4}
        jobs:
          - {id: 1, n: 2, submit: 0}
          - {id: 2, n: 3, submit: 10}
          - {id: 3, n: 3, submit: 20}
          - {id: 4, n: 1, submit: 30}
          - {id: 5, n: 1, submit: 40}
          - {id: 6, n: 3, submit: 50}
    """)
    assert s.dispatch_order == [1, 4, 5], (
        "no reservation: once the 3-slot bucket fails, later 1-slot jobs still start"
    )
    reason = "Not enough job slots: 3 needed, 2 free on eligible hosts"
    assert s.reasons == {2: reason, 3: reason, 6: reason}, (
        "later jobs of the failed bucket share the reason of its first failure (2 free "
        "then), without being evaluated again"
    )
    assert [e.job for e in s.trace(6)] == [2], "job 6's trace is job 2's evaluation"


# --------------------------------------------------------------------------- JSON


JSON_SCENARIO = """\
now: 1000
cluster:
  hosts:
    - {name: h, slots: 8}
  catalog:
    idle_time: 600
    templates:
      - {name: small, provider: aws, slots: 4, max: 10, rank: 1}
      - {name: big, provider: aws, slots: 8, max: 10, rank: 2}
hosts:
  - {name: c1, template: small, joined: 0, idle_since: 100}
jobs:
  - {id: 1, n: 1, submit: 0}
  - {ids: "2-3", n: 8, res: "span[hosts=1]", submit: 10}
"""

JSON_EXPECTED = {
    "now": 1000,
    "dispatch": [{"job": 1, "hosts": {"h": 1}}],
    "pending": [
        {
            "job": 2,
            "reason": "Waiting for provisioning: fits on template big "
            "(2 new hosts requested this session)",
        },
        {
            "job": 3,
            "reason": "Waiting for provisioning: fits on template big "
            "(2 new hosts requested this session)",
        },
    ],
    "demand": {
        "hosts": [{"template": "big", "count": 2, "in_flight_used": 0, "jobs": [2, 3]}],
        "resources": [],
    },
    "idle": {
        "hosts": [{"host": "c1", "template": "small", "idle_for": 900}],
        "resources": [],
    },
}


def test_session_result_json_has_the_formats_md_shape(run):
    obj = run(JSON_SCENARIO)
    assert list(obj) == [
        "now", "dispatch", "pending", "demand", "idle", "reservations", "preemptions",
        "holds", "next_due", "stats",
    ], "the session result has the top-level keys of FORMATS.md, with XCE's before stats"
    assert obj["reservations"] == [], "empty without reserve_depth (FORMATS.md)"
    assert obj["preemptions"] == [], "no queue preempts"
    assert obj["holds"] == [
        {"job": 2, "start": 1300.0, "hosts": {"big:virtual": 8}, "virtual": True},
        {"job": 3, "start": 1300.0, "hosts": {"big:virtual": 8}, "virtual": True},
    ], (
        "the jobs placed on new hosts of big hold them from now + the default "
        "expected_lead_time of 300 s (ARCHITECTURE.md 2a, Elastic)"
    )
    assert obj["next_due"] is None, "c1 is idle already and nothing else falls due"
    shown = {
        k: v for k, v in obj.items()
        if k not in ("stats", "reservations", "preemptions", "holds", "next_due")
    }
    assert shown == JSON_EXPECTED, (
        "job 1 takes h (8 free > 4 on c1); the 8-slot single-host jobs fit neither h (7 "
        "left) nor c1 nor template small, so they demand 2 hosts of big; c1 stays idle "
        "for 1000 - 100 = 900 s >= 600 s; no surplus key without surplus"
    )
    stats = obj["stats"]
    assert set(stats) >= {"pending", "real_pass_ms", "catalog_pass_ms", "end_ms", "session_ms"}
    assert stats["pending"] == 2, "stats.pending counts the jobs still pending"
    assert all(isinstance(stats[k], int | float) and stats[k] >= 0
               for k in ("real_pass_ms", "catalog_pass_ms", "end_ms"))
    assert json.loads(json.dumps(obj)) == obj, "the result is plain JSON data"


def test_json_pending_lists_every_job_with_its_own_reason_in_scheduling_order(run):
    obj = run("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 2}
        jobs:
          - {id: 1, n: 2, submit: 0}
          - {id: 2, n: 2, submit: 10}
          - {id: 3, n: 1, submit: 20, hold: true}
          - {id: 4, n: 1, submit: 30}
    """)
    assert obj["dispatch"] == [{"job": 1, "hosts": {"h": 2}}]
    assert obj["pending"] == [
        {"job": 2, "reason": "Not enough job slots: 2 needed, 0 free on eligible hosts"},
        {"job": 3, "reason": "The job was suspended by the user while pending"},
        {"job": 4, "reason": "Not enough job slots: 1 needed, 0 free on eligible hosts"},
    ], "each pending entry carries its own job's reason; entries in scheduling order"


def test_cli_session_json_prints_exactly_the_session_result(tmp_path, run):
    path = tmp_path / "scenario.yaml"
    path.write_text(JSON_SCENARIO, encoding="utf-8")
    out = CliRunner().invoke(main, ["sched", "session", str(path), "--json"])
    assert out.exit_code == 0, out.output
    printed = json.loads(out.output)  # one JSON object and nothing else
    shown = {
        k: v for k, v in printed.items()
        if k not in ("stats", "reservations", "preemptions", "holds", "next_due")
    }
    assert shown == JSON_EXPECTED, (
        "`xce sched session FILE --json` prints the session result of FORMATS.md"
    )
    assert printed["reservations"] == [] and printed["preemptions"] == []
    assert [r["job"] for r in printed["holds"]] == [2, 3]  # held on new hosts
    assert all(r["virtual"] for r in printed["holds"]) and printed["next_due"] is None
    assert set(printed["stats"]) >= {"pending", "real_pass_ms", "catalog_pass_ms", "end_ms"}


# --------------------------------------------------------------------------- errors


def load_error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_scenario_text(textwrap.dedent(text), SCENARIO_FILE)
    return info.value


def test_scenario_job_with_bad_requirement_is_a_config_error_at_its_line_and_field():
    err = load_error("""\
        now: 0
        cluster:
          hosts:
            - {name: h, slots: 1}
        jobs:
          - {id: 1}
          - {id: 2, res: "select[mem>]"}
    """)
    assert (err.file, err.line, err.field) == (SCENARIO_FILE, 7, "jobs[1]"), (
        "a bad requirement names the scenario file, the job's line and the job entry "
        "(README: `my.yaml:14: jobs[0]: requirement error at column 12: ...`)"
    )
    assert err.message == "requirement error at column 12: expected a number or name after '>'"


def test_scenario_job_with_unknown_queue_is_a_config_error_at_its_line_and_field():
    err = load_error("""\
        now: 0
        cluster:
          hosts:
            - {name: h, slots: 1}
        jobs:
          - {id: 1}
          - {id: 2, queue: nosuch}
    """)
    assert (err.file, err.line, err.field) == (SCENARIO_FILE, 7, "jobs[1]"), (
        "an unknown queue is reported at the job's line and entry"
    )
    assert "unknown queue 'nosuch'" in err.message
