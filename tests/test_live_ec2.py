"""The ec2 provider end to end: a real controller, a real `xce provisioner run
--providers FILE` process whose provider `aws` is of type ec2, and EC2 played by moto's
server on loopback (behind a proxy that answers EC2's InsufficientInstanceCapacity for
chosen instance types), and the instance metadata service the spot agents read, on
loopback too. The test plays what moto does not: booting. Each new instance's
user data, read back from moto, is run with bash here, so a real agent joins as the
expected host with its token; an instance terminated at EC2 has its machine killed.

* Reconciliation terminates an instance made behind XCE's back with the cluster's tag
  (once older than the provisioner's orphan grace).
* Pending jobs make demand; the rank-1 template has no capacity in either of its two
  instance types (back-off, allowance 0), so the demand moves to the rank-2 spot
  template, whose instances come up as its second type (its first has no capacity
  either), boot, join and run the jobs; their agents watch the (loopback) instance
  metadata service for a spot interruption notice.
* A spot interruption (the instance terminated behind XCE's back while it runs a job):
  the provisioner, which lists the instances every round, reports the host reclaimed
  (lost); the job is requeued and runs again elsewhere.
* Idle hosts are drained, decommissioned and their instances terminated.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ec2_cloud import (
    AWS_ENV,
    IMAGE,
    CapacityProxy,
    Cloud,
    MetadataService,
    ec2_client,
    machine_pids,
    moto_server,
    network,
    venv_path,
)
from live import FAST, LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

RECLAIMED = "reclaimed by the provider"  # xce.model.lifecycle.RECLAIMED
# The provisioner releases an instance no record knows once it is older than its orphan
# grace (30 s by default): 1 s here.
ORPHAN_GRACE = 1.0
GRACE = ("--orphan-grace", "1")
# The proxy has no capacity of these types: aws.big has none in any of its types, and
# aws.spot falls back past its first.
BIG = ("x9.metal", "x8.metal")
SPOT_FIRST = "x7.large"
CONFIG = """\
cluster: {cluster}
session_interval: 0.2
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  idle_time: 2
  templates:
    - {{name: aws.big, provider: aws, slots: 2, max: 2, rank: 1}}
    - {{name: aws.spot, provider: aws, slots: 2, max: 3, rank: 2}}
policy:
  persistence: 0.5
  max_lifetime: 0
"""
EC2_YAML = """\
region: us-east-1
endpoint_url: {endpoint}
max_attempts: 1
lead_time: 5
agent_dir: {machines}
metadata_url: {metadata}
templates:
  aws.big: {{instance_types: [{big[0]}, {big[1]}], image_id: {image}, subnet_id: {subnet}}}
  aws.spot:
    instance_types: [{{type: {spot_first}, price: 0.05}}, c5.large]
    image_id: {image}
    subnet_id: {subnet}
    security_group_ids: [{group}]
    market: spot
