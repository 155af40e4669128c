"""Failover of the controller (docs/ha.md) with real processes: two controllers on one
PostgreSQL log (a private server), two real agents running jobs, submissions at
~200/s through the CLI's client given both URLs (tests/failover.py).

1. The leader is killed -9 under load: the standby leads within 10 s; no acknowledged
   submission is lost; no job runs (or is started in the log) twice; the jobs running
   through the takeover end DONE, never restarted.
2. The new leader is stopped (SIGSTOP) while a fresh standby runs: not seen for the
   lease (5 s), it is deposed (its sessions ended, the term raised) and the standby
   leads; resumed (SIGCONT), the old leader cannot write (a submission to it is not
   acknowledged, and is not in the log) and steps down (exit 75).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psycopg
from failover import (
    CONFIG,
    TIMINGS,
    Load,
    exit_status,
    long_jobs,
    running,
    stop_process,
    verdict,
    wait_leading,
)
from live import live_cluster, skip_unless_linux, wait_for
from pg_server import PrivatePostgres

from xce.controller.leadership import STEPPED_DOWN

pytestmark = skip_unless_linux


def test_failover_under_load(tmp_path: Path, postgres: PrivatePostgres) -> None:
    store = postgres.new_database()
    runlog = tmp_path / "RUNLOG"
    runlog.touch()
    extra = (*TIMINGS, "--store", store)
    with live_cluster(tmp_path, CONFIG) as cluster:
        first = cluster.start_controller(extra=extra)
        wait_leading(cluster, first)
        standby = cluster.start_controller(extra=extra, key="b")
        assert wait_for(lambda: cluster.api("GET", "/jobs", url=standby).json["leader"],
                        10, "the standby to know the leader") == first
        assert cluster.api("GET", "/jobs", url=standby).json == {
            "error": f"this controller is a standby: the leader is {first}",
            "status": 503, "leader": first}
        urls = f"{first},{standby}"
        for name in ("n1", "n2"):
            cluster.start_agent(name, slots=4, controller=urls)
        long = running(cluster, first, long_jobs(cluster, first, runlog, 4, 10.0))
        load = Load(cluster, urls, runlog)
        load.start()
        time.sleep(3.0)
        killed = time.monotonic()
        cluster.stop("controller", signal.SIGKILL)
        took = wait_leading(cluster, standby)
        time.sleep(2.0)
        load.finish()
        figures = verdict(cluster, standby, store, load, runlog, long)
        rate = load.rate(killed - 2.0, killed)
        print(f"takeover after kill -9: {took:.2f} s; {rate:.0f} submissions/s before; "
              f"{figures}")
        assert took <= 10.0
        assert rate >= 100, rate  # (200/s asked: this shared machine often gives less)

        # 2. a deposed leader, stopped then resumed, cannot write and steps down
        fresh = cluster.start_controller(extra=extra, key="c")
        time.sleep(1.5)  # (it follows the log)
        stop_process(cluster, "b", signal.SIGSTOP)
        took = wait_leading(cluster, fresh, timeout=30)
        stop_process(cluster, "b", signal.SIGCONT)
        try:
            answer = cluster.api("POST", "/jobs", {"command": ["true"], "name": "deposed"},
                                 url=standby, timeout=10)
            assert answer.status != 201, answer.json
        except OSError:
            pass  # (it stepped down first)
        assert exit_status(cluster, "b", 15) == STEPPED_DOWN, cluster.log_tail("b")
        assert "stepping down" in cluster.log_tail("b")
        with psycopg.connect(store) as conn:
            term, holder = conn.execute("SELECT term, holder FROM leader").fetchone()
        assert (term, holder) == (3, fresh)
        names = {j["name"] for j in cluster.api(
            "GET", "/jobs?user=all&state=all", url=fresh).json["jobs"]}
        assert "deposed" not in names
        print(f"takeover of a stopped leader (lease 5 s): {took:.2f} s")


def metric(text: str, name: str) -> float:
    """The value of the sample `name` (with its labels) in an exposition."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in:\n{text}")


def test_status_takeover_and_metrics(tmp_path: Path, postgres: PrivatePostgres) -> None:
    """`xce controller status`, the metrics of the term and lag, `xce admin takeover`
    (a planned switch) and its refusal when no standby could take over."""
    store = postgres.new_database()
    extra = (*TIMINGS, "--store", store)
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        first = cluster.start_controller(extra=extra)
        wait_leading(cluster, first)
        standby = cluster.start_controller(extra=extra, key="b")
        for i in range(5):
            cluster.ok("POST", "/jobs", {"command": ["true"], "name": f"j{i}", "hold": True})
        def caught_up() -> str | None:
            out: str = cluster.run("controller", "status", "--store", store).stdout
            rows = {line.split()[0]: line.split()[1:5]
                    for line in out.splitlines()[2:] if line.strip()}
            return out if rows.get(standby, ["", "", "", ""])[3] == "0" else None

        shown = wait_for(caught_up, 10, "the standby to have applied every fact")
        lines = shown.splitlines()
        assert lines[0].startswith(f"leader: {first} (term 1, since ")
        last = int(lines[0].rsplit(" ", 1)[1])
        assert last >= 6  # the configuration, and the five jobs
        rows = {line.split()[0]: line.split()[1:5] for line in lines[2:]}
        assert rows == {first: ["leader", "1", str(last), "0"],
                        standby: ["standby", "0", str(last), "0"]}, shown
        data = json.loads(cluster.run("controller", "status", "--store", store, "--json").stdout)
        assert (data["leader"], data["term"], data["last_seq"]) == (first, 1, last)

        def scrape(url: str) -> str:
            answer = cluster.api("GET", "/metrics", url=url)
            assert answer.status == 200, answer.raw[:300]
            return answer.raw.decode()

        lag = f'xce_standby_lag_facts{{controller="{standby}"}}'

        def caught_up_on_leader() -> str | None:
            # (the leader's view of a standby is up to a second old: ha_metrics.py)
            text = scrape(first)
            return text if lag + " " in text and metric(text, lag) == 0 else None

        on_leader = wait_for(caught_up_on_leader, 10, "the leader to see the standby caught up")
        assert (metric(on_leader, "xce_leader"), metric(on_leader, "xce_leader_term")) == (1, 1)
        assert metric(scrape(standby), "xce_leader") == 0

        def jobs_via(controllers: str) -> int:
            """How many jobs `xce jobs` shows, given these controller URLs."""
            env = dict(cluster.env, XCE_CONTROLLER=controllers,
                       XCE_TOKEN_FILE=str(cluster.tokens["admin"]))
            shown = cluster.run("jobs", "-u", "all", "--json", env=env).stdout
            return len(json.loads(shown)["jobs"])

        assert jobs_via(standby) == 5  # the standby's answer names the leader: followed

        done = cluster.run("admin", "takeover", "--store", store)
        assert done.stdout.strip() == f"{standby} leads in term 2 ({first} led term 1)"
        assert exit_status(cluster, "controller", 15) == STEPPED_DOWN
        wait_leading(cluster, standby)
        assert len(cluster.api("GET", "/jobs?user=all", url=standby).json["jobs"]) == 5
        assert jobs_via(f"{first},{standby}") == 5  # the first refuses: the next one

        refused = cluster.run("admin", "takeover", "--store", store, check=False)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"Error: {store}: no live standby to take over from {standby} (start one first: "
            "it would be left without a leader)")
        bad = cluster.run("controller", "status", "--store", "mysql://x/y", check=False)
        assert (bad.returncode, bad.stderr.strip()) == (
            1, "Error: --store mysql://x/y: expected a postgresql:// URL")
