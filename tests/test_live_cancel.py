"""CancelHosts, live: hosts requested for a job that no longer needs them are cancelled
before they join (`policy.cancel_surplus`, docs/policy.md#cancel_surplus).

A real controller and a real `xce provisioner run` on loopback, with the `local`
provider set to start each agent only after `start_delay` seconds (as a machine boots):

* a job needs two burst hosts; they are requested; the job is killed before they join:
  the next policy round cancels them. Their expected hosts are gone, their agent
  processes are stopped, the request record says so (`xce requests -a -l`), and no host
  of theirs joins afterwards, not even once the start delay has passed;
* of two in-flight hosts one is still needed: the one requested last is cancelled, the
  other joins and runs the job left;
* `cancel_surplus: false`: the hosts are kept; they join to an empty queue and are
  given back unused (what the knob avoids).

A host that joins while its cancellation is under way (an in-process provisioner
whose controller calls the test interposes on): kept when it joined before its
removal (idle reclaim gives it back later); refused at the controller when it tries to
join after, and its instance released. And with EC2 played by moto: a cancelled
host's instance is terminated.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hand_provider import HAND, QUIET, HandProvider, join, requested_by_hand, rounds
from live import FAST, LiveCluster, live_cluster, skip_unless_linux, wait_for

from xce.config import load_config_text
from xce.controller.records import ALL_CANCELLED, OTHERS_CANCELLED
from xce.model.lifecycle import CANCELLED
from xce.policy.actions import CancelHosts
from xce.provisioner.client import ControllerRefused
from xce.provisioner.daemon import Provisioner, cancel_candidates
from xce.provisioner.provider import HostGrant, Instance
from xce.provisioner.providers.local import LocalProvider, local_config

pytestmark = skip_unless_linux

START_DELAY = 6.0  # s before a local agent starts: the hosts' lead time
CONFIG = """\
cluster: cancel
session_interval: 0.2
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  idle_time: 1
  templates:
    - {{name: loc, provider: local, slots: 2, max: 4, rank: 1, expected_lead_time: 30}}
policy:
  persistence: 0.3
  max_lifetime: 0
{extra}"""


def agent_pids(work: Path) -> list[int]:
    """Processes of the local provider's agents, asleep before their start or running
    (their command line names `work` and `agent`)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b" agent " in cmdline and str(work).encode() in cmdline:
                found.append(int(entry))
    return found


def start(cluster: LiveCluster, root: Path) -> Path:
    """The controller and a provisioner whose `local` provider delays its agents; the
    provider's work directory."""
    cluster.add_token("provisioner", "prov")
    cluster.start_controller(extra=FAST)
    conf = root / "conf"
    conf.mkdir()
    (conf / "local.yaml").write_text(f"start_delay: {START_DELAY}\nstop_grace: 2\n")
    providers = root / "providers.json"
    providers.write_text('{"providers": [{"name": "local", "type": "local", '
                         '"confPath": "conf"}]}')
    work = root / "provider"
    cluster._spawn("provisioner", [
        "provisioner", "run", "--controller", cluster.url, "--token-file",
        str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
        "--providers", str(providers), "--work", str(work), "--name", "prov-a",
        "--interval", "0.3",
    ])
    return work


def expected(cluster: LiveCluster) -> dict[str, dict[str, Any]]:
    return {n: h for n, h in cluster.hosts().items() if h["state"] == "expected"}


def wait_expected(cluster: LiveCluster, count: int) -> dict[str, dict[str, Any]]:
    def found() -> dict[str, dict[str, Any]] | None:
        hosts = expected(cluster)
        return hosts if len(hosts) == count else None

    return wait_for(found, 20, f"{count} expected hosts")


def local_instances(config: str, cluster: LiveCluster, work: Path) -> list[Instance]:
    """What the local provider lists (its records under `work`)."""
    return LocalProvider(local_config(load_config_text(config), cluster.url, work)
                         ).instances()


def joined_ever(cluster: LiveCluster, names: Sequence[str]) -> list[str]:
    """Hosts of `names` the controller's history says joined."""
    history = cluster.ok("GET", "/history?limit=0")["history"]
    return [n for n in names for e in history if e["text"].startswith(f"host {n} joined")]


