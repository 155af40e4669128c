"""A provider a live test drives by hand (`HandProvider`: it starts nothing; the test
joins its hosts with the tokens it was given, as their agents would), and in-process
rounds of a real `Provisioner` against a real controller (`rounds`), on a cluster
whose template that provider serves (`HAND`, with `requested_by_hand` for its first
request)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
from live import LiveCluster, wait_for

from xce.config import load_config_text
from xce.policy import Action
from xce.provisioner.daemon import Provisioner
from xce.provisioner.provider import Description, HostGrant, Instance, TemplateOffer

# A cluster whose one template's provider is the test's (`hand`): a job asking for
# `select[burst]` runs only on its hosts.
HAND = """\
cluster: hand
session_interval: 0.2
resources:
  burst: {type: boolean}
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 1
  templates:
    - {name: burst, provider: hand, slots: 2, max: 4, resources: {burst: true},
       expected_lead_time: 120}
policy:
  persistence: 0
  max_lifetime: 0
"""
# Controller options for hosts the test joins by hand: no agent heartbeats them.
QUIET = ("--heartbeat-interval", "0.3", "--unreach-after", "60", "--requeue-after", "120")


class HandProvider:
    """A provider the test drives: it starts nothing; the test joins its hosts (with the
    tokens it was given) when it wants. `before_release` runs before each release."""

    def __init__(self) -> None:
        self.grants: dict[str, HostGrant] = {}
        self.made: dict[str, Instance] = {}
        self.released: list[str] = []
        self.before_release: Any = None

    def describe(self) -> Description:
        return Description("hand", (TemplateOffer("burst", 2, max=4),))

    def request_hosts(self, request_id: str, template: str,
                      hosts: Sequence[HostGrant]) -> list[Instance]:
        for grant in hosts:
            self.grants[grant.name] = grant
            self.made[grant.name] = Instance(f"hand-{grant.name}", "hand", template,
                                             request_id, grant.name, "running", time.time())
        return [self.made[g.name] for g in hosts]

    def release(self, instance_ids: Sequence[str]) -> None:
        if self.before_release is not None:
            self.before_release(instance_ids)
        for host, instance in list(self.made.items()):
            if instance.id in instance_ids:
                del self.made[host]
                self.released.append(instance.id)

    def instances(self) -> list[Instance]:
        return list(self.made.values())

    def borrow(self, pool: str, amount: float) -> float:
        return 0.0

    def give_back(self, pool: str, amount: float) -> None:
        pass

    def lent(self) -> dict[str, float]:
        return {}


def hand_token(cluster: LiveCluster, grant: HostGrant) -> None:
    """The host's join token in a file, as `cluster.tokens[host]` (what an agent of
    the host, `cluster.start_agent`, and the API calls made as it use)."""
    cluster.tokens[grant.name] = cluster.root / f"join-{grant.name}.token"
    cluster.tokens[grant.name].write_text(grant.join_token + "\n")


def join(cluster: LiveCluster, grant: HostGrant) -> int:
    """The host's agent registers with its join token (as `xce agent` does); the HTTP
    status."""
    hand_token(cluster, grant)
    return cluster.api("POST", f"/agents/{grant.name}/register",
                       {"slots": 2, "running": []}, grant.name).status


def rounds(prov: Provisioner, count: int = 1) -> list[Action]:
    async def main() -> list[Action]:
        done: list[Action] = []
        async with aiohttp.ClientSession() as session:
            prov.client.session = session
            for _ in range(count):
                done += await prov.round()
            prov.client.session = None
        return done

    return asyncio.run(main())


def requested_by_hand(cluster: LiveCluster, command: list[str], n: int
                      ) -> tuple[int, HandProvider, Provisioner]:
    """On a `HAND` cluster with its controller up: a job of `n` slots asking for
    `select[burst]`, its demand, and a provisioner round that requests its hosts from
    a hand provider; the job, the provider and the provisioner."""
    job = cluster.submit(command, n=n, res="select[burst]")
    wait_for(lambda: (cluster.ok("GET", "/demand").get("demand") or {}).get("hosts"),
             10, "demand for burst hosts")
    hand = HandProvider()
    prov = Provisioner(cluster.url, cluster.token("prov"), "prov-a", load_config_text(HAND),
                       {"hand": hand})
    rounds(prov)
    return job, hand, prov
