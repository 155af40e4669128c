"""Elastic hosts end to end, with real processes: a controller whose catalog has a
template `cloud` (4 slots, resource `cloud`, provider aws, at most 3 hosts), hosts
expected from it (`POST /hosts/expected`, `xce host expect`), agents joining with the
join token, the host lifecycle (failed, cancelled, closed with a reason, drained,
decommissioned, removed), idle supply, a controller killed -9 between lifecycle
steps, and a recorded run the simulator replays without divergence.

Jobs that need a cloud host ask for `select[cloud]`: the static host n1 never has it.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from live import LiveCluster, free_port, live_cluster, skip_unless_linux, wait_for

from xce.sim.replay import replay

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  cloud: {type: boolean}
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 2
  templates:
    - {name: cloud, provider: aws, slots: 4, max: 3, resources: {cloud: true}}
"""
CLOUD = "select[cloud]"
# Agents that join by API only do not heartbeat: keep them from becoming unreach.
QUIET = ("--heartbeat-interval", "0.3", "--unreach-after", "60", "--requeue-after", "120")
EXPECTED = re.compile(r"^Host <([\w.-]+)> expected until (.+); join token: (xcej_\S+)$")
NO_DEMAND: dict[str, list[Any]] = {"hosts": [], "resources": []}


# ---------------------------------------------------------------- helpers
def hold(name: str) -> list[str]:
    """A job that runs until the file `name` exists in the test directory."""
    return ["sh", "-c", f"while [ ! -e {name} ]; do sleep 0.05; done"]


def session(cluster: LiveCluster) -> int:
    return int(cluster.ok("GET", "/demand")["session"])


def settled(cluster: LiveCluster, what: str = "demand") -> dict[str, Any]:
    """`what` (demand or idle) of a session that started after everything so far:
    the session running now may predate the last change, the one after it does not."""
    first = session(cluster)
    answer: dict[str, Any] = wait_for(
        lambda: (a := cluster.ok("GET", f"/{what}"))["session"] >= first + 2 and a,
        10, f"two more sessions after {first}")
    return answer


def cloud_demand(count: int, in_flight_used: int, jobs: list[int]) -> dict[str, Any]:
    return {"hosts": [{"template": "cloud", "count": count, "in_flight_used": in_flight_used,
                       "jobs": jobs}], "resources": []}


def expect(cluster: LiveCluster, deadline: float = 60, who: str = "admin",
           request: str = "") -> dict[str, Any]:
    """An expected host of `cloud` (POST /hosts/expected); its token is kept under the
    host's name (`cluster.start_agent(name)` then joins with it)."""
    made: dict[str, Any] = cluster.ok(
        "POST", "/hosts/expected",
        {"template": "cloud", "request": request, "deadline": deadline}, who)
    keep_token(cluster, made["name"], made["join_token"])
    return made


def keep_token(cluster: LiveCluster, key: str, token: str) -> Path:
    path = cluster.root / f"join-{key}.token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    cluster.tokens[key] = path
    return path


def register(cluster: LiveCluster, name: str, who: str, slots: int = 1) -> Any:
    """What an agent sends to join or come back (no running job)."""
    return cluster.api("POST", f"/agents/{name}/register", {"slots": slots, "running": []},
                       who)


def error(status: int, message: str) -> dict[str, Any]:
    return {"error": message, "status": status}


def host_lines(cluster: LiveCluster, who: str = "admin") -> list[list[str]]:
    shown = cluster.xce("hosts", who=who)
    assert shown.returncode == 0, shown.stderr
    return [line.split() for line in shown.stdout.splitlines()]


def block(long: str, host: str) -> list[str]:
    """The lines of HOST's block in `xce hosts -l`."""
    blocks = [b.splitlines() for b in long.strip().split("\n\n")]
    [found] = [b for b in blocks if b[0] == f"HOST  {host}"]
    return found