def test_hosts_of_a_killed_job_are_cancelled_before_they_join(tmp_path: Path) -> None:
    config = CONFIG.format(extra="")
    with live_cluster(tmp_path, config, agents=()) as cluster:
        work = start(cluster, tmp_path)
        job = cluster.submit(["sleep", "60"], n=4)  # two loc hosts
        hosts = wait_expected(cluster, 2)
        requested = time.time()
        wait_for(lambda: len(agent_pids(work)) == 2, 10, "the two agents, asleep")
        cluster.ok("POST", f"/jobs/{job}/kill")

        wait_for(lambda: not expected(cluster), 10, "the expected hosts to be cancelled")
        assert time.time() - requested < START_DELAY, "cancelled before they could join"
        wait_for(lambda: not agent_pids(work), 10, "their agents to be stopped")
        names = sorted(hosts, key=lambda n: int(n.rsplit("-", 1)[1]), reverse=True)
        ids = ", ".join(f"local-{n}" for n in names)
        line = (f"CancelHosts 2 x loc (2 hosts in flight that no pending job needs): "
                f"cancelled {', '.join(names)} (released {ids})")
        wait_for(lambda: line in cluster.log_tail("provisioner", 100_000), 10,
                 "the decision logged")
        assert "ignored" not in cluster.log_tail("provisioner", 100_000)

        [request] = cluster.ok("GET", "/requests?all=1")["requests"]
        assert (request["state"], request["reason"]) == ("failed", ALL_CANCELLED), request
        assert sorted(i["host"] for i in request["instances"]) == sorted(hosts)
        for instance in request["instances"]:
            assert (instance["state"], instance["reason"], instance["joined"]) == (
                "released", CANCELLED, False), instance
        shown = cluster.xce("requests", "-a", "-l", check=True).stdout
        assert "failed since" in shown and ALL_CANCELLED in shown, shown
        assert shown.count(CANCELLED) == 3, shown  # the request's line, one per host
        history = cluster.xce("history", "-n", "0", check=True).stdout
        for name in hosts:
            assert f"expected host {name} removed: cancelled" in history, history
            assert f"instance {name} released: {CANCELLED}" in history
        status = cluster.xce("provisioner", "status", "--work", str(work), check=True)
        assert "CancelHosts" in status.stdout

        # Past the start delay: had they not been stopped, the agents would run now.
        time.sleep(max(0.0, requested + START_DELAY + 2 - time.time()))
        assert not agent_pids(work)
        assert all(i.state == "gone" for i in local_instances(config, cluster, work))
        assert not joined_ever(cluster, list(hosts)), "no cancelled host joined"
        assert not any(n.startswith("loc-") for n in cluster.hosts())
        assert cluster.ok("GET", "/requests")["requests"] == [], "none open"
        [loc] = cluster.ok("GET", "/catalog")["templates"]
        assert loc["in_flight"] == 0


def test_the_host_requested_last_is_cancelled_and_the_other_runs_the_job(
    tmp_path: Path,
) -> None:
    config = CONFIG.format(extra="  max_requests_per_round: 1\n")
    with live_cluster(tmp_path, config, agents=()) as cluster:
        work = start(cluster, tmp_path)
        first = cluster.submit(["sleep", "0.5"], n=2)
        second = cluster.submit(["sleep", "60"], n=2)
        hosts = wait_expected(cluster, 2)  # one request each, a round apart
        requests = {r["request"]: r for r in cluster.ok("GET", "/requests")["requests"]}
        assert len(requests) == 2
        latest = max(hosts, key=lambda n: requests[hosts[n]["request"]]["created"])
        [earliest] = set(hosts) - {latest}
        cluster.ok("POST", f"/jobs/{second}/kill")

        wait_for(lambda: latest not in cluster.hosts(), 10, f"{latest} to be cancelled")
        assert earliest in expected(cluster), "still needed by the first job: kept"
        done = cluster.wait_state(first, "DONE", timeout=START_DELAY + 20)
        assert done["exec_hosts"] == {earliest: 2}, "the kept host joined and ran it"
        records = {r["request"]: r for r in cluster.ok("GET", "/requests?all=1")["requests"]}
        gone = records[hosts[latest]["request"]]
        assert (gone["state"], gone["reason"]) == ("failed", ALL_CANCELLED)
        assert joined_ever(cluster, [latest]) == [], f"{latest} never joined"
        wait_for(lambda: len(agent_pids(work)) <= 1, 5, f"the agent of {latest} stopped")
        # Idle, the kept host is given back like any other.
        wait_for(lambda: earliest not in cluster.hosts(), 30, f"{earliest} given back")
        wait_for(lambda: not agent_pids(work), 15, "every agent to end")
        kept = cluster.ok("GET", f"/requests/{hosts[earliest]['request']}")
        assert kept["state"] == "returned", kept


