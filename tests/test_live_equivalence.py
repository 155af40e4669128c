"""Live / simulator equivalence with real processes: a controller recording a live run
(arrivals, completions, a failing job, a held and released job, a host closed midway
with `xce host close` and opened again, a running and a pending job killed) over more
than 50 sessions; the simulator then replays the recording without any divergence, and
runs the recorded jobs as a workload.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from live import LiveCluster, live_cluster, skip_unless_linux, wait_for

from xce.sim.replay import replay

pytestmark = skip_unless_linux

MIN_SESSIONS = 50
CONFIG = """\
cluster: t
session_interval: 0.1
resources:
  mem: {type: numeric, consumable: true}
hosts:
  - {name: n1, slots: 2, resources: {mem: 8000}}
  - {name: n2, slots: 2, resources: {mem: 8000}}
queues:
  - {name: normal, priority: 30}
  - {name: high, priority: 50}
"""
FINISHED = ("DONE", "EXIT")


def sleep(seconds: float, code: int = 0) -> list[str]:
    return ["sh", "-c", f"sleep {seconds}; exit {code}"]


def session_number(cluster: LiveCluster) -> int:
    return int(cluster.ok("GET", "/demand")["session"])


def test_recorded_live_run_replays_without_divergence(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    with live_cluster(tmp_path, CONFIG) as cluster:
        cluster.start_controller(record=recording)
        cluster.start_agent("n1", wait=False)
        cluster.start_agent("n2", wait=False)
        wait_for(lambda: all(h["state"] == "ok" for h in cluster.hosts().values()), 20,
                 "both agents to register")

        # First wave: more work than slots, of several shapes.
        long_running = cluster.submit(["sleep", "60"], name="victim")
        wave = [
            cluster.submit(sleep(0.3)),
            cluster.submit(sleep(0.5), n=2, res="rusage[mem=3000]"),
            cluster.submit(sleep(0.2, code=3)),
            cluster.submit(sleep(0.4), n=3, queue="high"),
            cluster.submit(sleep(0.2), n=2, res="span[hosts=1]"),
            cluster.submit(sleep(0.3), res="select[mem>4000] rusage[mem=1000]"),
        ]
        held = cluster.submit(sleep(0.2), hold=True)
        cluster.wait_state(long_running, "RUN")
        wait_for(lambda: sum(cluster.job(j)["state"] in FINISHED for j in wave) >= 2, 20,
                 "some of the first wave to finish")
        # The 3-slot job needs both hosts: it must have started before n1 closes.
        wait_for(lambda: cluster.job(wave[3])["state"] in ("RUN", *FINISHED), 20,
                 "the 3-slot job to start")

        # Midway: close n1 (CLI), release the held job, more arrivals.
        closed = cluster.xce("host", "close", "n1")
        assert closed.returncode == 0, closed.stderr
        cluster.ok("POST", f"/jobs/{held}/resume")
        wave += [cluster.submit(sleep(0.2)) for _ in range(4)]
        wave.append(held)
        too_big_now = cluster.submit(["true"], n=4, name="pending-victim")
        wait_for(lambda: cluster.job(too_big_now)["pend_kind"] == "resource", 10,
                 "the 4-slot job to pend (n1 is closed)")
        # Kill one running and one pending job.
        killed = cluster.xce("kill", str(long_running), str(too_big_now))
        assert killed.returncode == 0, killed.stderr
        wait_for(lambda: all(cluster.job(j)["state"] in FINISHED for j in wave), 30,
                 "every other job to finish")
        assert all(cluster.job(j)["exec_hosts"].keys() == {"n2"} for j in wave[-5:])
        opened = cluster.xce("host", "open", "n1")
        assert opened.returncode == 0, opened.stderr
        last = [cluster.submit(sleep(0.1), n=2) for _ in range(2)]
        for job_id in last:
            cluster.wait_state(job_id, FINISHED)
        wave += last
        wait_for(lambda: session_number(cluster) >= MIN_SESSIONS + 5, 30, "enough sessions")
        wait_for(lambda: all(h["used"] == 0 for h in cluster.hosts().values()), 10, "idle")
        jobs = {j["id"]: j for j in cluster.jobs()}
        cluster.stop_controller(signal.SIGTERM)  # a clean stop closes the recording

    finished_live = [j for j in jobs.values()
                     if j["state"] in FINISHED and j["exit_reason"] != "killed"]
    assert {j["id"] for j in finished_live} == set(wave)
    assert [j["exit_code"] for j in jobs.values() if j["state"] == "EXIT"].count(3) == 1
    assert jobs[long_running]["exit_reason"] == jobs[too_big_now]["exit_reason"] == "killed"
    assert jobs[long_running]["start_time"] is not None
    assert jobs[too_big_now]["start_time"] is None

    kinds = [json.loads(line).get("e", {}).get("event") for line in
             recording.read_text().splitlines()[1:]]
    for kind in ("ConfigLoaded", "JobSubmitted", "JobStarted", "JobFinished", "JobKilled",
                 "JobHeld", "HostStateChanged"):
        assert kind in kinds, kind

    report = replay(recording)
    assert report.divergence is None, str(report.divergence)
    assert report.sessions >= MIN_SESSIONS
    assert report.events == sum(k is not None for k in kinds)

    shown = cluster.run("sim", "replay", str(recording))
    assert shown.stdout.strip() == (
        f"replayed {report.sessions} sessions and {report.events} events: no divergence")

    ran = cluster.run("sim", "run", str(cluster.config_path), "--workload", str(recording),
                      "--json")
    summary: dict[str, Any] = json.loads(ran.stdout)
    assert summary["jobs"] == len(finished_live)
    assert summary["finished"] == len(finished_live)
    assert summary["skipped"] == 2  # the two killed jobs
    assert summary["too_large"] == 0