"""


@dataclass
class Ec2:
    moto: str
    proxy: CapacityProxy
    ec2: Any
    subnet: str
    group: str
    metadata: MetadataService  # what the spot instances' agents read (no notice: 404)


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ec2]:
    root = tmp_path_factory.mktemp("moto")
    with moto_server(root / "moto.log") as url:
        proxy = CapacityProxy(url)
        proxy.room.update({kind: 0 for kind in (*BIG, SPOT_FIRST)})
        ec2 = ec2_client(url)
        subnet, group = network(ec2)
        metadata = MetadataService()
        try:
            yield Ec2(url, proxy, ec2, subnet, group, metadata)
        finally:
            metadata.close()
            proxy.close()


def instances(aws: Ec2, cluster: str) -> list[dict[str, Any]]:
    pages = aws.ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "tag:xce:cluster", "Values": [cluster]}])
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def state_of(aws: Ec2, instance: str) -> str:
    reply = aws.ec2.describe_instances(InstanceIds=[instance])
    return str(reply["Reservations"][0]["Instances"][0]["State"]["Name"])


def tags(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def launch_orphan(aws: Ec2, cluster: str) -> str:
    """An instance made behind XCE's back, carrying only the cluster's tag."""
    reply = aws.ec2.run_instances(
        ImageId=IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": "xce:cluster", "Value": cluster}]}])
    return str(reply["Instances"][0]["InstanceId"])


def start(cluster: LiveCluster, aws: Ec2, root: Path, name: str) -> Cloud:
    """The controller and a provisioner with provider `aws` (ec2, through the proxy);
    the cloud that boots its instances (not started yet)."""
    cluster.add_token("provisioner", "prov")
    cluster.start_controller(extra=FAST)
    conf = root / "conf"
    conf.mkdir()
    machines = root / "machines"
    (conf / "ec2.yaml").write_text(EC2_YAML.format(
        endpoint=aws.proxy.url, machines=machines, big=BIG, image=IMAGE, subnet=aws.subnet,
        group=aws.group, metadata=aws.metadata.url, spot_first=SPOT_FIRST))
    providers = root / "providers.json"
    providers.write_text('{"providers": [{"name": "aws", "type": "ec2", "confPath": "conf"}]}')
    cluster.env.update(AWS_ENV)
    cluster._spawn("provisioner", [
        "provisioner", "run", "--controller", cluster.url, "--token-file",
        str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
        "--work", str(root / "work"), "--providers", str(providers), "--name", "prov-a",
        "--interval", "0.3", *GRACE,
    ])
    env = dict(cluster.env, PATH=venv_path())
    return Cloud(aws.ec2, name, machines, env)


def flagged(flag: Path) -> list[str]:
    """A job that runs long the first time (it leaves `flag`), and ends at once when run
    again (after a requeue)."""
    return ["sh", "-c", f"if [ -e {flag} ]; then exit 0; fi; touch {flag}; sleep 60"]


def instance_of(aws: Ec2, cluster: str, host: str) -> dict[str, Any]:
    [raw] = [i for i in instances(aws, cluster) if tags(i).get("xce:host") == host]
    return raw


def check_demand_moved_to_spot(aws: Ec2, cluster: LiveCluster, name: str,
                               joined: dict[str, dict[str, Any]]) -> None:
    """aws.big had no capacity in any of its types and was backed off; the jobs ran on
    aws.spot's instances, of its second type, whose agents watch for the notice."""
    assert set(BIG) <= set(aws.proxy.refused), "every type of aws.big was tried"
    log = cluster.log_tail("provisioner", 100_000)
    assert "failed (capacity): RunInstances: template aws.big: no capacity in any of " \
        f"its instance types ({BIG[0]}, {BIG[1]})" in log
    assert "SetAllowance aws.big -> 0" in log, "the template is backed off"
    assert SPOT_FIRST in aws.proxy.refused, "aws.spot tried its first type first"
    assert joined and all(h.startswith("aws.spot-") for h in joined), joined
    for host, record in joined.items():
        assert (record["template"], record["provider"]) == ("aws.spot", "aws")
        raw = instance_of(aws, name, host)
        assert raw["InstanceLifecycle"] == "spot"
        assert raw["InstanceType"] == "c5.large", "its second type: the first had none"
        assert [g["GroupId"] for g in raw["SecurityGroups"]] == [aws.group]
        assert tags(raw)["xce:template"] == "aws.spot"
        assert tags(raw)["xce:provider"] == "aws"
        assert tags(raw)["Name"] == host
        requested = [line for line in log.splitlines()
                     if "RequestHosts" in line and f" {host}" in line]
        assert requested and requested[0].endswith(f"({tags(raw)['xce:request']})")
    assert not [i for i in instances(aws, name) if tags(i).get("xce:template") == "aws.big"]
    # The spot instances' agents watch for EC2's interruption notice (the user data
    # passes --spot-metadata), with IMDSv2 session tokens.
    wait_for(lambda: aws.metadata.reads >= len(joined), 10,
             "the spot agents to read the metadata service")
    assert aws.metadata.tokens and aws.metadata.authorization == []


