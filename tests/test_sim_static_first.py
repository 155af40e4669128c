"""Static hosts first in the simulator (`catalog.static_first`; docs/scheduling.md
"Static hosts first"): provisioned hosts whose work is done go idle and are given back
while static hosts take the next work, instead of being kept busy by it.

Two static one-slot hosts and a template `cloud` of one-slot hosts (lead time 60 s,
idle time 600 s). Jobs 1-4 (1000 s) arrive at 0: two run on n01 and n02, two on
cloud-1 and cloud-2, which join at 60 and are idle from 1060. Jobs 5 and 6 (1000 s)
arrive at 1200, when all four hosts are free.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from xce.config import load_config_text
from xce.model.events import HostRemoved, JobStarted
from xce.model.recording import Recorder, read_recording
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

CLUSTER = """
    cluster: mixed
    session_interval: 10
    hosts: [{name: n01, slots: 1}, {name: n02, slots: 1}]
    queues: [{name: normal, priority: 30}]
    catalog:
      idle_time: 600
      static_first: FLAG
      templates: [{name: cloud, provider: sim, slots: 1, max: 4}]
    policy: {persistence: 0}
    simulation:
      providers: {sim: {lead_time: 60}}
"""

JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 1000, n: 1}
      - {id: 2, submit: 0, run: 1000, n: 1}
      - {id: 3, submit: 0, run: 1000, n: 1}
      - {id: 4, submit: 0, run: 1000, n: 1}
      - {id: 5, submit: 1200, run: 1000, n: 1}
      - {id: 6, submit: 1200, run: 1000, n: 1}
"""


def _run(tmp_path: Path, flag: str) -> tuple[dict[str, object], dict[int, dict[str, int]],
                                              list[tuple[float, str]]]:
    """The summary, where each job started, and when each host was given back."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent(JOBS))
    config = load_config_text(textwrap.dedent(CLUSTER.replace("FLAG", flag)), "cluster.yaml")
    recorder = Recorder(tmp_path / f"run-{flag}.jsonl")
    sim = Simulator(config, load_workload(jobs), recorder=recorder)
    sim.run()
    recorder.close()
    started: dict[int, dict[str, int]] = {}
    removed: list[tuple[float, str]] = []
    for _line, time, item in read_recording(tmp_path / f"run-{flag}.jsonl"):
        if isinstance(item, JobStarted):
            started[item.job] = dict(item.hosts)
        elif isinstance(item, HostRemoved):
            removed.append((time, item.name))
    return sim.summary(), started, removed


def test_static_hosts_take_the_next_work_and_the_burst_hosts_go_back(tmp_path: Path) -> None:
    summary, started, removed = _run(tmp_path, "true")
    assert started[5] == {"n01": 1} and started[6] == {"n02": 1}
    # Idle from 1060: at 1660 (idle 600 s) drained and, empty, given back in that round.
    assert removed == [(1660.0, "cloud-1"), (1660.0, "cloud-2")]
    assert summary["host_hours"] == {"cloud": pytest.approx(2 * 1600 / 3600, abs=1e-3)}
    assert summary["hosts_never_used"] == 0


def test_by_name_the_burst_hosts_are_kept_busy(tmp_path: Path) -> None:
    summary, started, removed = _run(tmp_path, "false")
    assert started[5] == {"cloud-1": 1} and started[6] == {"cloud-2": 1}
    # Idle from 2200 (jobs 5 and 6 end): drained and given back at 2800, idle 600 s.
    assert removed == [(2800.0, "cloud-1"), (2800.0, "cloud-2")]
    assert summary["host_hours"] == {"cloud": pytest.approx(2 * 2740 / 3600, abs=1e-3)}
