"""Scenario specifications of the catalog pass, demand and idle supply
(docs/scheduling.md sections 4 and 5).

Each test is one small scenario with an inline cluster and the exact demand, pend
reasons and idle supply the documented semantics give, worked out by hand. Many
clusters have no static host at all: every job then fails the real pass with "No host
is available to queue normal" (a resource reason) and goes on to the catalog pass.
"""

from __future__ import annotations

import textwrap

import msgspec

from xce.model.events import JobFinished
from xce.scenario import load_scenario_text
from xce.sched import run_session


def waiting(template: str, detail: str) -> str:
    return f"Waiting for provisioning: fits on template {template} ({detail})"


def host_entry(template: str, count: int, in_flight_used: int, jobs: list[int]) -> dict:
    return {"template": template, "count": count, "in_flight_used": in_flight_used, "jobs": jobs}


def token_entry(resource: str, amount: float, in_flight_used: float, jobs: list[int]) -> dict:
    return {"resource": resource, "amount": amount, "in_flight_used": in_flight_used, "jobs": jobs}


# --------------------------------------------------------------------------- hosts


def test_alike_jobs_are_packed_first_fit_onto_new_hosts_of_a_template(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        jobs:
          - {ids: "1-10", n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("t", 3, 0, list(range(1, 11)))], (
        "ten 1-slot jobs fill 4-slot hosts first-fit: 4 + 4 + 2, so 3 new hosts"
    )
    assert s.demand["resources"] == []
    reason = waiting("t", "3 new hosts requested this session")
    assert s.reasons == {job: reason for job in range(1, 11)}, (
        "every job placed on a host opened this session waits for the new hosts, "
        "including jobs that share a host opened for an earlier job"
    )


def test_span_hosts_1_job_goes_to_the_first_template_by_rank_that_holds_it(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: small, provider: aws, slots: 4, max: 10, rank: 1}
              - {name: big, provider: aws, slots: 16, max: 10, rank: 2}
              - {name: huge, provider: aws, slots: 64, max: 10, rank: 3}
        jobs:
          - {ids: "1-2", n: 12, res: "span[hosts=1]"}
    """)
    assert s.demand["hosts"] == [host_entry("big", 2, 0, [1, 2])], (
        "small (4 slots) cannot hold 12 slots on one host; big (rank 2) can, one host "
        "per job since 12 + 12 > 16; huge is never reached"
    )
    assert s.reasons == {1: waiting("big", "2 new hosts requested this session"),
                         2: waiting("big", "2 new hosts requested this session")}


def test_span_ptile_job_takes_ceil_n_over_ptile_hosts_of_the_first_template_with_room_for_a_tile(
    session,
):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: small, provider: aws, slots: 2, max: 10, rank: 1}
              - {name: mid, provider: aws, slots: 4, max: 10, rank: 2}
              - {name: big, provider: aws, slots: 16, max: 10, rank: 3}
        jobs:
          - {id: 1, n: 10, res: "span[ptile=3]"}
    """)
    assert s.demand["hosts"] == [host_entry("mid", 4, 0, [1])], (
        "a tile of 3 does not fit small (2 slots); on mid, exactly 3 per host: "
        "3 + 3 + 3 + 1 = 4 hosts"
    )
    assert s.reasons == {1: waiting("mid", "4 new hosts requested this session")}


def test_hosts_opened_this_session_are_used_before_new_hosts_of_a_better_ranked_template(
    session,
):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: small, provider: aws, slots: 4, max: 10, rank: 1}
              - {name: big, provider: aws, slots: 16, max: 10, rank: 2}
        jobs:
          - {id: 1, n: 8, res: "span[hosts=1]", submit: 0}
          - {id: 2, n: 2, res: "span[hosts=1]", submit: 10}
    """)
    assert s.demand["hosts"] == [host_entry("big", 1, 0, [1, 2])], (
        "round (b), hosts already opened this session, comes before round (c), new "
        "hosts: job 2 fits the 8 free slots of job 1's big host instead of a new small"
    )


def test_job_too_big_for_any_template_host_names_the_template_shape(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 32}
          catalog:
            templates:
              - {name: c5, provider: aws, slots: 16, max: 10}
        jobs:
          - {id: 9, n: 32, state: RUN, hosts: {h: 32}, start: 0}
          - {id: 1, n: 32, res: "span[hosts=1]"}
    """)
    assert s.reasons == {
        1: "No template can host this job: template c5 holds 16 such slots per host, "
        "the job needs 32 on one host"
    }
    assert s.demand["hosts"] == []


