"""Scenario specifications of where new hosts come from: the catalog's `choose` rule
(docs/scheduling.md, "Choosing the template for new hosts").

One small catalog of three templates, each scenario worked out by hand:

    small: 4 slots, 16000 mem, 1.0 an hour, rank 1
    big:  16 slots, 32000 mem, 2.0 an hour, rank 2
    fat:   8 slots, 64000 mem, 2.0 an hour, rank 3

and three jobs in scheduling order: job 1 `-n 1 rusage[mem=1000]`, job 2
`-n 8 span[hosts=1]`, job 3 `-n 20` (no span: it spreads).

Price shares (the largest fraction of each host a job takes, summed over the hosts
it would take of an empty template, times the price):

    job 1: small max(1/4, 1000/16000) x 1 = 0.25; big max(1/16, 1000/32000) x 2 = 0.125;
           fat max(1/8, 1000/64000) x 2 = 0.25
    job 2: small cannot hold 8 slots on one host; big 8/16 x 2 = 1.0; fat 8/8 x 2 = 2.0
    job 3: small 4+4+4+4+4: 5 x 1 x 1 = 5.0; big 16+4: (1 + 1/4) x 2 = 2.5;
           fat 8+8+4: (1 + 1 + 1/2) x 2 = 5.0

Unused fractions (the mean over slots and mem of what the job leaves unused on the
hosts it would open):

    job 1: small (3/4 + 15/16)/2 = 0.844; big (15/16 + 31/32)/2 = 0.953;
           fat (7/8 + 63/64)/2 = 0.930
    job 2: big (8/16 + 1)/2 = 0.75; fat (0 + 1)/2 = 0.5
    job 3: small (0 + 1)/2 = 0.5; big (12/32 + 1)/2 = 0.6875; fat (4/24 + 1)/2 = 0.583
"""

from __future__ import annotations

import re

import pytest
from test_scenarios_demand import host_entry, waiting

from xce.model.cluster import HostTemplate
from xce.sched.choice import JobTake, choice_order, price_share, unused_fraction

CATALOG = """
now: 1000
cluster:
  resources:
    mem: {{type: numeric, consumable: true}}
  catalog:
    choose: {choose}
    templates:
      - {{name: small, provider: aws, slots: 4, resources: {{mem: 16000}}, max: 10, rank: 1,
         price: 1.0}}
      - {{name: big, provider: aws, slots: 16, resources: {{mem: 32000}}, max: 10, rank: 2,
         price: 2.0}}
      - {{name: fat, provider: aws, slots: 8, resources: {{mem: 64000}}, max: 10, rank: 3,
         price: 2.0}}
{supply}jobs:
  - {{id: 1, n: 1, res: "rusage[mem=1000]", submit: 0}}
  - {{id: 2, n: 8, res: "span[hosts=1]", submit: 10}}
  - {{id: 3, n: 20, submit: 20}}
"""


def scenario(choose: str, supply: str = "") -> str:
    return CATALOG.format(choose=choose, supply=supply)


# --------------------------------------------------------------------------- the rules


def test_rank_takes_the_first_template_by_rank_that_holds_the_job(session):
    s = session(scenario("rank"))
    assert s.demand["hosts"] == [host_entry("small", 6, 0, [1, 3]), host_entry("big", 1, 0, [2])], (
        "job 1 on a new small host; job 2 does not fit small (8 slots on one host): a new "
        "big one; job 3 takes the 3 slots left on small and 5 new small hosts (17 slots)"
    )


def test_cost_takes_the_template_where_the_jobs_price_share_is_least(session):
    s = session(scenario("cost"))
    assert s.demand["hosts"] == [host_entry("big", 2, 0, [1, 2, 3])], (
        "job 1: big (share 0.125); job 2 fits the 15 free slots of that big host, at no "
        "added cost; job 3 (big 2.5 < small 5.0 = fat 5.0) takes its 7 free slots and "
        "13 on one new big host: 2 hosts, 4.0 an hour against rank's 8.0"
    )
    assert s.reasons == {job: waiting("big", "2 new hosts requested this session")
                         for job in (1, 2, 3)}


def test_least_waste_takes_the_template_that_leaves_the_least_unused_fraction(session):
    s = session(scenario("least-waste"))
    assert s.demand["hosts"] == [host_entry("small", 6, 0, [1, 3]), host_entry("fat", 1, 0, [2])], (
        "job 1: small (0.844); job 2: fat (0.5: all 8 slots used) before big (0.75); "
        "job 3: small (0.5) takes the 3 free slots there and 5 new small hosts"
    )