def test_demand_to_ec2_instances_reclaim_requeue_and_back(aws: Ec2, tmp_path: Path) -> None:
    name = "ec2live"
    orphan = launch_orphan(aws, name)
    launched = time.monotonic()
    with live_cluster(tmp_path, CONFIG.format(cluster=name), agents=()) as cluster:
        cloud = start(cluster, aws, tmp_path, name)
        with cloud:
            # Demand: aws.big has no capacity (back-off), aws.spot gets it.
            jobs = [cluster.submit(["sleep", "2"], n=2) for _ in range(2)]
            joined = {}  # host -> its record at the controller, while it runs a job
            for job in jobs:
                for host in cluster.wait_state(job, "RUN", timeout=40)["exec_hosts"]:
                    joined[host] = cluster.host(host)
            for job in jobs:
                assert cluster.wait_state(job, "DONE", timeout=40)["state"] == "DONE"
            cloud.check()
            check_demand_moved_to_spot(aws, cluster, name, joined)

            # A spot interruption while the host runs a job.
            long = cluster.submit(flagged(tmp_path / "ran-once"), n=2)
            running = cluster.wait_state(long, "RUN", timeout=40)
            [victim] = running["exec_hosts"]
            wait_for(lambda: (tmp_path / "ran-once").exists(), 10, "the job to start")
            reclaimed = instance_of(aws, name, victim)["InstanceId"]
            aws.ec2.terminate_instances(InstanceIds=[reclaimed])  # behind XCE's back
            # Reported by the provisioner (it lists the instances every round), not found
            # out by the controller after missed heartbeats (unreach 1.5 s + requeue 1.5 s):
            # the host is lost as reclaimed (and may be removed at once).
            def reported() -> bool:
                host = cluster.hosts().get(victim)
                if host is not None and host["state"] != "lost":
                    return False
                assert host is None or host["reason"] == RECLAIMED, host
                return f"Reconcile {victim} (its instance is gone): lost" in cluster.log_tail(
                    "provisioner", 100_000)

            wait_for(reported, 15, f"host {victim} to be reported reclaimed")
            wait_for(lambda: not machine_pids(reclaimed), 5, "the machine to be gone")
            done = cluster.wait_state(long, "DONE", timeout=40)
            assert victim not in done["exec_hosts"]  # requeued, and run elsewhere
            assert f"job {long} host {victim} reclaimed: requeued" in cluster.log_tail(
                "controller", 100_000)

            # Idle: the other hosts go away and their instances are terminated.
            def released() -> bool:
                hosts = cluster.hosts()
                return not any(h.startswith("aws.") and hosts[h]["state"] != "lost"
                               for h in hosts)

            wait_for(released, 40, "the idle hosts to be given back")
            # Reconciliation terminated the orphan once it was older than the orphan
            # grace (at start, with a grace of 1 s).
            wait_for(lambda: state_of(aws, orphan) == "terminated",
                     max(5.0, ORPHAN_GRACE + 15 - (time.monotonic() - launched)),
                     "reconciliation to terminate the orphan")
            wait_for(lambda: f"Reconcile {orphan} (an instance no record knows): released"
                     in cluster.log_tail("provisioner", 100_000), 5, "the reconciliation logged")
            wait_for(lambda: all(i["State"]["Name"] == "terminated"
                                 for i in instances(aws, name)), 15,
                     "every instance of the cluster to be terminated")
            cloud.check()
        booted = set(cloud.machines)
        assert len(booted) >= 2 and reclaimed in booted
        log = cluster.log_tail("provisioner", 100_000)
        for words in ("RequestHosts", "DrainHost", "DecommissionHost"):
            assert words in log, words

