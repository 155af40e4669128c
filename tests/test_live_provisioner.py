"""The provisioner closes the loop, live: pending jobs make demand; the provisioner
(the policy of the simulator, `xce.policy`) requests hosts of the local provider, whose
agents join and run the jobs; once idle the hosts are drained, decommissioned,
released (their agent processes end) and removed. License-bound jobs get borrowed
tokens, returned once idle."""

from __future__ import annotations

import os
import time
from pathlib import Path

from live import FAST, LiveCluster, live_cluster, pid_alive, skip_unless_linux, wait_for

from xce.config import load_config_text
from xce.provisioner.providers.local import LocalProvider, local_config

pytestmark = skip_unless_linux

CONFIG = """\
cluster: loop
session_interval: 0.2
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 1}
shared:
  vcs: {total: 0}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 2
  templates:
    - {name: loc, provider: local, slots: 2, max: 3, rank: 1}
  countables:
    - {resource: vcs, max_borrow: 2, idle_time: 2}
policy:
  persistence: 0.5
  max_lifetime: 0
"""


def agent_pids(work: Path) -> list[int]:
    """Agent processes the local provider started (their command line names `work`)."""
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


def test_demand_to_hosts_and_back(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=FAST)
        cluster.start_agent("n1", slots=1)
        work = tmp_path / "provider"
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(work), "--pool", "vcs=2", "--name", "prov-a", "--interval", "0.3",
        ])
        jobs = [cluster.submit(["sleep", "0.5"], n=2) for _ in range(3)]
        licensed = cluster.submit(["sleep", "0.5"], res="rusage[vcs=1]")
        for job in [*jobs, licensed]:
            assert cluster.wait_state(job, "DONE", timeout=40)["state"] == "DONE"
        ran_on = {h for job in jobs for h in cluster.job(job)["exec_hosts"]}
        assert ran_on and all(h.startswith("loc-") for h in ran_on), ran_on
        assert agent_pids(work), "the local provider's agents run"

        # Idle past idle_time: drained, decommissioned, released, removed; tokens returned.
        wait_for(lambda: not any(h.startswith("loc-") for h in cluster.hosts()), 40,
                 "the provisioned hosts to go away")
        wait_for(lambda: not agent_pids(work), 15, "the local agents to end")
        steps = [line for line in cluster.log_tail("controller", 100_000).splitlines()
                 if "pool vcs:" in line]
        assert any("granted" in line for line in steps), steps
        wait_for(lambda: cluster.ok("GET", "/resources")["resources"][0]["borrowed"] == 0, 20,
                 "the borrowed tokens to be returned")
        log = cluster.log_tail("provisioner", 100_000)
        for words in ("RequestHosts", "DrainHost", "DecommissionHost", "RequestTokens",
                      "ReturnTokens"):
            assert words in log, words
        assert not any(pid_alive(p) for p in agent_pids(work))
        [vcs] = cluster.ok("GET", "/catalog")["countables"]
        assert vcs["runtime_headroom"] == 2  # what the local pool can still lend
        shown = cluster.xce("provisioner", "status", "--work", str(work))
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("Instance prov-a, last round ")
        assert "leases: local (token 1)" in shown.stdout
        assert "RequestHosts" in shown.stdout and "DecommissionHost" in shown.stdout

        # The durable records: every request returned, every instance went the whole way.
        requests = cluster.ok("GET", "/requests?all=1")["requests"]
        assert requests and all(r["state"] == "returned" for r in requests), requests
        assert cluster.ok("GET", "/requests")["requests"] == []  # none open
        for request in requests:
            assert request["holder"] == "prov" and request["provider"] == "local"
            for instance in request["instances"]:
                assert instance["state"] == "released" and instance["joined"], instance
                assert instance["instance_id"] == f"local-{instance['host']}"
        cluster.stop_controller()  # the records are durable facts
        cluster.start_controller(extra=FAST)
        assert cluster.ok("GET", "/requests?all=1")["requests"] == requests
        shown = cluster.xce("requests", "-a", "-l")
        assert shown.returncode == 0, shown.stderr
        first = requests[0]
        assert f"Request <{first['request']}>, provider <local>, template <loc>" in shown.stdout
        assert "returned since" in shown.stdout and "released by the provider" in shown.stdout

        # The controller's history of supply tells every decision with its reason.
        told = cluster.xce("history", "-n", "0")
        assert told.returncode == 0, told.stderr
        rid = first["request"]
        for line in (f"request {rid}: ", f"request {rid} in flight: accepted by the provider",
                     f"request {rid} returned: every host given back",
                     "lease local: held by prov, fencing token 1",
                     "draining: idle", "releasing: decommissioned",
                     "released: released by the provider", "pool vcs: granted 1 token(s)",
                     "closed: idle", "joined: template loc"):
            assert line in told.stdout, (line, told.stdout[-3000:])
        some = cluster.ok("GET", "/history?limit=3")["history"]
        assert len(some) == 3 and some[0]["seq"] < some[1]["seq"] < some[2]["seq"]
        bad = cluster.api("GET", "/history?limit=-1")
        assert bad.status == 400 and "limit" in bad.json["error"], bad


