"""Durability with real processes: the controller is killed -9 at random moments (seeded)
over many rounds while a client submits jobs and two agents run them, and restarted on
the same state directory each time (the agents keep running and reconnect).

At the end every acknowledged submission exists and is DONE, no job id was given to two
acknowledged submissions, and every job ran exactly once (the agents are never killed
here, so no job may legitimately run twice), and nothing is left pending or running.
"""

from __future__ import annotations

import collections
import http.client
import json
import os
import random
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from live import MARK, LiveCluster, free_port, live_cluster, skip_unless_linux, wait_for

from xce.controller.store import SqliteStore

pytestmark = skip_unless_linux

SEED = int(os.environ.get("XCE_LIVE_SEED", "20241129"))  # another seed explores other moments
ROUNDS = 16
CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 2}
  - {name: n2, slots: 2}
queues:
  - {name: normal, priority: 30}
"""
# Agents reconnect with a backoff (up to 30 s): no host may become unreach meanwhile,
# or its jobs would be requeued and (legitimately) run twice.
TIMINGS = ("--heartbeat-interval", "0.3", "--unreach-after", "60", "--requeue-after", "120",
           "--snapshot-every", "25")

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Submitter(threading.Thread):
    """Submits short jobs one after another until stopped; keeps the acknowledged ones
    (id -> the submission's unique name). A connection error (the controller is down
    or was killed mid-request) means "not acknowledged": such a job may exist or not."""

    def __init__(self, cluster: LiveCluster, runlog: Path) -> None:
        super().__init__(daemon=True)
        self.url, self.token = cluster.url, cluster.token("admin")
        self.root, self.mark, self.runlog = cluster.root, cluster.mark, runlog
        self.stop = threading.Event()
        self.acked: list[tuple[int, str]] = []
        self.unacked = 0
        self.unexpected: list[str] = []
        self.count = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.count += 1
            name = f"s{self.count}"
            body = {
                "command": ["sh", "-c", f"echo $XCE_JOBID >> {self.runlog}; sleep 0.2"],
                "name": name, "cwd": str(self.root),
                "env": {MARK: self.mark, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            }
            request = urllib.request.Request(
                f"{self.url}/jobs", data=json.dumps(body).encode(), method="POST",
                headers={"Authorization": f"Bearer {self.token}",
                         "Content-Type": "application/json"},
            )
            try:
                with _opener.open(request, timeout=10) as response:
                    answer = json.loads(response.read())
                    assert response.status == 201, answer
                    self.acked.append((int(answer["job"]), name))
            except urllib.error.HTTPError as err:
                self.unexpected.append(f"{name}: HTTP {err.code}: {err.read()!r}")
            except (OSError, http.client.HTTPException):  # refused, reset, timed out
                self.unacked += 1
                self.stop.wait(0.05)
                continue
            self.stop.wait(0.2)


def agents_back(cluster: LiveCluster) -> None:
    """Wait until both agents have heartbeated to the controller now running (it gives
    every host a fresh `last_heartbeat` when it starts; a heartbeat changes it)."""
    first = {name: h["last_heartbeat"] for name, h in cluster.hosts().items()}
    wait_for(lambda: all(h["last_heartbeat"] != first[name]
                         for name, h in cluster.hosts().items()),
             40, "the agents to reconnect")


def test_controller_killed_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    runlog = tmp_path / "RUNLOG"
    runlog.touch()
    port = free_port()
    listen = f"127.0.0.1:{port}"
    with live_cluster(tmp_path, CONFIG) as cluster:
        cluster.start_controller(listen, extra=TIMINGS)
        cluster.start_agent("n1")
        cluster.start_agent("n2")
        submitter = Submitter(cluster, runlog)
        submitter.start()
        try:
            for round_ in range(ROUNDS):
                # Kill at a random moment: mostly once the agents are back (jobs are
                # dispatched, started, reported), sometimes while they reconnect.
                if rng.random() < 0.25:
                    time.sleep(rng.choice([0.0, 0.05, 0.3]))
                else:
                    agents_back(cluster)
                    time.sleep(rng.uniform(0.0, 1.2))
                cluster.stop_controller()
                time.sleep(rng.uniform(0.0, 0.3))
                if round_ < ROUNDS - 1:
                    cluster.start_controller(listen, extra=TIMINGS)
        finally:
            submitter.stop.set()
            submitter.join(15)
        assert not submitter.is_alive()
        ran_meanwhile = len(runlog.read_text().split())
        cluster.start_controller(listen, extra=TIMINGS)

        assert submitter.unexpected == []
        acked = dict(submitter.acked)
        assert len(acked) == len(submitter.acked), "a job id was acknowledged twice"
        assert len(acked) >= 2 * ROUNDS, (len(acked), submitter.unacked)
        assert ran_meanwhile >= ROUNDS, "the agents ran (almost) nothing between the kills"

        def settled() -> list[dict[str, object]] | None:
            jobs = cluster.jobs()
            if any(j["state"] not in ("DONE", "EXIT") for j in jobs):
                return None
            if any(h["used"] for h in cluster.hosts().values()):
                return None
            return jobs

        final = wait_for(settled, 60, "every job to finish", interval=0.2)
        jobs = {j["id"]: j for j in final}
        # Every acknowledged submission is there, as submitted, and DONE.
        missing = sorted(set(acked) - set(jobs))
        assert missing == [], f"acknowledged jobs lost: {missing}"
        wrong = {i: (jobs[i]["name"], name) for i, name in acked.items() if jobs[i]["name"] != name}
        assert wrong == {}, f"job ids given to other submissions: {wrong}"
        failed = {i: (j["state"], j["exit_code"], j["exit_reason"])
                  for i, j in jobs.items() if j["state"] != "DONE" or j["exit_code"] != 0}
        assert failed == {}
        # Each job ran exactly once; nothing ran that the controller does not know.
        runs = collections.Counter(int(line) for line in runlog.read_text().split())
        twice = {job: n for job, n in runs.items() if n != 1}
        assert twice == {}, f"jobs that ran more than once: {twice}"
        assert set(runs) == set(jobs)
        assert all(h["state"] == "ok" and h["jobs"] == [] for h in cluster.hosts().values())
        cluster.stop_controller(signal.SIGTERM)
        with SqliteStore(cluster.state / "xce.db") as store:
            snapshot = store.latest_snapshot()
            assert snapshot is not None, "no snapshot was written: recovery from one untested"
            assert 0 < snapshot[0] <= store.last_seq()
