"""End to end, with real processes: a controller, two agents (n1, n2: 2 slots each) and
real jobs; the CLI and the HTTP API as a user would drive them.

Most tests share one cluster (module scope); each leaves it idle (every job finished,
every host open and empty). The requeue test kills an agent and gets its own cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import ME, LiveCluster, live_cluster, pid_alive, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 2}
  - {name: n2, slots: 2}
queues:
  - {name: normal, priority: 30}
  - {name: noreq, priority: 20, requeue_on_host_loss: false}
"""
SUBMITTED = re.compile(r"^Job <(\d+)> is submitted to queue <(\w+)>\.$")
# A job that records its pid in FILE, then sleeps until killed.
SLEEPER = "echo $$ > {file}; exec sleep 60"


def up(root: Path) -> LiveCluster:
    cluster = LiveCluster(root, CONFIG)
    cluster.start_controller()
    cluster.start_agent("n1", wait=False)
    cluster.start_agent("n2", wait=False)
    wait_for(lambda: all(h["state"] == "ok" for h in cluster.hosts().values()), 20,
             "both agents to register")
    return cluster


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-e2e")
    cluster = up(root)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster(shared: LiveCluster) -> Iterator[LiveCluster]:
    """The shared cluster, made idle again after the test."""
    yield shared
    for job in shared.jobs():
        if job["state"] in ("PEND", "PSUSP", "RUN"):
            shared.api("POST", f"/jobs/{job['id']}/kill")
    for name, host in shared.hosts().items():
        if host["state"] == "closed":
            shared.ok("POST", f"/hosts/{name}/open")
    wait_for(lambda: all(j["state"] in ("DONE", "EXIT") for j in shared.jobs()), 15,
             "every job to end")
    wait_for(lambda: all(h["used"] == 0 and h["state"] == "ok"
                         for h in shared.hosts().values()), 15, "every host to be idle")


def submitted(out: str) -> int:
    match = SUBMITTED.match(out.strip())
    assert match is not None, out
    return int(match.group(1))


def first_line(path: Path) -> str:
    """The first line the job writes into `path` (waiting for it)."""

    def probe() -> str | None:
        lines = path.read_text().splitlines() if path.exists() else []
        return lines[0] if lines else None

    return wait_for(probe, 10, f"a line in {path}")


def pid_in(path: Path) -> int:
    return int(first_line(path))


def wait_dead(pid: int) -> None:
    wait_for(lambda: not pid_alive(pid), 10, f"process {pid} to die")


def test_submit_run_done_with_output(cluster: LiveCluster) -> None:
    done = cluster.xce("submit", "-o", "out.%J.txt", "-J", "hello", "--",
                       "sh", "-c", "echo hello from $XCE_JOBID on $LSB_HOSTS")
    assert done.returncode == 0, done.stderr
    job_id = submitted(done.stdout)
    assert done.stdout.strip() == f"Job <{job_id}> is submitted to queue <normal>."
    job = cluster.wait_state(job_id, ("DONE", "EXIT"))
    assert job["state"] == "DONE"
    assert job["exit_code"] == 0 and job["signal"] is None and job["exit_reason"] == ""
    [host] = job["exec_hosts"]
    assert job["exec_hosts"] == {host: 1} and host in ("n1", "n2")
    assert job["start_time"] is not None and job["end_time"] >= job["start_time"]
    output = cluster.root / f"out.{job_id}.txt"
    assert output.read_text() == f"hello from {job_id} on {host}\n"
    listing = cluster.xce("jobs", "-d", "-w", str(job_id))
    assert listing.returncode == 0, listing.stderr
    row = listing.stdout.splitlines()[1].split()
    assert row[:6] == [str(job_id), ME, "DONE", "normal", host, "hello"]
    long = cluster.xce("jobs", "-l", str(job_id)).stdout
    assert long.rstrip().endswith("Done successfully.")


def test_exit_code_is_reported(cluster: LiveCluster) -> None:
    job_id = cluster.submit(["sh", "-c", "echo failing; exit 3"])
    job = cluster.wait_state(job_id, ("DONE", "EXIT"))
    assert (job["state"], job["exit_code"], job["signal"]) == ("EXIT", 3, None)
    long = cluster.xce("jobs", "-l", str(job_id))
    assert long.returncode == 0, long.stderr
    assert long.stdout.rstrip().endswith("Exited with exit code 3.")
    # A command that cannot start: the shim's 127, as a shell says.
    missing = cluster.submit(["/nonexistent/command"])
    job = cluster.wait_state(missing, ("DONE", "EXIT"))
    assert (job["state"], job["exit_code"]) == ("EXIT", 127)