def test_templates_are_tried_in_rank_order_ties_by_name(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: y, provider: aws, slots: 4, max: 10, rank: 5}
              - {name: x, provider: aws, slots: 4, max: 10, rank: 5}
              - {name: arm, provider: aws, slots: 4, type: ARM, max: 10, rank: 9}
        jobs:
          - {id: 1, res: "select[type==ARM]", submit: 0}
          - {id: 2, n: 4, res: "span[hosts=1]", submit: 10}
    """)
    assert s.demand["hosts"] == [host_entry("x", 1, 0, [2]), host_entry("arm", 1, 0, [1])], (
        "x and y share rank 5: x goes first by name; entries are listed in rank order "
        "(x before arm), not in job order"
    )


def test_template_allowance_is_max_less_hosts_present_and_in_flight(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 5}
        hosts:
          - {name: c1, template: t, joined: 0}
        supply:
          in_flight: {t: 2}
        jobs:
          - {id: 1, n: 4, state: RUN, hosts: {c1: 4}, start: 0}
          - {ids: "10-15", n: 4, res: "span[hosts=1]"}
    """)
    assert s.demand["hosts"] == [host_entry("t", 2, 2, [10, 11, 12, 13])], (
        "max 5 - 1 present - 2 in flight = 2 new hosts; jobs 10-11 use the in-flight "
        "hosts, 12-13 the new ones"
    )
    assert s.reasons == {
        10: waiting("t", "2 hosts in flight"),
        11: waiting("t", "2 hosts in flight"),
        12: waiting("t", "2 new hosts requested this session"),
        13: waiting("t", "2 new hosts requested this session"),
        14: "Template t allows no more hosts (max 5)",
        15: "Template t allows no more hosts (max 5)",
    }


def test_runtime_allowance_lowers_the_template_allowance(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        supply:
          allowance: {t: 1}
        jobs:
          - {ids: "1-3", n: 4, res: "span[hosts=1]"}
    """)
    assert s.demand["hosts"] == [host_entry("t", 1, 0, [1])], (
        "supply.allowance 1 caps the 10 the template's max would allow"
    )
    assert s.reasons[2] == s.reasons[3] == (
        "Template t allows no more hosts now (its runtime allowance: the provisioner's "
        "back-off after provider failures, or POST /catalog)"
    ), "the allowance, not the max (10), stops them: the reason says so"


def test_in_flight_hosts_are_used_before_new_ones(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        supply:
          in_flight: {t: 2}
        jobs:
          - {ids: "1-14", n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("t", 2, 2, list(range(1, 15)))], (
        "jobs 1-8 fill the 2 in-flight hosts (in_flight_used, not count); jobs 9-14 "
        "need 2 new hosts"
    )
    assert s.reasons == {
        **{job: waiting("t", "2 hosts in flight") for job in range(1, 9)},
        **{job: waiting("t", "2 new hosts requested this session") for job in range(9, 15)},
    }
    assert "surplus" not in s.demand, "both in-flight hosts are used"


def test_in_flight_hosts_of_any_template_come_before_a_new_host(session):
    """Issue 18, item 2: in-flight hosts of any template that can take a job are used
    before a new host of any template is requested; templates keep their rank among
    in-flight hosts, so a second session that finds last session's demand in flight
    places the same jobs on it and asks for nothing more."""
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: small, provider: aws, slots: 4, max: 10, rank: 1}
              - {name: big, provider: aws, slots: 16, max: 10, rank: 2}
        supply:
          in_flight: {big: 1, small: 1}
        jobs:
          - {ids: "1-3", n: 2}
    """)
    assert s.demand["hosts"] == [
        host_entry("small", 0, 1, [1, 2]), host_entry("big", 0, 1, [3])
    ], "the better-ranked in-flight host first, then the lower-ranked one: nothing new"
    assert s.reasons == {
        1: waiting("small", "1 host in flight"),
        2: waiting("small", "1 host in flight"),
        3: waiting("big", "1 host in flight"),
    }
    assert "surplus" not in s.demand, "both in-flight hosts are used"