def test_cancel_surplus_false_keeps_them_and_they_go_back_unused(tmp_path: Path) -> None:
    config = CONFIG.format(extra="  cancel_surplus: false\n")
    with live_cluster(tmp_path, config, agents=()) as cluster:
        work = start(cluster, tmp_path)
        job = cluster.submit(["sleep", "60"], n=4)
        hosts = wait_expected(cluster, 2)
        cluster.ok("POST", f"/jobs/{job}/kill")

        def surplus() -> list[dict[str, Any]] | None:
            demand = cluster.ok("GET", "/demand").get("demand") or {}
            return demand.get("surplus", {}).get("hosts") or None

        assert wait_for(surplus, 10, "the scheduler to report the surplus") == [
            {"template": "loc", "count": 2}]
        time.sleep(1.5)  # several provisioner rounds
        assert sorted(expected(cluster)) == sorted(hosts), "kept in flight"
        assert "CancelHosts" not in cluster.log_tail("provisioner", 100_000)

        wait_for(lambda: len(joined_ever(cluster, list(hosts))) == 2, START_DELAY + 20,
                 "the kept hosts to join")
        wait_for(lambda: not any(n in cluster.hosts() for n in hosts), 30,
                 "the unused hosts to be given back")
        wait_for(lambda: not agent_pids(work), 15, "every agent to end")
        [request] = cluster.ok("GET", "/requests?all=1")["requests"]
        assert request["state"] == "returned"
        assert all(i["joined"] for i in request["instances"])
        jobs = [j for j in cluster.jobs() if set(j.get("exec_hosts") or ()) & set(hosts)]
        assert jobs == [], "given back unused: no job ever ran on them"


# ------------------------------------------------------------- a join during a cancel



def test_a_host_joining_during_its_cancellation_is_kept_or_released(tmp_path: Path) -> None:
    with live_cluster(tmp_path, HAND, agents=()) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=QUIET)
        job, hand, prov = requested_by_hand(cluster, ["sleep", "60"], 4)
        newer, older = sorted(hand.grants, key=lambda n: int(n.rsplit("-", 1)[1]),
                              reverse=True)
        cluster.ok("POST", f"/jobs/{job}/kill")
        wait_for(lambda: ((cluster.ok("GET", "/demand").get("demand") or {})
                          .get("surplus", {}).get("hosts")), 10, "the surplus")

        # The newer host's agent joins between the round's look at the hosts and its
        # removal; the older one's tries to join after its removal, before its release.
        late: list[int] = []
        hand.before_release = lambda ids: late.append(join(cluster, hand.grants[older]))
        forward = prov._call

        async def interposed(method: str, path: str, body: Any = None,
                             provider: str | None = None) -> Any:
            if path == f"/hosts/{newer}/remove":
                assert await asyncio.to_thread(join, cluster, hand.grants[newer]) == 200
            return await forward(method, path, body, provider)

        prov._call = interposed
        actions = rounds(prov)
        prov._call = forward
        assert [a for a in actions if isinstance(a, CancelHosts)] == [
            CancelHosts("burst", 2, "2 hosts in flight that no pending job needs")]
        [decision] = [d for d in prov.decisions if d.action == "CancelHosts"]
        assert decision.outcome == (f"cancelled {older} (released hand-{older}); "
                                    f"not cancelled: {newer} (joined meanwhile: kept)")
        assert late == [401], "a cancelled host's join token is dead"
        assert hand.released == [f"hand-{older}"] and list(hand.made) == [newer]
        hosts = cluster.hosts()
        assert hosts[newer]["state"] == "ok" and older not in hosts
        [request] = cluster.ok("GET", "/requests?all=1")["requests"]
        states = {i["host"]: (i["state"], i["reason"]) for i in request["instances"]}
        assert states == {newer: ("joined", "joined the cluster"),
                          older: ("released", CANCELLED)}
        assert (request["state"], request["reason"]) == ("partially fulfilled",
                                                         OTHERS_CANCELLED)

        # The kept host is idle: drained, decommissioned, released like any other.
        def given_back() -> bool:
            rounds(prov)
            return newer not in cluster.hosts()

        wait_for(given_back, 20, f"{newer} to be given back", interval=0.3)
        assert hand.made == {} and hand.released == [f"hand-{older}", f"hand-{newer}"]
        assert cluster.ok("GET", f"/requests/{request['request']}")["state"] == "returned"


