"""Admission: jobs no configured host nor template could ever run are refused at
submission, with what is missing (sched/admission.py, sched/ever.py)."""

from __future__ import annotations

import pytest

from xce.config import load_config_text
from xce.model.events import HostRemoved, SharedTotalChanged, SupplyChanged
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState
from xce.sched.admission import refusal

CLUSTER = """
resources:
  mem: {type: numeric, consumable: true}
  vcs: {type: numeric, consumable: true, shared: true}
  ssd: {type: boolean}
hosts:
  - {name: a, slots: 4, resources: {mem: 8000}}
  - {name: b, slots: 2, resources: {mem: 16000}, gpus: 1}
shared:
  vcs: {total: 1}
queues:
  - {name: normal, priority: 1}
  - {name: short, priority: 2, hosts: [a, b]}
catalog:
  templates:
    - {name: big, provider: p, slots: 16, resources: {mem: 64000}, max: 2, gpus: 4}
    - {name: none, provider: p, slots: 64, resources: {mem: 999999}, max: 0}
  countables:
    - {resource: vcs, max_borrow: 4}
"""


def _why(n: int, res: str, queue: str = "", gpus: int = 0, text: str = CLUSTER) -> str | None:
    state = SchedulerState(load_config_text(text))
    spec = state.resolve(JobSpec(id=1, n=n, res=res, queue=queue, gpus=gpus))
    return refusal(state, spec)


@pytest.mark.parametrize(
    ("n", "res", "why"),
    [
        (1, "", None),
        (32, "", None),  # wholly on static hosts (6 slots) or on one template (2 x 16)
        # slots alone: the static hosts with all the hosts template big may have
        # (sched/holds_wide.py plans such a job): 6 + 2 x 16
        (33, "", None),
        (38, "", None),
        (39, "",
         "job requests 39 slots; the most this cluster offers is 38 (the static hosts "
         "with template big (max 2))"),
        (33, "rusage[mem=1000]",  # not slots alone: wholly on the static hosts or one template
         "job requests 33 slots with mem=1000 per slot; the most this cluster offers is 32 "
         "(template big (max 2)); static hosts and a template's hosts run a job together "
         "only when it asks for slots alone (no span[], per-slot consumable, GPU, shared "
         "resource, order[] or -x)"),
        (33, "span[ptile=1]",
         "job requests 33 hosts of 1 slots (span[ptile=1]); the most this cluster offers "
         "is 2 such hosts (template big (max 2))"),
        (16, "span[hosts=1]", None),
        (17, "span[hosts=1]",
         "job requests 17 slots on one host; the most this cluster offers is 16 "
         "(a host of template big)"),
        (1, "rusage[mem=64000]", None),
        (1, "rusage[mem=64001]",
         "no host or template can hold 1 slot(s) of this job with mem=64001"),
        (4, "span[hosts=1] rusage[mem=16000]", None),  # on a host of template big
        (4, "span[ptile=2] rusage[mem=8000]", None),  # 2 slots x 8000 on host b
        (4, "span[ptile=4] rusage[mem=16001]",
         "no host or template can hold 4 slot(s) of this job with mem=64004"),
        (1, "rusage[vcs=5]", None),  # 1 + 4 borrowable
        (48, "span[ptile=16]",
         "job requests 3 hosts of 16 slots (span[ptile=16]); the most this cluster "
         "offers is 2 such hosts (template big (max 2))"),
        (40, "span[ptile=20]",
         "job requests 40 slots, 20 per host (span[ptile=20]); the most this cluster "
         "offers is 16 (a host of template big)"),
    ],
)
def test_slots_and_consumables(n: int, res: str, why: str | None) -> None:
    assert _why(n, res) == why


