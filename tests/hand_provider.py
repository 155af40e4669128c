"""A provider a live test drives by hand (`HandProvider`: it starts nothing; the test
joins its hosts with the tokens it was given, as their agents would), and in-process
rounds of a real `Provisioner` against a real controller (`rounds`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
from live import LiveCluster

from xce.policy import Action
from xce.provisioner.daemon import Provisioner
from xce.provisioner.provider import Description, HostGrant, Instance, TemplateOffer


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


def join(cluster: LiveCluster, grant: HostGrant) -> int:
    """The host's agent registers with its join token (as `xce agent` does); the HTTP
    status."""
    cluster.tokens[grant.name] = cluster.root / f"join-{grant.name}.token"
    cluster.tokens[grant.name].write_text(grant.join_token + "\n")
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