def test_without_prices_cost_chooses_as_rank_does(session):
    unpriced = re.sub(r",\s*price: [0-9.]+", "", scenario("cost"))
    assert "price" not in unpriced
    assert session(unpriced).demand == session(scenario("rank")).demand, (
        "every share is 0: ties everywhere, broken by rank"
    )


# --------------------------------------------------------------------------- ties


def test_cost_ties_go_by_rank_then_name(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            choose: cost
            templates:
              - {name: b2, provider: aws, slots: 8, max: 10, rank: 5, price: 2.0}
              - {name: b1, provider: aws, slots: 4, max: 10, rank: 5, price: 1.0}
              - {name: a0, provider: aws, slots: 2, max: 10, rank: 7, price: 0.5}
              - {name: z0, provider: aws, slots: 16, max: 10, rank: 1, price: 4.0}
        jobs:
          - {id: 1, n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("z0", 1, 0, [1])], (
        "every template's share is 0.25 (1/16 x 4, 1/8 x 2, 1/4 x 1, 1/2 x 0.5): the best "
        "rank, z0, wins"
    )
    s = session("""
        now: 1000
        cluster:
          catalog:
            choose: cost
            templates:
              - {name: b2, provider: aws, slots: 8, max: 10, rank: 5, price: 2.0}
              - {name: b1, provider: aws, slots: 4, max: 10, rank: 5, price: 1.0}
              - {name: a0, provider: aws, slots: 2, max: 10, rank: 7, price: 0.5}
        jobs:
          - {id: 1, n: 1}
    """)
    assert s.demand["hosts"] == [host_entry("b1", 1, 0, [1])], (
        "b1 and b2 tie on share and rank (5): b1 first by name; a0 ties on share only"
    )


def test_least_waste_ties_go_by_rank_then_name(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            choose: least-waste
            templates:
              - {name: y, provider: aws, slots: 8, max: 10, rank: 2}
              - {name: x, provider: aws, slots: 8, max: 10, rank: 2}
              - {name: w, provider: aws, slots: 8, max: 10, rank: 3}
              - {name: big, provider: aws, slots: 16, max: 10, rank: 1}
        jobs:
          - {id: 1, n: 8, res: "span[hosts=1]"}
    """)
    assert s.demand["hosts"] == [host_entry("x", 1, 0, [1])], (
        "x, y and w leave nothing unused (big leaves half): rank 2 before 3, x before y"
    )


# --------------------------------------------------------------------------- free first


def test_in_flight_hosts_of_a_dearer_template_are_used_before_a_new_cheap_host(session):
    s = session(scenario("cost", "supply:\n  in_flight: {fat: 1}\n"))
    assert s.demand["hosts"] == [host_entry("big", 2, 0, [2, 3]), host_entry("fat", 0, 1, [1])], (
        "job 1 goes to the in-flight fat host, which costs nothing more, not to a new big "
        "host (its least share); job 2 (8 slots on one host) does not fit the 7 left there: "
        "a new big host (share 1.0 < 2.0); job 3 (wholly on one template) takes the 8 slots "
        "left on that big host and 12 on a second one"
    )
    assert s.reasons == {
        1: waiting("fat", "1 host in flight"),
        2: waiting("big", "2 new hosts requested this session"),
        3: waiting("big", "2 new hosts requested this session"),
    }


def test_hosts_opened_this_session_are_used_before_new_ones_whatever_their_share(session):
    s = session("""
        now: 1000
        cluster:
          catalog:
            choose: cost
            templates:
              - {name: cheap, provider: aws, slots: 4, max: 10, rank: 2, price: 0.5}
              - {name: wide, provider: aws, slots: 16, max: 10, rank: 1, price: 8.0}
        jobs:
          - {id: 1, n: 12, res: "span[hosts=1]", submit: 0}
          - {id: 2, n: 4, submit: 10}
          - {id: 3, n: 4, submit: 20}
    """)
    assert s.demand["hosts"] == [
        host_entry("wide", 1, 0, [1, 2]), host_entry("cheap", 1, 0, [3])
    ], (
        "job 1 fits only wide; job 2's least share is on cheap (4/4 x 0.5 = 0.5 against "
        "4/16 x 8 = 2.0), but the 4 slots left on job 1's wide host cost nothing more; "
        "job 3 finds no free slot and gets a new cheap host"
    )


def test_a_second_session_finds_the_demand_in_flight_and_asks_for_nothing_more(session):
    first = session(scenario("cost"))
    assert first.demand["hosts"] == [host_entry("big", 2, 0, [1, 2, 3])]
    again = session(scenario("cost", "supply:\n  in_flight: {big: 2}\n"))
    assert again.demand["hosts"] == [host_entry("big", 0, 2, [1, 2, 3])], (
        "the same jobs on the same hosts, now in flight: nothing new is requested"
    )
    assert "surplus" not in again.demand


# --------------------------------------------------------------------------- backed off


@pytest.mark.parametrize("choose", ["cost", "least-waste"])
def test_a_backed_off_template_is_skipped(session, choose):
    backed_off = scenario(choose, "supply:\n  allowance: {big: 0, small: 0}\n")
    s = session(backed_off)
    assert s.demand["hosts"] == [host_entry("fat", 4, 0, [1, 2, 3])], (
        "big and small allow no new host (the provisioner's allowance 0 while the policy "
        "backs them off): every job goes to fat, the next in the rule's order; job 2 (8 "
        "slots on one host) does not fit the 7 left on job 1's host: a second one; job 3 "
        "takes those 7 slots and 13 on 2 new hosts"
    )
    assert s.reasons[1] == waiting("fat", "4 new hosts requested this session")


# --------------------------------------------------------------------------- the rule itself

SMALL = HostTemplate("small", "aws", 4, resources={"mem": 16000.0}, rank=1, price=1.0)
BIG = HostTemplate("big", "aws", 16, resources={"mem": 32000.0}, rank=2, price=2.0)
FAT = HostTemplate("fat", "aws", 8, resources={"mem": 64000.0}, rank=3, price=2.0)
GPU = HostTemplate("gpu", "aws", 32, resources={"mem": 244000.0}, rank=4, price=13.0, gpus=4)


def test_price_share_of_single_and_multi_host_jobs() -> None:
    one = JobTake(1, (("mem", 1000.0),), (1,))
    assert [price_share(t, one, 0) for t in (SMALL, BIG, FAT)] == [0.25, 0.125, 0.25]
    spread = JobTake(20)
    assert [price_share(t, spread, t.slots) for t in (SMALL, BIG, FAT)] == [5.0, 2.5, 5.0], (
        "a job without span: as many slots as an empty host holds per host, the rest on "
        "the last: small 5 full hosts, big 1 + 4/16, fat 1 + 1 + 4/8"
    )
    tiles = JobTake(10, (("mem", 2000.0),), (4, 4, 2))
    assert price_share(BIG, tiles, 16) == (4 / 16 + 4 / 16 + 2 / 16) * 2.0, (
        "span[ptile=4]: one host per tile, the remainder on its own"
    )
    gpus = JobTake(2, (("mem", 1000.0),), (2,), gpus=1)
    assert price_share(GPU, gpus, 32) == 1 / 4 * 13.0, "GPUs: the job's per host over the host's"
    assert price_share(SMALL, gpus, 4) == float("inf"), "a host without GPUs cannot hold it"


def test_unused_fraction_is_the_mean_over_slots_consumables_and_gpus() -> None:
    job = JobTake(8, (), (8,))
    assert unused_fraction(BIG, job, 16, ["mem"]) == (8 / 16 + 1) / 2
    assert unused_fraction(FAT, job, 8, ["mem"]) == (0 + 1) / 2
    assert unused_fraction(GPU, JobTake(8, (), (8,)), 32, ["mem"]) == (24 / 32 + 1 + 1) / 3, (
        "a GPU host's unused GPUs count: a job without GPUs leaves them all"
    )
    assert unused_fraction(BIG, JobTake(20), 16, ["mem"]) == (12 / 32 + 1) / 2, "over 2 hosts"


def test_choice_order_sorts_by_score_then_keeps_rank_order() -> None:
    spread = JobTake(20)
    ranked = [(SMALL, 4), (BIG, 16), (FAT, 8)]
    assert choice_order("rank", ranked, spread) == [0, 1, 2]
    assert choice_order("cost", ranked, spread) == [1, 0, 2], "big 2.5, then small and fat 5.0"
    assert choice_order("least-waste", ranked, spread, ["mem"]) == [0, 2, 1]