def test_queue_priority_decides_who_gets_the_last_allowed_host(session):
    s = session("""
        now: 1000
        cluster:
          queues:
            - {name: low, priority: 10}
            - {name: high, priority: 50}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 1}
        jobs:
          - {id: 1, queue: low, n: 4, res: "span[hosts=1]", submit: 0}
          - {id: 2, queue: high, n: 4, res: "span[hosts=1]", submit: 100}
    """)
    assert s.demand["hosts"] == [host_entry("t", 1, 0, [2])], (
        "the catalog pass follows scheduling order: the high queue's job gets the one host"
    )
    assert s.reasons[1] == "Template t allows no more hosts (max 1)"


# --------------------------------------------------------------------------- limits


def test_per_user_limit_caps_demand(session):
    s = session("""
        now: 1000
        cluster:
          limits:
            - {name: per-user, users: each, slots: 8}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        jobs:
          - {ids: "1-10", user: alice, n: 1, submit: 0}
          - {id: 11, user: bob, n: 1, submit: 10}
    """)
    assert s.demand["hosts"] == [host_entry("t", 3, 0, [1, 2, 3, 4, 5, 6, 7, 8, 11])], (
        "virtual placements count against limits: alice gets 8 slots (2 hosts), bob "
        "needs a third host"
    )
    assert s.reasons[9] == s.reasons[10] == "The user has reached the limit per-user (8 slots)"


def test_per_queue_limit_caps_demand(session):
    s = session("""
        now: 1000
        cluster:
          queues:
            - {name: normal, priority: 30}
            - {name: other, priority: 10}
          limits:
            - {name: normal-q, queues: [normal], slots: 4}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        jobs:
          - {ids: "1-6", queue: normal, n: 1, submit: 0}
          - {id: 7, queue: other, n: 1, submit: 10}
    """)
    assert s.demand["hosts"] == [host_entry("t", 2, 0, [1, 2, 3, 4, 7])], (
        "queue normal may hold 4 slots: jobs 1-4 on one host; job 7 needs a second"
    )
    assert s.reasons[5] == s.reasons[6] == "The queue has reached the limit normal-q (4 slots)"


def test_job_blocked_by_a_limit_produces_no_demand(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 4}
          limits:
            - {name: per-user, users: each, slots: 4}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        jobs:
          - {id: 1, user: alice, n: 4, state: RUN, hosts: {h: 4}, start: 0}
          - {id: 2, user: alice, n: 1}
    """)
    assert s.reasons == {2: "The user has reached the limit per-user (4 slots)"}
    assert s.demand == {"hosts": [], "resources": []}, (
        "a limit reason is not a resource reason: more supply would not help"
    )


# --------------------------------------------------------------------------- tokens


TOKENS = """
    now: 1000
    cluster:
      resources: {vcs: {type: numeric, consumable: true, shared: true}}
      hosts:
        - {name: h, slots: 8}
      shared:
        vcs: {total: 0}
      catalog:
        templates:
          - {name: t, provider: aws, slots: 4, max: 10}
        countables:
          - {resource: vcs, max_borrow: 10, idle_time: 300}