def test_kill_pending_and_running_jobs(cluster: LiveCluster) -> None:
    big = cluster.submit(["sh", "-c", SLEEPER.format(file="big.pid")], n=4)
    cluster.wait_state(big, "RUN")
    pid = pid_in(cluster.root / "big.pid")
    assert pid_alive(pid)
    small = cluster.submit(["sh", "-c", "touch small.ran"])
    info = cluster.wait_state(small, "PEND")
    wait_for(lambda: cluster.job(small)["pend_kind"] == "resource", 5, "a pend reason")

    # Pending: ends at once, EXIT "killed", never started.
    killed = cluster.xce("kill", str(small))
    assert (killed.returncode, killed.stdout.strip()) == (0, f"Job <{small}> is being terminated")
    info = cluster.job(small)
    assert (info["state"], info["exit_reason"], info["start_time"]) == ("EXIT", "killed", None)
    again = cluster.xce("kill", str(small))
    assert again.returncode == 1
    assert again.stderr.strip() == f"xce: Job <{small}>: Job has already finished"

    # Running: the process gets SIGTERM and dies; the held slots on the other host too.
    assert cluster.xce("kill", str(big)).returncode == 0
    info = cluster.wait_state(big, "EXIT")
    assert info["exit_reason"] == "killed"
    wait_dead(pid)
    wait_for(lambda: all(h["used"] == 0 for h in cluster.hosts().values()), 10,
             "the slots to be free")
    assert not (cluster.root / "small.ran").exists()
    # The freed slots serve the next job.
    after = cluster.submit(["true"], n=4)
    assert cluster.wait_state(after, ("DONE", "EXIT"))["state"] == "DONE"


def test_closed_host_gets_no_new_work(cluster: LiveCluster) -> None:
    closed = cluster.xce("host", "close", "n1")
    assert (closed.returncode, closed.stdout.strip()) == (0, "Host <n1> closed.")
    hosts = cluster.xce("hosts").stdout.splitlines()
    assert hosts[0].split() == ["HOST_NAME", "STATUS", "MAX", "NJOBS", "RUN"]
    assert [line.split()[:2] for line in hosts[1:]] == [["n1", "closed_Adm"], ["n2", "ok"]]
    jobs = [cluster.submit(["sleep", "60"]) for _ in range(3)]
    for job_id in jobs[:2]:
        assert cluster.wait_state(job_id, "RUN")["exec_hosts"] == {"n2": 1}
    cluster.wait_state(jobs[2], "PEND")
    third = wait_for(lambda: (j := cluster.job(jobs[2]))["pend_kind"] == "resource" and j, 5,
                     "a session's pend reason")
    assert third["state"] == "PEND"
    assert third["pend_reason"] == "Not enough job slots: 1 needed, 0 free on eligible hosts"
    assert cluster.host("n1")["used"] == 0
    # Opened again: the pending job starts there.
    opened = cluster.xce("host", "open", "n1")
    assert (opened.returncode, opened.stdout.strip()) == (0, "Host <n1> opened.")
    assert cluster.wait_state(jobs[2], "RUN")["exec_hosts"] == {"n1": 1}


def test_parallel_job_across_two_agents(cluster: LiveCluster) -> None:
    script = 'echo "$LSB_HOSTS"; echo "$LSB_MCPU_HOSTS"'
    job_id = cluster.submit(["sh", "-c", script], n=4, output="par.%J.out")
    job = cluster.wait_state(job_id, ("DONE", "EXIT"))
    assert job["state"] == "DONE" and job["exit_code"] == 0
    assert job["exec_hosts"] == {"n1": 2, "n2": 2}
    lines = (cluster.root / f"par.{job_id}.out").read_text().splitlines()
    assert sorted(lines[0].split()) == ["n1", "n1", "n2", "n2"]
    assert len(lines) == 2 and set(lines[1].split()) == {"n1", "n2", "2"}
    # The held slots of the second host are given back too.
    wait_for(lambda: all(h["used"] == 0 for h in cluster.hosts().values()), 10, "free slots")
    listing = cluster.xce("jobs", "-d", str(job_id)).stdout.splitlines()
    assert listing[1].split()[4] in ("2*n1:2*n2", "2*n2:2*n1")