def field(lines: list[str], key: str) -> str:
    [value] = [line[len(key):].strip() for line in lines if line.split()[0] == key]
    return value


# ---------------------------------------------------------------- joining
def test_expected_host_is_in_flight_supply_and_joins_as_its_template(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.start_controller()
        first = cluster.submit(hold("go"), n=2, res=CLOUD)
        second = cluster.submit(hold("go"), n=2, res=CLOUD)
        # Both fit on one new host of the template.
        assert settled(cluster)["demand"] == cloud_demand(1, 0, [first, second])
        assert cluster.job(first)["pend_reason"] == (
            "Waiting for provisioning: fits on template cloud (1 new host requested this session)")

        before = time.time()
        made = cluster.xce("host", "expect", "cloud", "--request", "r-17", "--deadline", "30")
        after = time.time()
        assert made.returncode == 0, made.stderr
        match = EXPECTED.match(made.stdout.strip())
        assert match is not None, made.stdout
        name, token = match.group(1), match.group(3)
        assert name == "cloud-1"
        keep_token(cluster, name, token)
        shown = cluster.host(name)
        assert before + 30 <= shown["deadline"] <= after + 30
        assert {k: shown[k] for k in ("state", "status", "template", "provider", "request",
                                      "slots", "used", "resources", "jobs", "joined",
                                      "last_heartbeat")} == {
            "state": "expected", "status": "expected", "template": "cloud", "provider": "aws",
            "request": "r-17", "slots": 4, "used": 0, "resources": {"cloud": True},
            "jobs": [], "joined": None, "last_heartbeat": None}

        # In flight: the next session counts on it instead of asking for a new host.
        assert settled(cluster)["demand"] == cloud_demand(0, 1, [first, second])
        for job in (first, second):
            info = cluster.job(job)
            assert (info["state"], info["pend_kind"], info["pend_reason"]) == (
                "PEND", "provisioning",
                "Waiting for provisioning: fits on template cloud (1 host in flight)")
        lines = host_lines(cluster)
        assert lines[:5] == [["HOST_NAME", "STATUS", "MAX", "NJOBS", "RUN"],
                             ["n1", "unavail", "1", "0", "0"],
                             ["cloud-1", "expected", "4", "0", "0"],
                             [],
                             ["EXPECTED_HOST", "STATUS", "TEMPLATE", "PROVIDER", "REQUEST",
                              "DEADLINE"]]
        assert lines[5][:5] == ["cloud-1", "expected", "cloud", "aws", "r-17"]
        assert len(lines) == 6
        long = cluster.xce("hosts", "-l")
        assert long.returncode == 0, long.stderr
        lines = block(long.stdout, "cloud-1")
        assert [field(lines, k) for k in ("TEMPLATE", "PROVIDER", "REQUEST", "RESOURCES")] == [
            "cloud", "aws", "r-17", "cloud"]
        assert field(lines, "DEADLINE") != "-"

        # The agent says 1 slot: the template's shape wins.
        started = time.time()
        cluster.start_agent(name, slots=1)
        for job in (first, second):
            assert cluster.wait_state(job, "RUN")["exec_hosts"] == {name: 2}
        joined = cluster.host(name)
        assert {k: joined[k] for k in ("state", "status", "reason", "template", "provider",
                                       "slots", "used", "resources", "deadline")} == {
            "state": "ok", "status": "ok", "reason": "joined", "template": "cloud",
            "provider": "aws", "slots": 4, "used": 4, "resources": {"cloud": True},
            "deadline": None}
        assert started <= joined["joined"] <= time.time()
        assert sorted(joined["jobs"]) == [first, second]
        assert settled(cluster)["demand"] == NO_DEMAND

        # The agent goes on heartbeating with the join token; the jobs end there.
        beat = cluster.host(name)["last_heartbeat"]
        wait_for(lambda: cluster.host(name)["last_heartbeat"] != beat, 5, "a heartbeat")
        (cluster.root / "go").touch()
        for job in (first, second):
            info = cluster.wait_state(job, ("DONE", "EXIT"))
            assert (info["state"], info["exec_hosts"]) == ("DONE", {name: 2})
        assert "unknown or revoked token" not in cluster.log_tail(name, 1000)


def test_join_tokens_are_checked(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.start_controller(extra=QUIET)
        one, two = expect(cluster), expect(cluster)
        late = expect(cluster, deadline=1)
        assert [one["name"], two["name"], late["name"]] == ["cloud-1", "cloud-2", "cloud-3"]
        assert len({one["join_token"], two["join_token"], late["join_token"]}) == 3
        before = cluster.hosts()

        # A wrong token: 401, nothing changes.
        keep_token(cluster, "wrong", "xcej_" + "A" * 43)
        for name in ("cloud-1", "cloud-2"):
            refused = register(cluster, name, "wrong")
            assert (refused.status, refused.json) == (401, error(401, "unknown or revoked token"))
        assert cluster.hosts() == before

        # A join token speaks for its own host only, and is no one's else credential.
        refused = register(cluster, "cloud-2", "cloud-1")
        assert (refused.status, refused.json) == (
            403, error(403, "agent cloud-1 may only speak for its own host, not cloud-2"))
        refused = cluster.api("GET", "/hosts", who="cloud-1")
        assert (refused.status, refused.json) == (403, error(403, "role agent may not GET /hosts"))
        refused = cluster.api("POST", "/hosts/expected", {"template": "cloud"}, "cloud-1")
        assert refused.status == 403
        beat = cluster.api("POST", "/agents/cloud-1/heartbeat", {}, "cloud-1")
        assert (beat.status, beat.json) == (
            409, error(409, "host cloud-1 is not registered: register first"))
        assert cluster.hosts() == before

        # Past its deadline the token is refused (before and after the host is failed).
        time.sleep(max(0.0, late["deadline"] - time.time()) + 0.05)
        refused = register(cluster, "cloud-3", "cloud-3")
        assert (refused.status, refused.json) == (401, error(401, "unknown or revoked token"))
        wait_for(lambda: cluster.host("cloud-3")["state"] == "failed", 5, "cloud-3 to fail")
        refused = register(cluster, "cloud-3", "cloud-3")
        assert (refused.status, refused.json) == (401, error(401, "unknown or revoked token"))

        # It joins; from then on its token is that host's credential, nothing more.
        joined = register(cluster, "cloud-1", "cloud-1", slots=7)
        assert joined.status == 200, joined
        host = cluster.host("cloud-1")
        assert (host["state"], host["slots"], host["template"]) == ("ok", 4, "cloud")
        refused = register(cluster, "cloud-2", "cloud-1")
        assert (refused.status, refused.json) == (
            403, error(403, "agent cloud-1 may only speak for its own host, not cloud-2"))
        assert cluster.host("cloud-2")["state"] == "expected"
        beat = cluster.api("POST", "/agents/cloud-1/heartbeat", {}, "cloud-1")
        assert beat.status == 200, beat
        again = register(cluster, "cloud-1", "cloud-1")  # an agent's restart: same host
        assert again.status == 200, again
        assert [h["name"] for h in cluster.hosts().values() if h["template"]] == [
            "cloud-1", "cloud-2", "cloud-3"]
        # The other expected host still joins with its own token.
        assert register(cluster, "cloud-2", "cloud-2").status == 200
        assert cluster.host("cloud-2")["state"] == "ok"


# ---------------------------------------------------------------- failed, cancelled
def test_deadline_failure_remove_and_cancel(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.start_controller(extra=QUIET)
        job = cluster.submit(["true"], n=4, res=CLOUD)
        assert settled(cluster)["demand"] == cloud_demand(1, 0, [job])

        soon = expect(cluster, deadline=1.5)
        assert settled(cluster)["demand"] == cloud_demand(0, 1, [job])
        failed = wait_for(lambda: (h := cluster.host(soon["name"]))["state"] == "failed" and h,
                          5, "the expected host to fail")
        assert (failed["status"], failed["reason"]) == ("failed", "join deadline passed")
        assert ["cloud-1", "failed", "4", "0", "0"] in host_lines(cluster)
        # Its in-flight count is gone: the job asks for a new host again.
        assert settled(cluster)["demand"] == cloud_demand(1, 0, [job])
        refused = cluster.api("POST", "/hosts/cloud-1/decommission")
        assert (refused.status, refused.json) == (
            409, error(409, "host cloud-1 is failed: it has not joined"))

        pending = expect(cluster)  # cloud-2, in flight
        assert settled(cluster)["demand"] == cloud_demand(0, 1, [job])
        cleared = cluster.xce("host", "remove", "cloud-1")
        assert (cleared.returncode, cleared.stdout.strip()) == (0, "Host <cloud-1> removed.")
        assert list(cluster.hosts()) == ["n1", "cloud-2"]
        # Clearing the failed host leaves the other one in flight.
        assert settled(cluster)["demand"] == cloud_demand(0, 1, [job])
        again = cluster.api("POST", "/hosts/cloud-1/remove")
        assert (again.status, again.json) == (404, error(404, "host cloud-1: no such host"))

        # Cancelling the expected host: out of the in-flight count at once.
        refused = cluster.api("POST", f"/hosts/{pending['name']}/close")
        assert (refused.status, refused.json) == (
            409, error(409, "host cloud-2 is expected: it has not joined"))
        cancelled = cluster.api("POST", f"/hosts/{pending['name']}/remove")
        assert (cancelled.status, cancelled.json) == (200, {"hosts": []})
        assert list(cluster.hosts()) == ["n1"]
        assert settled(cluster)["demand"] == cloud_demand(1, 0, [job])
        refused = register(cluster, "cloud-2", "cloud-2")  # its token died with it
        assert (refused.status, refused.json) == (401, error(401, "unknown or revoked token"))
        assert expect(cluster)["name"] == "cloud-3"  # names are never reused


# ---------------------------------------------------------------- drain, decommission
def test_drain_decommission_and_remove(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=(), users=("alice",)) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller()
        cluster.lease("prov", "aws")
        refused = cluster.api("POST", "/hosts/expected", {"template": "cloud"}, "alice")
        assert (refused.status, refused.json) == (
            403, error(403, "role user may not POST /hosts/expected"))
        refused = cluster.api("POST", "/hosts/expected", {"template": "nosuch"}, "prov")
        assert (refused.status, refused.json) == (
            404, error(404, "template nosuch: no such template in the catalog"))
        name = expect(cluster, who="prov")["name"]
        cluster.start_agent(name, slots=1)
        long = cluster.submit(hold("release"), n=2, res=CLOUD)
        assert cluster.wait_state(long, "RUN")["exec_hosts"] == {name: 2}

        # Close (drain): the running job goes on, no new one starts there.
        closed = cluster.api("POST", f"/hosts/{name}/close", who="prov")
        assert closed.status == 200, closed
        assert (closed.json["state"], closed.json["status"]) == ("closed", "closed_Adm")
        late = cluster.submit(["true"], res=CLOUD)
        assert settled(cluster)["demand"] == cloud_demand(1, 0, [late])
        info = cluster.job(late)
        assert (info["state"], info["exec_hosts"]) == ("PEND", {})
        assert info["pend_reason"] == (
            "Waiting for provisioning: fits on template cloud (1 new host requested this session)")
        assert (cluster.host(name)["used"], cluster.job(long)["state"]) == (2, "RUN")

        busy = cluster.xce("host", "decommission", name, who="prov")
        assert (busy.returncode, busy.stderr.strip()) == (
            1, f"xce: host {name} still runs job(s) {long}: drain it first")
        refused = cluster.api("POST", f"/hosts/{name}/decommission", who="prov")
        assert (refused.status, refused.json) == (
            409, error(409, f"host {name} still runs job(s) {long}: drain it first"))
        refused = cluster.api("POST", f"/hosts/{name}/remove", who="prov")
        assert (refused.status, refused.json) == (409, error(
            409, f"host {name} is closed: it cannot become removed "
                 "(from closed: decommissioned, lost, ok, unreach)"))
        assert cluster.host(name)["state"] == "closed"

        (cluster.root / "release").touch()
        assert cluster.wait_state(long, ("DONE", "EXIT"))["state"] == "DONE"
        wait_for(lambda: cluster.host(name)["used"] == 0, 5, "the host to be empty")
        assert cluster.job(late)["state"] == "PEND"
        done = cluster.xce("host", "decommission", name, who="prov")
        assert (done.returncode, done.stdout.strip()) == (0, f"Host <{name}> decommissioned.")
        host = cluster.host(name)
        assert (host["state"], host["status"], host["reason"]) == (
            "decommissioned", "decommissioned", "decommissioned")
        refused = cluster.api("POST", f"/hosts/{name}/open", who="prov")
        assert (refused.status, refused.json) == (409, error(
            409, f"host {name} is decommissioned: only an ok or closed host can be opened "
                 "or closed"))
        # Its agent still runs: it is refused (409, no internal error), the host stays.
        wait_for(lambda: "HTTP 409: host cloud-1 is decommissioned" in cluster.log_tail(name),
                 10, "the agent to be refused")
        assert cluster.host(name)["state"] == "decommissioned"
        assert "internal error" not in cluster.log_tail("controller", 10_000)

        gone = cluster.xce("host", "remove", name, who="prov")
        assert (gone.returncode, gone.stdout.strip()) == (0, f"Host <{name}> removed.")
        assert list(cluster.hosts()) == ["n1"]
        refused = register(cluster, name, name)
        assert (refused.status, refused.json) == (401, error(401, "unknown or revoked token"))

        # Static hosts: not the provisioner's; not removable at all.
        for action in ("close", "decommission", "remove"):
            refused = cluster.api("POST", f"/hosts/n1/{action}", who="prov")
            assert (refused.status, refused.json) == (
                403, error(403, "role provisioner may not change host n1")), action
        refused = cluster.api("POST", "/hosts/n1/remove")
        assert (refused.status, refused.json) == (
            409, error(409, "host n1 is in the cluster file: edit the file instead"))
        for action in ("decommission", "reclaimed"):
            refused = cluster.api("POST", f"/hosts/n1/{action}")
            assert refused.status == 409, action
            assert refused.json["error"].startswith("host n1 is in the cluster file"), action
        assert cluster.host("n1")["state"] == "unavail"

        # The provider takes a busy host back: lost, its job requeued at once.
        spot = expect(cluster, who="prov", request="r-7")["name"]
        cluster.start_agent(spot, slots=1)
        victim = cluster.submit(hold("never"), n=2, res=CLOUD)
        assert cluster.wait_state(victim, "RUN")["exec_hosts"] == {spot: 2}
        assert cluster.host(spot)["request"] == "r-7"
        lost = cluster.api("POST", f"/hosts/{spot}/reclaimed", who="prov")
        assert lost.status == 200, lost
        assert (lost.json["state"], lost.json["reason"], lost.json["jobs"]) == (
            "lost", "reclaimed by the provider", [])
        assert cluster.job(victim)["state"] == "PEND"
        wait_for(lambda: f"HTTP 409: host {spot} was reclaimed" in cluster.log_tail(spot),
                 10, "the reclaimed host's agent to be refused")
        assert cluster.host(spot)["state"] == "lost"


# ---------------------------------------------------------------- idle supply, close reasons
def test_idle_supply_and_close_reasons(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.start_controller()
        name = expect(cluster)["name"]
        cluster.start_agent(name, slots=1)
        joined = cluster.host(name)["joined"]
        young = settled(cluster, "idle")
        assert young["time"] - joined < 2
        assert young["idle"] == {"hosts": [], "resources": []}

        # Idle for catalog.idle_time (2 s): reclaimable.
        idle = wait_for(lambda: (a := cluster.ok("GET", "/idle"))["idle"]["hosts"] and a, 10,
                        "the host to be idle")
        [entry] = idle["idle"]["hosts"]
        assert (entry["host"], entry["template"]) == (name, "cloud")
        assert 2 <= entry["idle_for"] < 2.5
        assert entry["idle_for"] == pytest.approx(idle["time"] - joined)
        assert cluster.host(name)["idle_since"] == pytest.approx(joined)

        # A job for it: no longer idle, neither while it runs nor right after.
        job = cluster.submit(hold("stop"), res=CLOUD)
        assert cluster.wait_state(job, "RUN")["exec_hosts"] == {name: 1}
        assert settled(cluster, "idle")["idle"] == {"hosts": [], "resources": []}
        assert cluster.host(name)["idle_since"] is None  # busy
        (cluster.root / "stop").touch()
        cluster.wait_state(job, "DONE")
        assert settled(cluster, "idle")["idle"] == {"hosts": [], "resources": []}

        # Closed with a reason: the STATUS column says which.
        for reason, label in (("idle", "closed_Idle"), ("lifetime", "closed_Life"),
                              ("reclaim", "closed_Recl"), ("admin", "closed_Adm")):
            closed = cluster.api("POST", f"/hosts/{name}/close?reason={reason}")
            assert closed.status == 200, closed
            assert (closed.json["status"], closed.json["reason"],
                    closed.json["closed_by_admin"]) == (label, reason, reason == "admin")
            if reason == "idle":
                assert host_lines(cluster)[2] == [name, "closed_Idle", "4", "0", "0"]
            refused = cluster.api("POST", f"/hosts/{name}/close?reason=bored")
            assert (refused.status, refused.json) == (
                400, error(400, "reason must be one of admin, idle, lifetime, reclaim"))
            assert cluster.host(name)["status"] == label
            opened = cluster.api("POST", f"/hosts/{name}/open")
            assert (opened.status, opened.json["status"], opened.json["reason"]) == (
                200, "ok", "opened")


# ---------------------------------------------------------------- durability
def agent_back(cluster: LiveCluster, name: str) -> None:
    """Wait until the agent has heartbeated to the controller now running."""
    first = cluster.host(name)["last_heartbeat"]
    wait_for(lambda: cluster.host(name)["last_heartbeat"] != first, 20,
             f"agent {name} to come back")


@pytest.mark.parametrize("snapshot_every", ["100000", "1"], ids=["log", "snapshots"])
def test_lifecycle_survives_kill_9(tmp_path: Path, snapshot_every: str) -> None:
    """kill -9 after expect, after join, after close, after decommission; each time a
    controller restarted on the same state recovers the step (from the log alone, or
    from snapshots taken after every session with facts)."""
    listen = f"127.0.0.1:{free_port()}"
    timings = (*QUIET, "--snapshot-every", snapshot_every)
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:

        def crash() -> None:
            time.sleep(0.3)  # a session (and its snapshot) after the step
            cluster.stop_controller(signal.SIGKILL)
            cluster.start_controller(listen, extra=timings)

        cluster.start_controller(listen, extra=timings)
        job = cluster.submit(hold("go"), n=4, res=CLOUD)
        made = expect(cluster, deadline=120, request="r-9")
        name = made["name"]
        shown = cluster.host(name)
        crash()
        assert cluster.host(name) == shown
        assert settled(cluster)["demand"] == cloud_demand(0, 1, [job])

        # The token still joins after the restart.
        cluster.start_agent(name, slots=1)
        assert cluster.wait_state(job, "RUN")["exec_hosts"] == {name: 4}
        joined = cluster.host(name)
        crash()
        host = cluster.host(name)
        assert {k: host[k] for k in ("state", "reason", "template", "provider", "joined",
                                     "slots", "resources", "jobs")} == {
            "state": "ok", "reason": "joined", "template": "cloud", "provider": "aws",
            "joined": joined["joined"], "slots": 4, "resources": {"cloud": True},
            "jobs": [job]}
        agent_back(cluster, name)  # with the join token, to the new controller
        assert cluster.job(job)["state"] == "RUN"
        assert settled(cluster)["demand"] == NO_DEMAND

        assert cluster.api("POST", f"/hosts/{name}/close?reason=idle").status == 200
        crash()
        host = cluster.host(name)
        assert (host["state"], host["status"], host["reason"], host["provider"]) == (
            "closed", "closed_Idle", "idle", "aws")
        agent_back(cluster, name)
        assert cluster.host(name)["status"] == "closed_Idle"

        (cluster.root / "go").touch()
        cluster.wait_state(job, "DONE")
        wait_for(lambda: cluster.host(name)["used"] == 0, 5, "the host to be empty")
        assert cluster.api("POST", f"/hosts/{name}/decommission").status == 200
        crash()
        host = cluster.host(name)
        assert (host["state"], host["reason"], host["template"], host["joined"]) == (
            "decommissioned", "decommissioned", "cloud", joined["joined"])
        assert expect(cluster)["name"] == "cloud-2"  # the numbering survived too
        assert cluster.api("POST", f"/hosts/{name}/remove").status == 200
        assert list(cluster.hosts()) == ["n1", "cloud-2"]


# ---------------------------------------------------------------- live / simulator
def test_recorded_run_with_an_expected_host_replays(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.start_controller(record=recording)
        cluster.start_agent("n1")
        local = [cluster.submit(["sleep", "0.2"]) for _ in range(3)]
        cloud = [cluster.submit(["sleep", "0.3"], n=2, res=CLOUD) for _ in range(3)]
        settled(cluster)
        failed = expect(cluster, deadline=0.5)["name"]
        wait_for(lambda: cluster.host(failed)["state"] == "failed", 5, "a failed host")
        settled(cluster)
        assert cluster.api("POST", f"/hosts/{failed}/remove").status == 200
        name = expect(cluster)["name"]
        settled(cluster)
        cluster.start_agent(name, slots=1)
        for job in [*local, *cloud]:
            assert cluster.wait_state(job, ("DONE", "EXIT"))["state"] == "DONE"
        assert {h for j in cloud for h in cluster.job(j)["exec_hosts"]} == {name}
        more = cluster.submit(["sleep", "0.2"], n=4, res=CLOUD)
        cluster.wait_state(more, "DONE")
        for step in ("close?reason=idle", "decommission", "remove"):
            assert cluster.api("POST", f"/hosts/{name}/{step}").status == 200
            time.sleep(0.25)  # a session sees each state
        cancelled = expect(cluster)["name"]
        settled(cluster)
        assert cluster.api("POST", f"/hosts/{cancelled}/remove").status == 200
        settled(cluster)
        cluster.stop_controller(signal.SIGTERM)  # a clean stop closes the recording

    report = replay(recording)
    assert report.divergence is None, str(report.divergence)
    assert report.sessions >= 20
    kinds = {json.loads(line).get("e", {}).get("event")
             for line in recording.read_text().splitlines()[1:]}
    for kind in ("SupplyChanged", "HostAdded", "HostRemoved", "HostStateChanged",
                 "JobStarted", "JobFinished"):
        assert kind in kinds, kind
    # The scheduler counts expected hosts through SupplyChanged.in_flight: their records
    # are the controller's, not scheduler input, and a recording holds only the latter.
    assert not kinds & {"HostExpected", "ExpectedHostEnded", "RequestRecorded",
                        "InstanceRecorded"}, kinds