def test_a_refused_removal_keeps_the_host_and_a_lost_lease_stops_the_cancelling() -> None:
    """With a controller played by the test: c-4 is removed and its instance released;
    c-3's removal is refused because it joined meanwhile (kept); c-2 is gone already;
    the lease is lost at c-1 (refused, still expected): c-0 is not tried."""
    hand = HandProvider()
    hand.request_hosts("r1", "burst", [HostGrant(f"c-{n}", "t") for n in range(5)])
    prov = Provisioner("http://127.0.0.1:9", "x", "prov-a", load_config_text(HAND),
                       {"hand": hand})
    prov.inventory.open["hand"] = [{"request": "r1", "created": 10.0}]
    prov._session_time = 20.0
    hosts = [{"name": f"c-{n}", "template": "burst", "state": "expected", "request": "r1"}
             for n in range(5)]
    now = {"c-0": "expected", "c-1": "expected", "c-3": "ok", "c-4": "expected"}
    removed: list[str] = []

    async def controller(method: str, path: str, body: Any = None,
                         provider: str | None = None) -> Any:
        if method == "GET" and path == "/hosts":
            return {"hosts": [{"name": n, "state": st} for n, st in now.items()]}
        name = path.split("/")[2]
        if name == "c-4":
            removed.append(name)
            del now[name]
            return {"hosts": []}
        if name == "c-3":
            raise ControllerRefused(409, "host c-3 is ok: it cannot become removed")
        if name == "c-2":
            raise ControllerRefused(404, "host c-2: no such host")
        raise ControllerRefused(409, "stale fencing token 1 for provider hand")

    prov._call = controller
    outcome = asyncio.run(prov._cancel_hosts("burst", 5, hosts))
    assert outcome == (
        "cancelled c-4 (released hand-c-4); not cancelled: c-3 (joined meanwhile: kept), "
        "c-2 (gone already), c-1 (HTTP 409: stale fencing token 1 for provider hand)")
    assert removed == ["c-4"] and hand.released == ["hand-c-4"]
    assert sorted(hand.made) == ["c-0", "c-1", "c-2", "c-3"]
    assert asyncio.run(prov._cancel_hosts("burst", 1, [])) == (
        "nothing to cancel: no host of it is in flight")


def test_cancel_candidates_are_the_latest_requested_the_session_counted() -> None:
    hosts = [
        {"name": "c-1", "template": "c", "state": "ok", "request": "r1"},
        {"name": "c-2", "template": "c", "state": "expected", "request": "r1"},
        {"name": "c-3", "template": "c", "state": "expected", "request": "r1"},
        {"name": "c-4", "template": "c", "state": "expected", "request": "r2"},
        {"name": "c-5", "template": "c", "state": "failed", "request": "r2"},
        {"name": "d-6", "template": "d", "state": "expected", "request": "r3"},
        {"name": "c-10", "template": "c", "state": "expected", "request": "r4"},
        {"name": "c-11", "template": "c", "state": "expected", "request": "gone"},
    ]
    requests = [{"request": "r1", "created": 10.0}, {"request": "r2", "created": 20.0},
                {"request": "r3", "created": 30.0}, {"request": "r4", "created": 40.0}]
    assert cancel_candidates(hosts, requests, "c", 35.0) == ["c-4", "c-3", "c-2"], (
        "r4 was made after the session: not surplus")
    assert cancel_candidates(hosts, requests, "c", 40.0) == ["c-10", "c-4", "c-3", "c-2"]
    assert cancel_candidates(hosts, requests, "d", 40.0) == ["d-6"]
    assert cancel_candidates(hosts, requests, "c", None) == []


