"""Admission: jobs no host or template could ever hold are refused at submission."""

from __future__ import annotations

import pytest

from xce.config import load_config_text
from xce.sched import SchedulerState
from xce.sched.admission import oversize

CLUSTER = """
resources:
  mem: {type: numeric, consumable: true}
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: a, slots: 4, resources: {mem: 8000}}
  - {name: b, slots: 2, resources: {mem: 16000}}
shared:
  vcs: {total: 1}
queues:
  - {name: normal, priority: 1}
catalog:
  templates:
    - {name: big, provider: p, slots: 16, resources: {mem: 64000}, max: 2}
    - {name: none, provider: p, slots: 64, resources: {mem: 999999}, max: 0}
"""


@pytest.mark.parametrize(
    ("n", "res", "why"),
    [
        (1, "", None),
        (32, "", None),  # wholly on static hosts (6 slots) or on one template (2 x 16)
        (33, "",
         "job requests 33 slots; the most this cluster offers is 32 (template big (max 2))"),
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
        (1, "rusage[vcs=5]", None),  # shared pools are not host consumables
    ],
)
def test_oversize(n: int, res: str, why: str | None) -> None:
    config = load_config_text(CLUSTER)
    assert oversize(config, SchedulerState(config).live_hosts(), n, res) == why
