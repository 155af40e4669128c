"""Preemption with real processes (docs/scheduling.md, "Preemption"): a controller
and an agent of one slot; `low` jobs are preempted by `urgent` (suspend) and `rush`
(requeue) jobs. A suspended victim's process is really stopped (/proc state T) and
continues when its preemptor ends; a requeued one is killed and runs again from the
start; a controller killed in the middle of a preemption loses nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from live import LiveCluster, live_cluster, skip_unless_linux, wait_for
from test_live_job_control import stat_column, state_of, submit

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: low, priority: 10}
  - {name: urgent, priority: 70, preempt: [low], preempt_action: suspend}
  - {name: rush, priority: 60, preempt: [low], preempt_action: requeue}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-preempt")
    with live_cluster(root, CONFIG, agents=("n1",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=1)
        yield made


def history(cluster: LiveCluster, job: int) -> list[str]:
    shown = cluster.xce("jobs", "-l", str(job))
    assert shown.returncode == 0, shown.stderr
    return [line.split(": ", 1)[1] for line in shown.stdout.splitlines() if ": " in line]


def victim(cluster: LiveCluster, pids: Path) -> tuple[int, int]:
    """A low job that writes its pid (one line per run) and sleeps; its id and pid."""
    job = submit(cluster, "-q", "low", "--", "sh", "-c", f"echo $$ >> {pids}; exec sleep 300")
    cluster.wait_state(job, "RUN")
    pid = int(wait_for(lambda: (pids.exists() and pids.read_text().split()[-1:]) or None)[0])
    return job, pid


def until(flag: Path) -> list[str]:
    """A command that runs until `flag` exists (the test says when a preemptor ends)."""
    return ["sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.1; done"]


def test_a_suspended_victim_is_stopped_and_continues_when_its_preemptor_ends(
    cluster: LiveCluster,
) -> None:
    job, pid = victim(cluster, cluster.root / "suspend.pids")
    flag = cluster.root / "suspend.end"
    urgent = submit(cluster, "-q", "urgent", "--", *until(flag))
    wait_for(lambda: state_of(pid) == "T", 10, "the victim's process to be stopped")
    assert stat_column(cluster, job) == "USUSP"
    cluster.wait_state(urgent, "RUN")  # (the victim's slot, handed over)
    assert state_of(pid) == "T"
    flag.touch()
    cluster.wait_state(urgent, "DONE")
    wait_for(lambda: state_of(pid) in ("S", "R"), 10, "the victim's process to continue")
    assert stat_column(cluster, job) == "RUN"
    lines = history(cluster, job)
    assert f"Preempted by job {urgent} (suspend);" in lines
    assert f"Preempted job {job} (suspend);" in history(cluster, urgent)
    cluster.xce("kill", str(job), check=True)
    cluster.wait_state(job, "EXIT")


def test_a_requeued_victim_is_killed_and_runs_again_from_the_start(
    cluster: LiveCluster,
) -> None:
    pids = cluster.root / "requeue.pids"
    job, first = victim(cluster, pids)
    flag = cluster.root / "requeue.end"
    rush = submit(cluster, "-q", "rush", "--", *until(flag))
    wait_for(lambda: state_of(first) == "", 15, "the victim's first run to be killed")
    cluster.wait_state(rush, "RUN", timeout=20)
    assert cluster.job(job)["state"] == "PEND"
    flag.touch()
    cluster.wait_state(rush, "DONE", timeout=20)
    cluster.wait_state(job, "RUN", timeout=20)
    wait_for(lambda: len(pids.read_text().split()) == 2, 10, "the victim's second run")
    second = int(pids.read_text().split()[1])
    assert second != first and state_of(second) in ("S", "R")
    assert f"Preempted by job {rush} (requeue);" in history(cluster, job)
    cluster.xce("kill", str(job), check=True)
    cluster.wait_state(job, "EXIT")


def test_a_controller_restarted_mid_preemption_loses_nothing(cluster: LiveCluster) -> None:
    job, pid = victim(cluster, cluster.root / "restart.pids")
    flag = cluster.root / "restart.end"
    began = cluster.root / "restart.began"
    urgent = submit(cluster, "-q", "urgent", "--", "sh", "-c",
                    f"touch {began}; while [ ! -e {flag} ]; do sleep 0.1; done")
    wait_for(lambda: state_of(pid) == "T", 10, "the victim's process to be stopped")
    # The preemptor starts at the session after the suspension; its dispatch is durable
    # once its agent has started it (the view says RUN a group commit earlier: a kill
    # in that window leaves it pending again, and the next session dispatches it anew).
    wait_for(began.exists, 15, "the preemptor to start on its host")
    listen = cluster.url.removeprefix("http://")  # (the same address: the agent's)
    cluster.stop_controller()  # (SIGKILL) while the victim is suspended for urgent
    cluster.start_controller(listen=listen)
    assert stat_column(cluster, job) == "USUSP"
    assert cluster.job(urgent)["state"] == "RUN"
    assert state_of(pid) == "T", "still stopped: its preemptor runs"
    flag.touch()
    cluster.wait_state(urgent, "DONE", timeout=20)
    wait_for(lambda: state_of(pid) in ("S", "R"), 15, "the victim's process to continue")
    assert stat_column(cluster, job) == "RUN"
    done = cluster.xce("resume", str(job))
    assert done.returncode == 1  # (it runs: nothing to resume)
    cluster.xce("kill", str(job), check=True)
    cluster.wait_state(job, "EXIT")
