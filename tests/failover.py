"""The failover scenario of docs/ha.md, for tests/test_live_ha.py (one round) and
bench/bench_failover.py (many): two controllers on one PostgreSQL log, two real agents
running jobs, submissions at ~200/s through the CLI's client (which follows the
leader, xce.cli.client), and the leader killed -9 (or stopped, SIGSTOP).

What is checked after a round (`Load.verdict`): every acknowledged submission is known
to the new leader, as submitted; every job that ran, ran once (each job appends its id
to RUNLOG; the log has at most one JobStarted per job); the long jobs that ran through
the takeover ended DONE, started once, at their first start.
"""

from __future__ import annotations

import collections
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from live import FAST, MARK, LiveCluster, wait_for

from xce.cli.client import Client, ClientError
from xce.controller.store import open_store
from xce.model.api import SubmitRequest
from xce.model.events import JobStarted

CONFIG = """\
cluster: ha
session_interval: 0.2
hosts:
  - {name: n1, slots: 4}
  - {name: n2, slots: 4}
queues:
  - {name: normal, priority: 30}
"""
# Hosts stay ok through a takeover (the agents come back within seconds).
TIMINGS = (*FAST[:2], "--unreach-after", "30", "--requeue-after", "60")
RATE = 200.0  # submissions per second, all threads together
THREADS = 8
RUNNABLE_EVERY = 25  # one submission in so many runs (a short job); the rest are held


class Load:
    """Threads submitting at `RATE` through a client given every controller's URL; the
    acknowledged jobs (id -> name) and what went unacknowledged."""

    def __init__(self, cluster: LiveCluster, urls: str, runlog: Path) -> None:
        self.cluster, self.urls, self.runlog = cluster, urls, runlog
        self.stop = threading.Event()
        self.acked: dict[int, str] = {}
        self.times: list[float] = []  # when each acknowledgement came (monotonic)
        self.unacked = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._count = 0
        self._threads = [threading.Thread(target=self._run, daemon=True)
                         for _ in range(THREADS)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(60)

    def rate(self, since: float, until: float) -> float:
        """Acknowledgements per second in [since, until)."""
        return sum(since <= t < until for t in self.times) / (until - since)

    def _request(self) -> SubmitRequest:
        with self._lock:
            self._count += 1
            n = self._count
        runs = n % RUNNABLE_EVERY == 0
        return SubmitRequest(
            command=["sh", "-c", f"echo $XCE_JOBID >> {self.runlog}; sleep 0.5"],
            name=f"s{n}", cwd=str(self.cluster.root), hold=not runs,
            env={MARK: self.cluster.mark, "PATH": os.environ.get("PATH", "/usr/bin:/bin")})

    def _run(self) -> None:
        client = Client(self.urls, self.cluster.token("admin"), timeout=20.0)
        pause = THREADS / RATE
        while not self.stop.is_set():
            began = time.monotonic()
            request = self._request()
            try:
                job = client.submit(request).job
            except ClientError as err:
                with self._lock:
                    if err.status is None or err.status == 503:
                        self.unacked += 1  # the leader died mid-request, or no leader yet
                    else:
                        self.errors.append(f"{request.name}: {err.status} {err.message}")
            else:
                with self._lock:
                    if job in self.acked:
                        self.errors.append(f"job {job} acknowledged twice")
                    self.acked[job] = request.name
                    self.times.append(time.monotonic())
            self.stop.wait(max(0.0, pause - (time.monotonic() - began)))


def long_jobs(cluster: LiveCluster, url: str, runlog: Path, count: int,
              seconds: float) -> list[int]:
    """`count` jobs that run `seconds` (they must run through the takeover)."""
    body = {"command": ["sh", "-c", f"echo $XCE_JOBID >> {runlog}; sleep {seconds}"],
            "cwd": str(cluster.root),
            "env": {MARK: cluster.mark, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}}
    return [int(_ok(cluster, url, "POST", "/jobs", {**body, "name": f"long{i}"})["job"])
            for i in range(count)]


def _ok(cluster: LiveCluster, url: str, method: str, path: str, body: Any = None) -> Any:
    answer = cluster.api(method, path, body, url=url)
    assert answer.status in (200, 201), (path, answer.status, answer.json)
    return answer.json


def leads(cluster: LiveCluster, url: str) -> bool:
    try:
        return cluster.api("GET", "/jobs?limit=1", url=url, timeout=5).status == 200
    except OSError:
        return False


def wait_leading(cluster: LiveCluster, url: str, timeout: float = 30.0) -> float:
    """Seconds until the controller at `url` leads."""
    began = time.monotonic()
    wait_for(lambda: leads(cluster, url), timeout, f"{url} to lead", interval=0.02)
    return time.monotonic() - began


def running(cluster: LiveCluster, url: str, jobs: list[int]) -> dict[int, float]:
    """The start times of `jobs`, once all run."""
    def started() -> dict[int, float] | None:
        info = {j: _ok(cluster, url, "GET", f"/jobs/{j}") for j in jobs}
        if all(i["state"] == "RUN" for i in info.values()):
            return {j: float(i["start_time"]) for j, i in info.items()}
        return None
    return wait_for(started, 30, "the long jobs to run", interval=0.1)


def verdict(cluster: LiveCluster, url: str, store: str, load: Load, runlog: Path,
            long: dict[int, float]) -> dict[str, Any]:
    """What a round must show (see the module doc); the figures of it."""
    assert load.errors == [], load.errors[:5]
    jobs = {j["id"]: j for j in _ok(cluster, url, "GET", "/jobs?user=all&state=all")["jobs"]}
    lost = sorted(set(load.acked) - set(jobs))
    assert lost == [], f"acknowledged submissions lost: {lost[:10]}"
    renamed = {i: n for i, n in load.acked.items() if jobs[i]["name"] != n}
    assert renamed == {}, f"job ids given to other submissions: {renamed}"
    for job, start in long.items():
        info = wait_for(lambda job=job: (_ok(cluster, url, "GET", f"/jobs/{job}")
                                         if _ok(cluster, url, "GET", f"/jobs/{job}")["state"]
                                         in ("DONE", "EXIT") else None), 60,
                        f"long job {job} to end", interval=0.2)
        assert (info["state"], info["exit_code"]) == ("DONE", 0), info
        assert float(info["start_time"]) == start, "a long job was restarted"
    runs = collections.Counter(int(line) for line in runlog.read_text().split())
    twice = {job: n for job, n in runs.items() if n != 1}
    assert twice == {}, f"jobs that ran more than once: {twice}"
    with open_store(store) as log:
        starts = collections.Counter(f.event.job for f in log.read()
                                     if isinstance(f.event, JobStarted))
    assert {j: n for j, n in starts.items() if n != 1} == {}, "a job was started twice"
    return {"acked": len(load.acked), "unacked": load.unacked, "ran": len(runs)}


def stop_process(cluster: LiveCluster, key: str, sig: int) -> None:
    """Signal a controller's process group (SIGSTOP, SIGCONT; SIGKILL: `cluster.stop`)."""
    os.killpg(cluster.procs[key].pid, sig)


def exit_status(cluster: LiveCluster, key: str, timeout: float) -> int | None:
    """The controller's exit status, once it exits within `timeout` (else None)."""
    try:
        return cluster.procs[key].wait(timeout)
    except subprocess.TimeoutExpired:
        return None

