"""Job control through the CLI against a live controller and a real agent with real
job processes (issue 21, part 4): `xce stop` / `resume` of a running job (SIGSTOP,
USUSP, slots kept), a stopped job killed, `xce requeue` of a running job (it runs
again; its old run's end does not end it), `xce kill 0` with -u and -q."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import ME, LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
  - {name: other, priority: 20}
"""
SUBMITTED = re.compile(r"^Job <(\d+)> is submitted to queue <\w+>\.$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-job-control")
    with live_cluster(root, CONFIG, agents=("n1",), users=("alice", "bob")) as made:
        made.start_controller()
        made.start_agent("n1", slots=1)
        yield made


def submit(cluster: LiveCluster, *args: str, who: str = "admin") -> int:
    done = cluster.xce("submit", *args, who=who)
    assert done.returncode == 0, done.stderr
    match = SUBMITTED.match(done.stdout.strip())
    assert match is not None, done.stdout
    return int(match.group(1))


def state_of(pid: int) -> str:
    """The process state letter of /proc/PID/stat (T: stopped), "" once gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return ""


def stat_column(cluster: LiveCluster, job: int) -> str:
    shown = cluster.xce("jobs", str(job))
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.splitlines()[1].split()[2]


def test_stop_resume_and_kill_a_running_job(cluster: LiveCluster) -> None:
    pid_file, termed = cluster.root / "stopped.pid", cluster.root / "termed"
    script = (f'trap "echo TERM > {termed}; exit 3" TERM; echo $$ > {pid_file}; '
              "while :; do sleep 0.1; done")
    job = submit(cluster, "--", "sh", "-c", script)
    cluster.wait_state(job, "RUN")
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
    done = cluster.xce("stop", str(job))
    assert (done.returncode, done.stdout) == (0, f"Job <{job}> is being stopped\n")
    wait_for(lambda: state_of(pid) == "T", 10, "the job's process to be stopped")
    assert stat_column(cluster, job) == "USUSP"
    host = cluster.job(job)["exec_hosts"]
    assert [(cluster.host(name)["used"], cluster.host(name)["suspended"]) for name in host] == [
        (1, 1)
    ], "as bhosts: its slot counts in NJOBS (used), not in RUN (used - suspended)"
    long = cluster.xce("jobs", "-l", str(job)).stdout
    assert re.search(rf"Status <USUSP>.*\n.*Suspended by the user or administrator <{ME}>;",
                     long, re.S), long
    other = submit(cluster, "--", "true")  # n1's only slot is the stopped job's
    wait_for(lambda: cluster.job(other)["pend_reason"] != "New job is waiting for scheduling"
             and cluster.job(other)["state"] == "PEND", 5, "a session to pass the job over")
    assert cluster.job(other)["state"] == "PEND", "a stopped job keeps its slots"
    assert cluster.xce("resume", str(job)).returncode == 0
    wait_for(lambda: state_of(pid) in ("S", "R"), 10, "the job's process to continue")
    assert stat_column(cluster, job) == "RUN"
    again = cluster.xce("resume", str(job))
    assert (again.returncode, again.stderr) == (1, f"xce: Job <{job}>: Job is not suspended "
                                                   "(it runs)\n")
    assert cluster.xce("stop", str(job)).returncode == 0
    wait_for(lambda: state_of(pid) == "T", 10, "the job's process to be stopped again")
    assert cluster.xce("kill", str(job)).returncode == 0
    info = cluster.wait_state(job, "EXIT")
    assert info["exit_reason"] == "killed"
    wait_for(lambda: state_of(pid) == "", 5, "the job's process to be gone")
    assert termed.read_text() == "TERM\n", "continued, it took its SIGTERM (not a SIGKILL)"
    cluster.wait_state(other, "DONE")
    events = json.loads(cluster.xce("hist", "--json", str(job)).stdout)["events"]
    assert [e["kind"] for e in events] == ["submitted", "started", "suspended", "resumed",
                                           "suspended", "killed"]
    assert events[2]["reason"] == f"by {ME}"


def test_requeue_runs_the_job_again(cluster: LiveCluster) -> None:
    runs = cluster.root / "runs.txt"
    script = f'echo run >> {runs}; [ "$(wc -l < {runs})" -ge 2 ] && exit 0; exec sleep 120'
    job = submit(cluster, "-J", "again", "--", "sh", "-c", script)
    first = cluster.wait_state(job, "RUN")
    wait_for(lambda: runs.exists(), 10, "the first run")
    done = cluster.xce("requeue", str(job))
    assert (done.returncode, done.stdout) == (0, f"Job <{job}> is being requeued\n")
    info = cluster.wait_state(job, "DONE", timeout=20)
    assert runs.read_text() == "run\nrun\n", "it ran twice"
    assert info["exit_code"] == 0, "the old run's end (SIGTERM) did not end the job"
    assert info["submit_time"] == first["submit_time"]
    events = json.loads(cluster.xce("hist", "--json", str(job)).stdout)["events"]
    assert [e["kind"] for e in events] == ["submitted", "started", "requeued", "started",
                                           "finished"]
    assert events[2]["reason"] == f"requeued by {ME}"
    shown = cluster.xce("hist", str(job)).stdout
    assert f"Requeued from Host(s) <n1>: requeued by {ME};" in shown
    refused = cluster.xce("requeue", str(job))
    assert refused.returncode == 1
    assert refused.stderr == (f"xce: Job <{job}>: Job has already finished: only a running "
                              "or stopped job can be requeued (submit it again)\n")
    held = submit(cluster, "-H", "--", "true")
    refused = cluster.xce("requeue", str(held))
    assert refused.stderr == (f"xce: Job <{held}>: the job is pending: only a running or "
                              "stopped job can be requeued\n")
    cluster.xce("kill", str(held))


def test_kill_0_with_users_and_queues(cluster: LiveCluster) -> None:
    mine = [submit(cluster, "-H", "--", "true", who="alice"),
            submit(cluster, "-H", "-q", "other", "--", "true", who="alice")]
    bobs = [submit(cluster, "-H", "--", "true", who="bob"),
            submit(cluster, "-H", "-q", "other", "--", "true", who="bob")]
    refused = cluster.xce("kill", "-u", "bob", "0", who="alice")
    assert refused.returncode == 1
    assert refused.stderr == "xce: only an admin may act on the jobs of bob (-u bob)\n"
    refused = cluster.xce("kill", "-u", "all", "0", who="alice")
    assert refused.stderr == "xce: only an admin may act on every user's jobs (-u all)\n"
    usage = cluster.xce("kill", "-u", "bob", str(bobs[0]))
    assert usage.returncode == 2 and "-u and -q select jobs with job id 0" in usage.stderr
    held = cluster.xce("stop", "-q", "other", "0", who="alice")
    assert (held.returncode, held.stderr) == (255, "No unfinished job found to change\n"), (
        "held already: nothing to change")
    done = cluster.xce("kill", "0", who="alice")
    assert done.stdout.splitlines() == [f"Job <{j}> is being terminated" for j in mine]
    assert [cluster.job(j)["state"] for j in [*mine, *bobs]] == ["EXIT", "EXIT", "PSUSP",
                                                                "PSUSP"]
    none = cluster.xce("kill", "0", who="alice")
    assert (none.returncode, none.stderr) == (255, "No unfinished job found to change\n")
    done = cluster.xce("kill", "-u", "bob", "-q", "other", "0")
    assert done.stdout == f"Job <{bobs[1]}> is being terminated\n"
    assert cluster.job(bobs[0])["state"] == "PSUSP"
    done = cluster.xce("kill", "-u", "all", "0")
    assert f"Job <{bobs[0]}> is being terminated" in done.stdout.splitlines()
    assert cluster.job(bobs[0])["state"] == "EXIT"


def test_restarted_controller_knows_a_stopped_job(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.start_controller()
        cluster.start_agent("n1", slots=1)
        pid_file = tmp_path / "job.pid"
        job = submit(cluster, "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 120")
        cluster.wait_state(job, "RUN")
        pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
        assert cluster.xce("stop", str(job)).returncode == 0
        wait_for(lambda: state_of(pid) == "T", 10, "the job's process to be stopped")
        cluster.stop_controller()
        cluster.stop("n1")  # the agent too: its restart must keep the job stopped
        cluster.start_controller()
        cluster.start_agent("n1", slots=1)
        assert cluster.job(job)["state"] == "USUSP"
        assert state_of(pid) == "T"
        assert cluster.xce("resume", str(job)).returncode == 0
        wait_for(lambda: state_of(pid) in ("S", "R"), 10, "the job's process to continue")
        assert cluster.xce("kill", str(job)).returncode == 0
        cluster.wait_state(job, "EXIT")
