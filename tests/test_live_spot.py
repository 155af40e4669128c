"""EC2's spot interruption notice, live: a real controller, two real agents, one of them
started with `--spot-metadata URL` where the test serves the instance metadata service
(IMDSv2, aiohttp on loopback). While that host runs a job, the notice appears: the
agent tells the controller at once, the host is closed (`closed_Recl`) and its job is
requeued, runs again on the other host, and what ran on the spot host is killed, all
before the two minutes are over.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from ec2_cloud import MetadataService
from live import FAST, LiveCluster, live_cluster, marked_pids, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: spot
session_interval: 0.2
hosts:
  - {name: spot1, slots: 1}
  - {name: n2, slots: 1}
queues:
  - {name: normal, priority: 30}
"""


@pytest.fixture
def metadata() -> Iterator[MetadataService]:
    service = MetadataService()
    try:
        yield service
    finally:
        service.close()


def start_spot_agent(cluster: LiveCluster, name: str, metadata: str) -> None:
    cluster._spawn(name, [
        "agent", "--controller", cluster.url, "--name", name, "--slots", "1",
        "--token-file", str(cluster.tokens[name]), "--state-dir",
        str(cluster.root / f"agent-{name}"), "--kill-grace", "1",
        "--spot-metadata", metadata, "--spot-poll", "0.2",
    ])
    wait_for(lambda: cluster.host(name)["state"] == "ok", 20, f"agent {name} to register")


def test_a_spot_notice_drains_the_host_and_requeues_its_job(
        tmp_path: Path, metadata: MetadataService) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("spot1", "n2")) as cluster:
        cluster.start_controller(extra=FAST)
        start_spot_agent(cluster, "spot1", metadata.url)
        flag = tmp_path / "ran-once"
        # Long the first time (it leaves `flag` and its pid), at once when run again.
        job = cluster.submit(["sh", "-c", f"if [ -e {flag} ]; then exit 0; fi; "
                              f"echo $$ > {flag}; exec sleep 60"])
        assert cluster.wait_state(job, "RUN")["exec_hosts"] == {"spot1": 1}
        wait_for(lambda: flag.exists() and flag.read_text().strip(), 10, "the job to start")
        first_run = int(flag.read_text())
        cluster.start_agent("n2", slots=1)
        wait_for(lambda: metadata.reads >= 2, 10, "the agent to read the metadata service")
        assert cluster.host("spot1")["status"] == "ok", "no notice yet (404): nothing changes"
        for bad in ({"reclaim_at": "soon"}, {"reclaim_at": -5}):
            answer = cluster.api("POST", "/agents/spot1/heartbeat", bad, who="spot1")
            assert answer.status == 400 and "reclaim_at" in answer.json["error"], answer
        assert cluster.host("spot1")["status"] == "ok", "a refused heartbeat changes nothing"

        metadata.announce(120)
        host = wait_for(lambda: (h := cluster.host("spot1"))["status"] == "closed_Recl" and h,
                        10, "the notice to close the spot host")
        assert host["reason"] == "reclaim"
        done = cluster.wait_state(job, "DONE", timeout=20)
        assert done["exec_hosts"] == {"n2": 1}, "requeued, and run on the other host"
        wait_for(lambda: not os.path.exists(f"/proc/{first_run}"), 10,
                 "the run on the spot host to be killed")
        log = cluster.log_tail("controller", 100_000)
        assert f"job {job} host spot1 reclaim notice: requeued" in log
        assert "spot interruption notice: EC2 takes this host back" in cluster.log_tail(
            "spot1", 10_000)
        assert metadata.tokens and metadata.refused == 0, "IMDSv2: a session token first"
        assert metadata.authorization == [], "the agent's token never leaves for the IMDS"
        assert cluster.host("spot1")["jobs"] == []
    assert not marked_pids(cluster.mark)