# ------------------------------------------------------------------------ EC2 (moto)

EC2_CONFIG = """\
cluster: {cluster}
session_interval: 0.2
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  idle_time: 2
  templates:
    - {{name: aws.c5, provider: aws, slots: 2, max: 3, rank: 1}}
policy:
  persistence: 0.3
  max_lifetime: 0
"""
EC2_YAML = """\
region: us-east-1
endpoint_url: {endpoint}
max_attempts: 1
lead_time: 5
templates:
  aws.c5: {{instance_type: c5.large, image_id: {image}, subnet_id: {subnet}}}
"""


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any, str]]:
    pytest.importorskip("moto")
    from ec2_cloud import ec2_client, moto_server, network

    root = tmp_path_factory.mktemp("moto")
    with moto_server(root / "moto.log") as url:
        ec2 = ec2_client(url)
        subnet, _ = network(ec2)
        yield url, ec2, subnet


def test_a_cancelled_ec2_host_has_its_instance_terminated(
    moto: tuple[str, Any, str], tmp_path: Path,
) -> None:
    """Nothing boots the instances (moto does not): they never join; the job is killed
    and its hosts cancelled: their instances are terminated."""
    from ec2_cloud import AWS_ENV, IMAGE

    url, ec2, subnet = moto
    name = "ec2cancel"
    with live_cluster(tmp_path, EC2_CONFIG.format(cluster=name), agents=()) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=FAST)
        conf = tmp_path / "conf"
        conf.mkdir()
        (conf / "ec2.yaml").write_text(EC2_YAML.format(endpoint=url, image=IMAGE,
                                                       subnet=subnet))
        providers = tmp_path / "providers.json"
        providers.write_text('{"providers": [{"name": "aws", "type": "ec2", '
                             '"confPath": "conf"}]}')
        cluster.env.update(AWS_ENV)
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(tmp_path / "work"), "--providers", str(providers),
            "--name", "prov-a", "--interval", "0.3",
        ])
        job = cluster.submit(["sleep", "60"], n=2)
        [host] = wait_expected(cluster, 1)

        def instance() -> dict[str, Any] | None:
            pages = ec2.get_paginator("describe_instances").paginate(
                Filters=[{"Name": "tag:xce:host", "Values": [host]},
                         {"Name": "tag:xce:cluster", "Values": [name]}])
            found = [i for p in pages for r in p["Reservations"] for i in r["Instances"]]
            return found[0] if found else None

        launched = wait_for(instance, 10, f"the instance of {host}")
        assert launched["State"]["Name"] in ("pending", "running")
        cluster.ok("POST", f"/jobs/{job}/kill")
        wait_for(lambda: host not in cluster.hosts(), 10, f"{host} to be cancelled")
        wait_for(lambda: (instance() or {}).get("State", {}).get("Name") == "terminated",
                 10, "its instance to be terminated")
        line = (f"CancelHosts 1 x aws.c5 (1 hosts in flight that no pending job needs): "
                f"cancelled {host} (released {launched['InstanceId']})")
        wait_for(lambda: line in cluster.log_tail("provisioner", 100_000), 10,
                 "the decision logged")
        [request] = cluster.ok("GET", "/requests?all=1")["requests"]
        assert (request["state"], request["reason"]) == ("failed", ALL_CANCELLED)
        [record] = request["instances"]
        assert (record["state"], record["reason"], record["instance_id"]) == (
            "released", CANCELLED, launched["InstanceId"])
        time.sleep(1.0)  # more rounds: nothing else is started, nothing runs
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "tag:xce:cluster", "Values": [name]}])
        states = [i["State"]["Name"] for p in pages for r in p["Reservations"]
                  for i in r["Instances"]]
        assert states == ["terminated"], states
