"""Run limits with real processes: a controller, an agent (kill grace 2 s, as
tests/live.py starts it) and real jobs. A job reaching its limit gets SIGTERM, then
SIGKILL after the grace, and ends EXIT with "run limit reached" (`xce jobs -l` says
so); `xce submit -W` beyond the queue's max_run_limit, or malformed, submits nothing;
a blocked job's reservation shows in `xce jobs -l`."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from live import LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
reserve_depth: 1
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30, max_run_limit: 3600}
  - {name: short, priority: 20, run_limit: 2}
"""
GRACE = 2.0  # the agents' --kill-grace in tests/live.py
REASON = "run limit reached"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with live_cluster(tmp_path_factory.mktemp("live-runlimit"), CONFIG, agents=("n1",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=4)
        yield made


def ran(info: dict[str, float]) -> float:
    return info["end_time"] - info["start_time"]


def test_a_job_at_its_limit_is_terminated(cluster: LiveCluster) -> None:
    own = cluster.submit(["sleep", "60"], run_limit=2)
    queued = cluster.submit(["sleep", "60"], queue="short")  # the queue's run_limit: 2
    for job in (own, queued):
        info = cluster.wait_state(job, "EXIT", timeout=15)
        assert (info["exit_reason"], info["signal"], info["exit_code"]) == (REASON, 15, 143)
        assert info["run_limit"] == 2
        assert 2 <= ran(info) < 2 + GRACE, "ended by SIGTERM at its limit"
    shown = cluster.xce("jobs", "-l", str(own), check=True).stdout
    assert "RUNLIMIT 2 s" in shown
    assert "Exited by signal 15: run limit reached." in shown


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(cluster: LiveCluster) -> None:
    job = cluster.submit(["sh", "-c", "trap '' TERM; sleep 60"], run_limit=1)
    info = cluster.wait_state(job, "EXIT", timeout=15)
    assert (info["exit_reason"], info["signal"], info["exit_code"]) == (REASON, 9, 137)
    assert ran(info) >= 1 + GRACE, "SIGKILL only once the grace is over"
    assert "Exited by signal 9: run limit reached." in cluster.xce(
        "jobs", "-l", str(job), check=True).stdout


def test_submit_W_sets_the_limit(cluster: LiveCluster) -> None:
    done = cluster.xce("submit", "-H", "-W", "45", "sleep", "1", check=True)
    job = int(re.findall(r"Job <(\d+)>", done.stdout)[0])
    assert cluster.job(job)["run_limit"] == 45 * 60
    assert " RUNLIMIT 45.0 min" in cluster.xce("jobs", "-l", str(job), check=True).stdout
    cluster.ok("POST", f"/jobs/{job}/kill")


def test_a_limit_above_the_queue_maximum_is_refused(cluster: LiveCluster) -> None:
    before = len(cluster.jobs())
    refused = cluster.xce("submit", "-W", "2:00", "sleep", "1")
    assert refused.returncode == 1
    assert "exceeds queue normal's max_run_limit 3600 s" in refused.stderr
    answer = cluster.api("POST", "/jobs", {"command": ["sleep", "1"], "run_limit": 7200})
    assert answer.status == 400
    assert "run limit 7200 s exceeds queue normal's max_run_limit 3600 s" in answer.json["error"]
    negative = cluster.api("POST", "/jobs", {"command": ["sleep", "1"], "run_limit": -5})
    assert negative.status == 400 and "run limit" in negative.json["error"]
    assert len(cluster.jobs()) == before, "nothing submitted"


@pytest.mark.parametrize("bad", ["abc", "1:99", "-5", ""])
def test_a_malformed_W_is_refused(cluster: LiveCluster, bad: str) -> None:
    before = len(cluster.jobs())
    refused = cluster.xce("submit", "-W", bad, "sleep", "1")
    assert refused.returncode == 2
    assert f"{bad!r} is not a run limit: expected [hh:]mm" in refused.stderr
    assert len(cluster.jobs()) == before, "nothing submitted"



def test_a_blocked_job_shows_its_reservation(cluster: LiveCluster) -> None:
    wide = cluster.submit(["sleep", "60"], n=4, run_limit=30)
    running = cluster.wait_state(wide, "RUN")
    blocked = cluster.submit(["sleep", "1"], n=4, run_limit=10)
    info = wait_for(lambda: (found := cluster.job(blocked))["expected_start"] and found, 10,
                    "the blocked job's reservation")
    assert info["state"] == "PEND"
    assert info["expected_start"] == pytest.approx(running["start_time"] + 30)
    assert info["reserved_hosts"] == {"n1": 4}
    shown = cluster.xce("jobs", "-l", str(blocked), check=True).stdout
    start = time.ctime(info["expected_start"])[:19]
    assert f"Expected to start at {start} on Host(s) <4*n1>;" in shown
    assert " RUNLIMIT 10 s" in shown
    for job in (blocked, wide):
        cluster.ok("POST", f"/jobs/{job}/kill")