def test_pend_reasons_are_shown(cluster: LiveCluster) -> None:
    running = cluster.submit(["sleep", "60"])
    cluster.wait_state(running, "RUN")
    big = cluster.submit(["true"], n=4, name="big")
    held = cluster.submit(["true"], name="held", hold=True)
    # The reasons of a session that saw both jobs (before it: "New job is waiting ...").
    wait_for(lambda: cluster.job(big)["pend_kind"] == "resource"
             and cluster.job(held)["pend_kind"] == "hold", 5, "a session's pend reasons")
    shown = cluster.xce("jobs", "-p")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "USER", "STAT", "QUEUE", "EXEC_HOST", "JOB_NAME",
                                "SUBMIT_TIME"]
    assert lines[1].split()[:5] == [str(big), ME, "PEND", "normal", "big"]
    assert lines[2] == " Not enough job slots: 4 needed, 3 free on eligible hosts;"
    assert lines[3].split()[:5] == [str(held), ME, "PSUSP", "normal", "held"]
    assert lines[4] == " The job was suspended by the user while pending;"
    assert len(lines) == 5
    info = cluster.job(big)
    assert (info["state"], info["pend_kind"]) == ("PEND", "resource")


def test_requeue_when_an_agent_is_killed(tmp_path: Path) -> None:
    """n1's agent killed -9: n1 becomes unreach; its job of a requeueing queue goes back
    to PEND and then runs on n2; the one of `requeue_on_host_loss: false` exits -1.
    When n1's agent comes back, it kills the jobs it still runs there."""
    with live_cluster(tmp_path, CONFIG) as cluster:
        cluster.start_controller()
        cluster.start_agent("n1")
        cluster.start_agent("n2")
        cluster.ok("POST", "/hosts/n2/close")  # so that both jobs start on n1
        # On n1 each job sleeps (and outlives the agent); on n2 it ends at once.
        script = 'echo "$LSB_HOSTS $$" >> runs.$XCE_JOBID; [ "$LSB_HOSTS" = n2 ] || exec sleep 60'
        requeued = cluster.submit(["sh", "-c", script])
        lost = cluster.submit(["sh", "-c", script], queue="noreq")
        for job_id in (requeued, lost):
            assert cluster.wait_state(job_id, "RUN")["exec_hosts"] == {"n1": 1}
        runs = {j: cluster.root / f"runs.{j}" for j in (requeued, lost)}
        pids = {j: int(first_line(path).split()[1]) for j, path in runs.items()}

        cluster.stop("n1")  # SIGKILL to the agent; its jobs keep running
        assert all(pid_alive(pid) for pid in pids.values())
        wait_for(lambda: cluster.host("n1")["state"] == "unreach", 10, "n1 unreach")
        info = cluster.wait_state(lost, "EXIT", timeout=10)
        assert info["exit_code"] == -1 and info["signal"] is None
        assert info["exit_reason"] == "host n1 unreachable"
        info = cluster.wait_state(requeued, "PEND", timeout=10)
        assert info["start_time"] is None and info["exec_hosts"] == {}
        assert cluster.host("n1")["jobs"] == []

        cluster.ok("POST", "/hosts/n2/open")
        info = cluster.wait_state(requeued, ("DONE", "EXIT"))
        assert (info["state"], info["exec_hosts"]) == ("DONE", {"n2": 1})
        assert [line.split()[0] for line in runs[requeued].read_text().splitlines()] == [
            "n1", "n2"]
        assert runs[lost].read_text().split()[0] == "n1"
        assert len(runs[lost].read_text().splitlines()) == 1  # it ran once

        # n1's agent again: it registers the jobs still running there, and is told to
        # kill them (the controller no longer runs them on n1).
        cluster.start_agent("n1")
        for pid in pids.values():
            wait_dead(pid)
        assert cluster.job(requeued)["state"] == "DONE"
        assert cluster.job(lost)["exit_code"] == -1