def loc_records(cluster: LiveCluster) -> set[str]:
    return {h["name"] for h in cluster.ok("GET", "/hosts")["hosts"]
            if h.get("template") == "loc" and h["state"] in ("expected", "ok", "closed",
                                                              "decommissioned")}


def test_takeover_after_the_owner_is_killed(tmp_path: Path) -> None:
    """Two instances; the lease holder is killed -9 while it provisions; the other
    takes the provider over within a lease TTL, reconciles, and finishes the work:
    every instance accounted for, none leaked, none requested twice."""
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.add_token("provisioner", "pa")
        cluster.add_token("provisioner", "pb")
        cluster.start_controller(extra=FAST)
        cluster.start_agent("n1", slots=1)
        work = tmp_path / "provider"  # the local provider's inventory, shared by both
        for name in ("pa", "pb"):
            cluster._spawn(name, [
                "provisioner", "run", "--controller", cluster.url, "--token-file",
                str(cluster.tokens[name]), "--config", str(cluster.config_path),
                "--work", str(work), "--name", name, "--interval", "0.3", "--lease-ttl", "2",
            ])
        holder = wait_for(lambda: (ls := cluster.ok("GET", "/leases")["leases"])
                          and ls[0]["holder"], 10, "a lease")
        jobs = [cluster.submit(["sleep", "1"], n=2) for _ in range(4)]
        wait_for(lambda: loc_records(cluster), 20, "a host requested")
        cluster.procs[holder].kill()  # -9, mid-provisioning
        cluster.procs[holder].wait()
        other = "pb" if holder == "pa" else "pa"
        taken = wait_for(lambda: (ls := cluster.ok("GET", "/leases")["leases"])[0]["holder"]
                         == other and ls[0], 10, "the takeover")
        assert taken["token"] == 2
        seen_too_many = []

        def settled() -> bool:
            records = loc_records(cluster)
            if len(agent_pids(work)) > len(records):
                # A host given back loses its record a moment before its agent has
                # exited (more so on a loaded machine): a leak is one that lasts.
                time.sleep(2)
                records = loc_records(cluster)
                running = len(agent_pids(work))
                if running > len(records):
                    seen_too_many.append((running, sorted(records)))
            return all(cluster.job(j)["state"] == "DONE" for j in jobs) and not records

        wait_for(settled, 60, "the jobs to run and the hosts to be given back", interval=0.2)
        wait_for(lambda: not agent_pids(work), 15, "the local agents to end")
        assert seen_too_many == [], "an instance ran that no host record knew"
        instances = list((work / "instances").glob("*.json"))
        assert len(instances) == len({p.name for p in instances}) >= 1


TWO_TEMPLATES = CONFIG.replace(
    "    - {name: loc, provider: local, slots: 2, max: 3, rank: 1}\n",
    "    - {name: far, provider: far, slots: 2, max: 2, rank: 1}\n"
    "    - {name: loc, provider: local, slots: 2, max: 3, rank: 2}\n",
).replace("  persistence: 0.5\n", "  persistence: 0.5\n  backoff: {initial: 60, max: 60}\n")