"""


def test_short_tokens_are_borrowed_from_headroom_for_real_hosts(session):
    s = session(TOKENS + """
    supply:
      borrowed: {vcs: 3}
    jobs:
      - {id: 1, state: RUN, hosts: {h: 1}, start: 900, res: "rusage[vcs=3]"}
      - {ids: "2-3", res: "rusage[vcs=2]"}
    """)
    assert s.demand == {"hosts": [], "resources": [token_entry("vcs", 4, 0, [2, 3])]}, (
        "the jobs fit on free real host h and only lack tokens: 2 + 2 borrowed from "
        "headroom, no new host"
    )
    reason = "Short 2 of vcs; waiting for provisioning (headroom 7)"
    assert s.reasons == {2: reason, 3: reason}, "headroom = max_borrow 10 - borrowed 3"


def test_tokens_beyond_headroom_cannot_be_borrowed(session):
    s = session(TOKENS + """
    supply:
      headroom: {vcs: 3}
    jobs:
      - {ids: "1-2", res: "rusage[vcs=2]"}
    """)
    assert s.demand["resources"] == [token_entry("vcs", 2, 0, [1])], (
        "the runtime headroom 3 overrides max_borrow: room for job 1's 2 tokens only"
    )
    assert s.demand["hosts"] == []
    assert s.reasons == {
        1: "Short 2 of vcs; waiting for provisioning (headroom 3)",
        2: "Short 2 of vcs: not enough headroom to borrow (1 left)",
    }


def test_tokens_in_flight_are_used_before_headroom(session):
    s = session(TOKENS + """
    supply:
      tokens_in_flight: {vcs: 2}
    jobs:
      - {ids: "1-3", res: "rusage[vcs=1]"}
    """)
    assert s.demand["resources"] == [token_entry("vcs", 1, 2, [1, 2, 3])], (
        "jobs 1-2 use the 2 tokens in flight; job 3 borrows 1 beyond them"
    )
    assert s.reasons == {
        1: "Short 1 of vcs; waiting for provisioning (2 in flight)",
        2: "Short 1 of vcs; waiting for provisioning (2 in flight)",
        3: "Short 1 of vcs; waiting for provisioning (headroom 8)",
    }, "headroom = max_borrow 10 - borrowed 0 - in flight 2"
    assert "surplus" not in s.demand


def test_job_needing_hosts_and_tokens_gets_both_or_neither(session):
    s = session("""
        now: 1000
        cluster:
          resources: {vcs: {type: numeric, consumable: true, shared: true}}
          shared:
            vcs: {total: 0}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
            countables:
              - {resource: vcs, max_borrow: 10}
        supply:
          headroom: {vcs: 2}
        jobs:
          - {ids: "1-3", n: 4, res: "span[hosts=1] rusage[vcs=1]"}
    """)
    assert s.demand == {
        "hosts": [host_entry("t", 2, 0, [1, 2])],
        "resources": [token_entry("vcs", 2, 0, [1, 2])],
    }, "job 3 fits a third host but no token is left: it asks for neither"
    both = waiting("t", "2 new hosts requested this session") + "; short 1 of vcs (headroom 2)"
    assert s.reasons == {
        1: both,
        2: both,
        3: "Short 1 of vcs: not enough headroom to borrow (0 left)",
    }


def test_pool_of_a_several_pool_resource_is_reported_as_resource_slash_pool(session):
    s = session("""
        now: 1000
        cluster:
          resources: {hspice: {type: numeric, consumable: true, shared: true}}
          shared:
            hspice:
              - {pool: site, total: 0, hosts: [all]}
              - {pool: cloud, total: 0, hosts: ["template:t*"]}
          catalog:
            templates:
              - {name: t1, provider: aws, slots: 4, max: 10}
            countables:
              - {resource: hspice, pool: cloud, max_borrow: 4}
        jobs:
          - {ids: "1-2", n: 4, res: "span[hosts=1] rusage[hspice=1]"}
    """)
    assert s.demand == {
        "hosts": [host_entry("t1", 2, 0, [1, 2])],
        "resources": [token_entry("hspice/cloud", 2, 0, [1, 2])],
    }, "tokens come from the pool reaching the template (cloud), named hspice/cloud"


def test_tokens_are_borrowed_for_the_host_their_pool_reaches(session):
    s = session("""
        now: 1000
        cluster:
          resources: {vcs: {type: numeric, consumable: true, shared: true}}
          hosts:
            - {name: h01, slots: 4}
            - {name: h02, slots: 4}
          shared:
            vcs:
              - {pool: site, total: 1, hosts: [h02]}
              - {pool: cloud, total: 2, hosts: ["template:aws.*"]}
          catalog:
            countables:
              - {resource: vcs, pool: site, max_borrow: 1}
        jobs:
          - {id: 1, res: "rusage[vcs=2]"}
    """)
    assert s.demand == {"hosts": [], "resources": [token_entry("vcs/site", 1, 0, [1])]}, (
        "the job would go to h01 first, which no pool able to lend reaches; pool site "
        "reaches h02 and can lend the missing token"
    )
    assert s.reasons == {1: "Short 1 of vcs/site; waiting for provisioning (headroom 1)"}


# --------------------------------------------------------------------------- no demand


def test_queue_that_may_not_burst_keeps_its_real_reason_and_asks_for_nothing(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 2}
          queues:
            - {name: short, priority: 50, hosts: [h]}
            - {name: normal, priority: 30}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        jobs:
          - {id: 1, queue: normal, n: 2, state: RUN, hosts: {h: 2}, start: 0}
          - {id: 2, queue: short, n: 2, submit: 10}
          - {id: 3, queue: normal, n: 2, submit: 20}
    """)
    assert s.reasons[2] == "Not enough job slots: 2 needed, 0 free on eligible hosts", (
        "queue short lists no template: entry: it never bursts, the real reason stays"
    )
    assert s.demand["hosts"] == [host_entry("t", 1, 0, [3])], (
        "only the job of queue normal (no host list) asks for a host"
    )


