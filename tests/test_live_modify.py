"""Changing jobs after submission with real processes (issue 21, part 4): `xce modify`
(bmod), `xce top` (btop) and `xce switch` (bswitch) through the CLI against a live
controller and a real agent; a running job's new run limit reaches its agent."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from live import LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30}
  - {name: low, priority: 10}
  - {name: short, priority: 60}
"""
SUBMITTED = re.compile(r"^Job <(\d+)> is submitted to queue <\w+>\.$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-modify")
    with live_cluster(root, CONFIG, agents=("n1",), users=("alice",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=2)
        yield made


def submit(cluster: LiveCluster, *args: str, who: str = "admin") -> int:
    done = cluster.xce("submit", *args, who=who)
    assert done.returncode == 0, done.stderr
    match = SUBMITTED.match(done.stdout.strip())
    assert match is not None, done.stdout
    return int(match.group(1))


def xce_ok(cluster: LiveCluster, *args: str) -> str:
    done = cluster.xce(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def refused(cluster: LiveCluster, *args: str, who: str = "admin") -> str:
    done = cluster.xce(*args, who=who)
    assert done.returncode == 1, (done.stdout, done.stderr)
    return done.stderr.strip()


def test_modify_top_and_switch_change_what_starts(cluster: LiveCluster) -> None:
    blocker = submit(cluster, "--", "sleep", "60")
    cluster.wait_state(blocker, "RUN")
    wide = submit(cluster, "-n", "2", "--", "true")  # one slot free: it pends
    assert xce_ok(cluster, "modify", "-n", "1", str(wide)) == (
        f"Parameters of job <{wide}> are being changed")
    assert cluster.wait_state(wide, ("DONE", "EXIT"))["state"] == "DONE"
    history = xce_ok(cluster, "hist", str(wide))
    assert "Parameters of Job are changed: -n 1;" in history
    assert "Parameters of Job are changed: -n 1;" in xce_ok(cluster, "jobs", "-l", str(wide))

    # The running job may change only its run limit; a finished one nothing.
    assert refused(cluster, "modify", "-n", "2", str(blocker)) == (
        f"xce: Job <{blocker}>: the job is running: only its run limit can be changed (-W)")
    assert refused(cluster, "switch", "short", str(blocker)) == (
        f"xce: Job <{blocker}>: the job is running: only a pending job changes queue "
        "(requeue it first)")
    assert refused(cluster, "bottom", str(blocker)) == (
        f"xce: Job <{blocker}>: Job has already started: only a pending job moves in its "
        "queue")
    assert refused(cluster, "modify", "-n", "1", str(wide)) == (
        f"xce: Job <{wide}>: Job has already finished")

    first = submit(cluster, "-n", "2", "--", "sleep", "1")
    second = submit(cluster, "-n", "2", "--", "sleep", "1")
    lowly = submit(cluster, "-q", "low", "-n", "2", "--", "sleep", "1")
    assert refused(cluster, "modify", "-q", "nope", str(second)) == (
        f"xce: Job <{second}>: unknown queue 'nope'")
    assert refused(cluster, "top", str(second), who="alice") == (
        f"xce: Job <{second}>: not the owner of the job")
    assert xce_ok(cluster, "top", str(second)) == f"Job <{second}> has been moved to the top"
    assert xce_ok(cluster, "switch", "short", str(lowly)) == (
        f"Job <{lowly}> is switched to queue <short>")
    assert cluster.job(lowly)["queue"] == "short"
    xce_ok(cluster, "kill", str(blocker))
    cluster.wait_state(lowly, "RUN")  # short (60) before normal (30)
    assert cluster.job(first)["state"] == "PEND" and cluster.job(second)["state"] == "PEND"
    cluster.wait_state(second, "RUN")  # moved to the top: before the job submitted first
    assert cluster.job(first)["state"] == "PEND"
    cluster.wait_state(first, ("DONE", "EXIT"), timeout=20)


def test_a_running_jobs_new_run_limit_reaches_its_agent(cluster: LiveCluster) -> None:
    job = submit(cluster, "-W", "30", "--", "sleep", "60")
    cluster.wait_state(job, "RUN")
    answer = cluster.ok("POST", f"/jobs/{job}/modify", {"run_limit": 2})
    assert answer == {"job": job, "jobs": [job], "change": "-W 2s"}
    assert cluster.job(job)["run_limit"] == 2
    # The agent ends it at the new limit (the controller's own watch would wait for
    # its 30 s grace): EXIT, run limit reached.
    ended = wait_for(lambda: (info := cluster.job(job))["state"] == "EXIT" and info,
                     timeout=15, what="the job ended at its new run limit")
    assert ended["exit_reason"] == "run limit reached"