def test_hosts_that_never_join_back_off_to_the_next_template(tmp_path: Path) -> None:
    """The first template's hosts never join (their agents are pointed at a dead
    address): past the join deadline the request fails, its instances are released,
    the template backs off (allowance 0) and the demand moves to the next template by
    rank, whose hosts join and run the jobs. Nothing is left running."""
    with live_cluster(tmp_path, TWO_TEMPLATES, agents=("n1",)) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=FAST)
        cluster.start_agent("n1", slots=1)
        work = tmp_path / "provider"
        (tmp_path / "far").mkdir()
        (tmp_path / "far" / "local.yaml").write_text("controller: http://127.0.0.1:9\n")
        providers = tmp_path / "providers.json"
        providers.write_text('{"providers": [{"name": "local", "type": "local"},'
                             ' {"name": "far", "type": "local", "confPath": "far"}]}')
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--providers", str(providers), "--work", str(work), "--name", "prov-a",
            "--interval", "0.3", "--join-deadline", "3",
        ])
        jobs = [cluster.submit(["sleep", "0.5"], n=2) for _ in range(2)]
        for job in jobs:
            assert cluster.wait_state(job, "DONE", timeout=60)["state"] == "DONE"
        assert {h for j in jobs for h in cluster.job(j)["exec_hosts"]} <= {
            f"loc-{n}" for n in range(1, 10)}
        requests = cluster.ok("GET", "/requests?all=1")["requests"]
        far = [r for r in requests if r["template"] == "far"]
        assert far and far[0]["state"] == "failed" and far[0]["reason"] == "no host joined"
        assert all(i["state"] == "released" and not i["joined"] for i in far[0]["instances"])
        assert [i["reason"] for i in far[0]["instances"]] == ["released by the provider"] * len(
            far[0]["instances"])
        assert len(far) == 1, "backed off: no second request of the failed template"
        [far_template] = [t for t in cluster.ok("GET", "/catalog")["templates"]
                          if t["name"] == "far"]
        assert far_template["allowance"] == 0
        log = cluster.log_tail("provisioner", 100_000)
        assert "SetAllowance far -> 0 (provider failure: back-off 60 s" in log, log[-3000:]
        wait_for(lambda: not agent_pids(work), 40, "every local agent to end")


def test_token_steps_are_reconciled_with_what_the_provider_lends(tmp_path: Path) -> None:
    """Tokens left half-way by a dead owner are settled by the next one from what the
    provider says it lends: asked for and lent but never granted -> granted; lent with no
    step recording it -> given back; counted but no longer lent -> returned."""
    # idle_time 600: the policy does not return the tokens as idle meanwhile
    config = CONFIG.replace("max_borrow: 2, idle_time: 2", "max_borrow: 4, idle_time: 600")
    assert config != CONFIG
    with live_cluster(tmp_path, config, agents=("n1",)) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=FAST)
        work = tmp_path / "provider"
        cluster.config_path.write_text(config)
        local = LocalProvider(local_config(load_config_text(config), cluster.url, work,
                                           {"vcs": 4}))
        # The dead owner asked for 2 tokens, the provider lent them, nobody granted them.
        cluster.ok("POST", "/resources/vcs/borrow", {"amount": 2})
        assert local.borrow("vcs", 2) == 2
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(work), "--pool", "vcs=4", "--name", "prov-b", "--interval", "0.3",
        ])

        def vcs() -> tuple[float, float, float]:
            [pool] = cluster.ok("GET", "/resources")["resources"]
            return pool["borrowed"], pool["in_flight"], local.lent().get("vcs", 0.0)

        wait_for(lambda: vcs() == (2, 0, 2), 15, "the lent tokens to be granted")
        wait_for(lambda: "Reconcile vcs (tokens asked for, never answered): granted 2, "
                 "refused 0" in cluster.log_tail("provisioner", 100_000), 5, "the note")
        # Lent behind the controller's back: given back to the provider.
        assert local.borrow("vcs", 1) == 1
        wait_for(lambda: local.lent().get("vcs", 0.0) == 2, 15, "the extra token back")
        # No longer lent (expired at the provider): returned at the controller.
        local.give_back("vcs", 2)
        wait_for(lambda: vcs()[0] == 0, 15, "the unbacked tokens returned")
        wait_for(lambda: "Reconcile vcs (tokens no longer lent by the provider): returned 2"
                 in cluster.log_tail("provisioner", 100_000), 5, "the reconciliation's note")
        log = cluster.log_tail("provisioner", 100_000)
        assert "Reconcile vcs (tokens lent that no step records): gave back 1" in log