def test_select_that_no_template_satisfies(session):
    s = session("""
        now: 1000
        cluster:
          resources: {mem: {type: numeric, consumable: true}}
          hosts:
            - {name: h, slots: 8, resources: {mem: 640000}}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10, resources: {mem: 30000}}
        jobs:
          - {id: 9, n: 8, state: RUN, hosts: {h: 8}, start: 0}
          - {id: 1, res: "select[mem>500000]"}
    """)
    assert s.reasons == {1: "No template can host this job: select[mem>500000]"}
    assert s.demand == {"hosts": [], "resources": []}


def test_catalog_pass_evaluates_at_most_max_jobs_per_session(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            max_jobs_per_session: 6
            templates:
              - {name: t, provider: aws, slots: 3, max: 10}
        jobs:
          - {ids: "1-8", n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("t", 2, 0, [1, 2, 3, 4, 5, 6])], (
        "only the first 6 jobs in scheduling order are tried on the catalog: 2 hosts"
    )
    assert s.reasons[7] == s.reasons[8] == "No host is available to queue normal", (
        "jobs past the cap keep their real-pass reason"
    )


# --------------------------------------------------------------------------- surplus


def test_in_flight_hosts_no_pending_job_needs_are_surplus(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
              - {name: u, provider: aws, slots: 4, max: 10}
        supply:
          in_flight: {t: 3, u: 2}
        jobs:
          - {ids: "1-4", n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("t", 0, 1, [1, 2, 3, 4])], (
        "t and u share rank 0, t goes first by name: four 1-slot jobs fill one of its "
        "in-flight hosts"
    )
    assert s.demand["surplus"] == {
        "hosts": [{"template": "t", "count": 2}, {"template": "u", "count": 2}],
        "resources": [],
    }, "the 2 other in-flight hosts of t and both of u are not needed"
    assert s.reasons == {job: waiting("t", "3 hosts in flight") for job in range(1, 5)}


def test_in_flight_tokens_no_pending_job_needs_are_surplus(session):
    s = session(TOKENS + """
    supply:
      tokens_in_flight: {vcs: 5}
    jobs:
      - {id: 1, res: "rusage[vcs=1]"}
    """)
    assert s.demand["resources"] == [token_entry("vcs", 0, 1, [1])], (
        "job 1 uses 1 token in flight and borrows nothing more"
    )
    assert s.demand["surplus"] == {"hosts": [], "resources": [{"resource": "vcs", "amount": 4}]}


def test_a_session_without_pend_reasons_and_no_job_to_try_finds_the_same_surplus() -> None:
    """A session without pend reasons (the simulator's) whose real pass settles no
    job on resources makes no catalog pass (sched/demand.py `unused_supply`): every
    host and token in flight is surplus, in the catalog's order, as a full session
    finds."""
    # TOKENS with two tokens in the pool, and template u ranked before t
    u_first = "max: 10, rank: 2}\n          - {name: u, provider: aws, slots: 4, max: 10, rank: 1}"
    two_templates = TOKENS.replace("total: 0", "total: 2").replace("max: 10}", u_first)
    text = textwrap.dedent(two_templates + """
    supply:
      in_flight: {t: 3, u: 1}
      tokens_in_flight: {vcs: 5}
    jobs:
      - {id: 1, n: 2, res: "rusage[vcs=2]"}
      - {id: 2, n: 1, hold: true}
    """)
    scenario = load_scenario_text(text, "surplus.yaml")
    full = run_session(scenario.state(), scenario.now)
    lean = run_session(scenario.state(), scenario.now, reasons=False)
    assert [d.job for d in lean.dispatch] == [d.job for d in full.dispatch] == [1]
    assert lean.demand == full.demand
    assert msgspec.to_builtins(lean.demand.surplus_hosts) == [
        {"template": "u", "count": 1}, {"template": "t", "count": 3},
    ], "u ranks first"
    assert msgspec.to_builtins(lean.demand.surplus_tokens) == [
        {"resource": "vcs", "amount": 5.0}
    ]
    assert lean.demand.hosts == lean.demand.resources == []


# --------------------------------------------------------------------------- idle hosts


def test_provisioned_host_idle_at_least_idle_time_is_listed(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            idle_time: 600
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        hosts:
          - {name: c1, template: t, joined: 50, idle_since: 100}
          - {name: c2, template: t, joined: 50, idle_since: 500}
          - {name: c3, template: t, joined: 400}
    """)
    assert sorted(s.idle["hosts"], key=lambda h: h["host"]) == [
        {"host": "c1", "template": "t", "idle_for": 900},
        {"host": "c3", "template": "t", "idle_for": 600},
    ], (
        "c1 idle 900 s >= 600; c2 idle only 500 s; c3 never ran anything: idle since it "
        "joined, exactly 600 s"
    )


def test_template_idle_time_overrides_catalog_idle_time(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            idle_time: 600
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
              - {name: quick, provider: aws, slots: 4, max: 10, idle_time: 100}
              - {name: slow, provider: aws, slots: 4, max: 10, idle_time: 1000}
        hosts:
          - {name: c1, template: t, joined: 0, idle_since: 800}
          - {name: q1, template: quick, joined: 0, idle_since: 800}
          - {name: s1, template: slow, joined: 0, idle_since: 100}
    """)
    assert s.idle["hosts"] == [{"host": "q1", "template": "quick", "idle_for": 200}], (
        "200 s is enough for quick (100) but not for t (catalog 600); 900 s is not "
        "enough for slow (1000)"
    )


def test_host_given_work_this_session_is_not_idle(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            idle_time: 600
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        hosts:
          - {name: c1, template: t, joined: 0, idle_since: 0}
        jobs:
          - {id: 1, n: 1}
    """)
    assert s.dispatched == {1: {"c1": 1}}
    assert s.idle["hosts"] == [], "c1 was idle 1000 s but gets job 1 this session"


def test_running_closed_and_static_hosts_are_never_idle(session):
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h, slots: 4}
          catalog:
            idle_time: 600
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
        hosts:
          - {name: c1, template: t, state: closed, joined: 0}
          - {name: c2, template: t, joined: 0}
          - {name: c3, template: t, joined: 0}
        jobs:
          - {id: 1, state: RUN, hosts: {c2: 1}, start: 0}
    """)
    assert s.idle["hosts"] == [{"host": "c3", "template": "t", "idle_for": 1000}], (
        "static h is not provisioned, c1 is not ok, c2 runs a job; only c3 is idle"
    )


# --------------------------------------------------------------------------- idle tokens


IDLE_TOKENS = """
    now: 1000
    cluster:
      resources: {vcs: {type: numeric, consumable: true, shared: true}}
      hosts:
        - {name: h, slots: 8}
      shared:
        vcs: {total: 2}
      catalog:
        countables:
          - {resource: vcs, max_borrow: 10, idle_time: 300}
    supply:
      borrowed: {vcs: 5}
    jobs:
      - {id: 1, res: "rusage[vcs=3]", state: RUN, hosts: {h: 1}, start: 100}
"""


def test_only_the_unused_part_of_borrowed_tokens_is_idle(session):
    s = session(IDLE_TOKENS)
    assert s.idle["resources"] == [{"resource": "vcs", "amount": 4}], (
        "total 2 + 5 borrowed = 7, 3 used since long ago: 4 tokens, all borrowed ones, "
        "stayed unallocated for the whole idle time"
    )


def test_borrowed_tokens_used_within_idle_time_are_not_idle(session):
    s = session(
        IDLE_TOKENS + """
      - {id: 2, res: "rusage[vcs=2]", state: RUN, hosts: {h: 1}, start: 800}
    """,
        [JobFinished(job=2, time=900)],
    )
    assert s.idle["resources"] == [{"resource": "vcs", "amount": 2}], (
        "4 tokens are free now, but from 800 to 900 (within 300 s of now) job 2 held 2 "
        "of them: only 7 - 5 = 2 stayed unallocated for the whole idle time"
    )


def test_borrowed_tokens_needed_by_this_sessions_demand_are_not_idle(session):
    s = session("""
        now: 1000
        cluster:
          resources: {vcs: {type: numeric, consumable: true, shared: true}}
          shared:
            vcs: {total: 0}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 10}
            countables:
              - {resource: vcs, max_borrow: 10, idle_time: 300}
        supply:
          borrowed: {vcs: 3}
        jobs:
          - {id: 1, n: 4, res: "span[hosts=1] rusage[vcs=2]"}
    """)
    assert s.demand == {"hosts": [host_entry("t", 1, 0, [1])], "resources": []}, (
        "job 1 waits for a new host; its 2 tokens are among the 3 free borrowed ones"
    )
    assert s.idle["resources"] == [{"resource": "vcs", "amount": 1}], (
        "2 of the 3 idle borrowed tokens are needed by this session's demand"
    )


def test_borrowed_tokens_given_to_jobs_this_session_are_not_idle(session):
    s = session("""
        now: 1000
        cluster:
          resources: {vcs: {type: numeric, consumable: true, shared: true}}
          hosts:
            - {name: h, slots: 8}
          shared:
            vcs: {total: 0}
          catalog:
            countables:
              - {resource: vcs, max_borrow: 10, idle_time: 300}
        supply:
          borrowed: {vcs: 5}
        jobs:
          - {id: 1, res: "rusage[vcs=2]"}
    """)
    assert s.dispatched == {1: {"h": 1}}
    assert s.idle["resources"] == [{"resource": "vcs", "amount": 3}], (
        "job 1 takes 2 of the 5 borrowed tokens this session: 3 stay idle"
    )


def test_a_limit_reached_by_virtual_placements_is_in_the_trace(session):
    """Jobs placed on virtual supply count toward limits; a twin job that then meets
    the user's limit pends for the limit, and its decision trace says so."""
    s = session("""
        now: 1000
        cluster:
          hosts:
            - {name: h01, slots: 1}
          limits:
            - {name: one-job, users: each, jobs: 1}
          catalog:
            templates:
              - {name: t, provider: aws, slots: 4, max: 5}
        hosts:
          - {name: h01, state: closed}
        jobs:
          - {ids: "1-3", user: alice, n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("t", 1, 0, [1])]
    limit = "The user has reached the limit one-job (1 jobs)"
    assert s.reason(2) == limit and s.reason(3) == limit
    assert any(e.check == "limit" and e.detail == limit for e in s.trace(3)), s.trace(3)