def test_select_no_host_nor_template_names_the_largest_values() -> None:
    assert _why(1, "select[mem>20000]") is None  # template big has 64000
    assert _why(1, "select[mem>64000]") == (
        "No host or template satisfies select[mem>64000] "
        "(largest mem: 16000 on b, 64000 on template big)"
    )
    assert _why(1, "select[type==ARM]") == (
        "No host or template satisfies select[type==ARM] (type: X86_64)"
    )
    assert _why(1, "select[ssd]") == (
        "No host or template satisfies select[ssd] (ssd: on no host or template)"
    )


def test_select_and_rusage_together_and_the_queue_host_list() -> None:
    # big satisfies the select but only static hosts serve queue short
    assert _why(1, "select[mem>20000]", queue="short") == (
        "No host or template of queue short satisfies select[mem>20000] "
        "(largest mem: 16000 on b)"
    )
    assert _why(7, "", queue="short") == (
        "job requests 7 slots; the most this cluster offers to queue short is 6 (all hosts)"
    )
    assert _why(4, "span[hosts=1]", queue="short") is None
    assert _why(5, "span[hosts=1]", queue="short") == (
        "job requests 5 slots on one host; the most this cluster offers to queue short "
        "is 4 (host a)"
    )
    # select matches a, b and big; but only a holds 4 slots of 2000 and only b has a GPU
    assert _why(4, "select[mem<=16000] span[hosts=1]", gpus=1) == (
        "job requests 4 slots on one host; the most this cluster offers under "
        "select[mem<=16000] with 1 GPU per host is 2 (host b)"
    )


def test_gpus() -> None:
    assert _why(1, "", gpus=4) is None  # template big
    assert _why(1, "", gpus=5) == (
        "job requests 5 GPUs per host; the most any host or template has is 4"
    )
    assert _why(1, "", queue="short", gpus=2) == (
        "job requests 2 GPUs per host; the most any host or template to queue short has is 1"
    )


def test_shared_beyond_total_plus_borrow() -> None:
    assert _why(1, "rusage[vcs=5]") is None
    assert _why(1, "rusage[vcs=6]") == (
        "job requests 6 vcs (shared); the most vcs can ever have is 5 "
        "(total 1 + 4 borrowable)"
    )


def test_shared_pool_that_reaches_no_host_the_job_could_use() -> None:
    text = CLUSTER.replace(
        "  vcs: {total: 1}",
        "  vcs:\n    - {pool: site, total: 1, hosts: [a]}\n    - {pool: cloud, total: 9,"
        " hosts: [\"template:none\"]}",
    ).replace(
        "    - {resource: vcs, max_borrow: 4}", "    - {resource: vcs, pool: site, max_borrow: 4}"
    )
    assert _why(1, "rusage[vcs=5]") is None
    assert _why(1, "rusage[vcs=5]", text=text) is None  # site: 1 + 4, reaches a
    assert _why(1, "rusage[vcs=6]", text=text) == (
        "no pool of vcs that can hold 6 reaches a host or template the job could run on"
    )


def test_runtime_changes_count_but_a_host_down_or_gone_does_not() -> None:
    state = SchedulerState(load_config_text(CLUSTER))
    wide = state.resolve(JobSpec(id=1, n=4, res="span[hosts=1]", queue="short"))
    state.apply(HostRemoved(name="a", time=1))  # a static host: still configured
    assert refusal(state, wide) is None
    gpu = state.resolve(JobSpec(id=2, n=1, gpus=4))
    state.apply(SupplyChanged(allowance={"big": 0}, time=2))
    assert refusal(state, gpu) == (
        "job requests 4 GPUs per host; the most any host or template has is 1"
    )
    state.apply(SupplyChanged(allowance={"big": -1}, time=3))  # lifted
    assert refusal(state, gpu) is None
    tokens = state.resolve(JobSpec(id=3, n=1, res="rusage[vcs=5]"))
    state.apply(SharedTotalChanged(resource="vcs", total=0))
    assert refusal(state, tokens) is not None
    state.apply(SharedTotalChanged(resource="vcs", total=1))
    assert refusal(state, tokens) is None
