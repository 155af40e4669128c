"""Issue 18, live: hosts obtained for a wide job go to that job.

A controller, a static host n1 (1 slot), a burst template of the `local` provider (2
slots, at most 3 hosts, a configured lead time of 10 s), and a provisioner running the
policy. One wide job (6 slots, two per host: `span[ptile=2]`, so n1 can never take part)
can only run on three burst hosts; after it, a stream of 1-slot jobs with a 60 s run
limit, from a queue with backfill. Each small job would fit on a burst host the moment
it joins, but the hosts were requested for the wide job: a small job may use one only
as backfill ending before the wide job's planned start (the third host's arrival, at
most the lead time away), which a 60 s limit never does. So:

* the wide job runs on the three burst hosts (its execution hosts, API and `xce jobs
  -l`);
* the small jobs never delay it: it starts as soon as the third burst host joins,
  within a session interval, and no small job started on a burst host before it;
* no burst host is given back unused: every provisioned host ran a job before it was
  decommissioned.

It also checks that the request names the wide job first and that the provisioner
published the observed lead time once the hosts joined.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from live import FAST, LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

SESSION = 0.5  # session_interval
CONFIG = f"""\
cluster: issue18
session_interval: {SESSION}
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: normal, priority: 30, backfill: true, run_limit: 60}}
catalog:
  idle_time: 3
  templates:
    - {{name: burst, provider: local, slots: 2, max: 3, expected_lead_time: 10}}
policy:
  persistence: 0.5
  max_requests_per_round: 1  # one host per round: the hosts join one by one
  max_lifetime: 0
"""
WIDE: dict[str, Any] = {"n": 6, "res": "span[ptile=2]", "run_limit": 30}
STREAM_GAP = 0.3  # s between small jobs
MOST_SMALL = 40  # small jobs at most, should the wide job never start
SLACK = 0.25  # s for the session itself and the dispatch to be recorded
ROUND = 1.5  # s between provisioner rounds: the burst hosts join about that far apart


def start_provisioner(cluster: LiveCluster, work: Path) -> None:
    cluster.add_token("provisioner", "prov")
    cluster._spawn("provisioner", [
        "provisioner", "run", "--controller", cluster.url, "--token-file",
        str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
        "--work", str(work), "--name", "prov-a", "--interval", str(ROUND),
    ])


def stream_until_started(cluster: LiveCluster, wide: int) -> list[int]:
    """Submit 1-slot jobs, one every STREAM_GAP s, until the wide job runs (then a few
    more, so that some are pending when the wide job takes the hosts)."""
    small: list[int] = []
    deadline = time.monotonic() + 60
    started_at: float | None = None
    while time.monotonic() < deadline and len(small) < MOST_SMALL:
        small.append(cluster.submit(["sleep", "0.5"]))
        if started_at is None and cluster.job(wide)["state"] != "PEND":
            started_at = time.monotonic()
        if started_at is not None and time.monotonic() - started_at > 1:
            break
        time.sleep(STREAM_GAP)
    return small


def decommissioned_at(cluster: LiveCluster) -> dict[str, float]:
    """host -> when it was decommissioned, from the controller's history of supply."""
    found: dict[str, float] = {}
    for entry in cluster.ok("GET", "/history?limit=0")["history"]:
        match = re.match(r"host (\S+) decommissioned", entry["text"])
        if match:
            found[match.group(1)] = entry["time"]
    return found


def test_burst_hosts_requested_for_a_wide_job_run_it(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.start_controller(extra=FAST)
        cluster.start_agent("n1", slots=1)
        start_provisioner(cluster, tmp_path / "provider")
        wide = cluster.submit(["sleep", "4"], **WIDE)
        small = stream_until_started(cluster, wide)
        running = cluster.wait_state(wide, ("RUN", "DONE"), timeout=30)
        hosts = cluster.hosts()  # the burst hosts are alive while the wide job runs
        joined = {name: hosts[name]["joined"] for name in running["exec_hosts"]
                  if name in hosts}
        for job in [wide, *small]:
            assert cluster.wait_state(job, "DONE", timeout=60)["state"] == "DONE"
        wait_for(lambda: not any(h.startswith("burst-") for h in cluster.hosts()), 60,
                 "the burst hosts to be given back")
        jobs = {job: cluster.job(job) for job in [wide, *small]}
        check_wide_job(cluster, jobs[wide], joined)
        check_small_jobs(jobs, wide, small, joined)
        check_no_host_unused(cluster, jobs, wide)


def check_wide_job(cluster: LiveCluster, info: dict[str, Any],
                   joined: dict[str, float]) -> None:
    burst = sorted(info["exec_hosts"])
    assert len(burst) == 3 and all(h.startswith("burst-") for h in burst), info
    assert info["exec_hosts"] == {h: 2 for h in burst}, "two slots on each burst host"
    assert sorted(joined) == burst, joined
    last = max(joined.values())
    assert last <= info["start_time"] <= last + SESSION + SLACK, (
        f"the wide job started {info['start_time'] - last:.2f} s after the third burst "
        f"host joined: it should start in the first session after ({SESSION} s)")
    shown = cluster.xce("jobs", "-l", str(info["id"]), check=True).stdout
    [line] = [line for line in shown.splitlines() if ": Started 6 Task(s) on Host(s) " in line]
    assert all(f"<2*{h}>" in line for h in burst), line
    before = [r for r in cluster.ok("GET", "/requests?all=1")["requests"]
              if r["created"] < info["start_time"]]
    assert sum(r["count"] for r in before) == 3, before
    assert all(r["template"] == "burst" and r["jobs"][:1] == [info["id"]] for r in before), (
        f"every burst host was requested for the wide job first: {before}")
    [template] = cluster.ok("GET", "/catalog")["templates"]
    assert template["runtime_lead_time"] is not None, "the observed lead time is published"
    assert template["lead_time"] == template["runtime_lead_time"]


def check_small_jobs(jobs: dict[int, dict[str, Any]], wide: int, small: list[int],
                     joined: dict[str, float]) -> None:
    start = jobs[wide]["start_time"]
    first_join = min(joined.values())
    tempted = [j for j in small if jobs[j]["submit_time"] < first_join
               and jobs[j]["start_time"] > first_join]
    assert tempted, ("no small job was waiting when the first burst host joined: the "
                     "check would not be meaningful")
    early = {j: jobs[j]["exec_hosts"] for j in small if jobs[j]["start_time"] < start}
    assert all(hosts == {"n1": 1} for hosts in early.values()), (
        f"small jobs took burst hosts held for the wide job {wide}: {early}")


def check_no_host_unused(cluster: LiveCluster, jobs: dict[int, dict[str, Any]],
                         wide: int) -> None:
    requests = cluster.ok("GET", "/requests?all=1")["requests"]
    provisioned = [i["host"] for r in requests for i in r["instances"]]
    assert provisioned and all(i["joined"] for r in requests for i in r["instances"]), \
        requests
    gone = decommissioned_at(cluster)
    for host in provisioned:
        ran = [j for j, info in jobs.items() if host in info["exec_hosts"]
               and info["start_time"] < gone.get(host, float("inf"))]
        assert ran, f"burst host {host} was given back without running a job"
    assert set(jobs[wide]["exec_hosts"]) <= set(provisioned)
