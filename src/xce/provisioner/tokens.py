"""Borrowed tokens, the provisioner's side: which provider lends a pool, borrowing
and returning through the controller (each step under the provider's lease), and
matching the controller's token steps with what a provider says it lends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from urllib.parse import quote

from xce.model.amounts import EPSILON
from xce.model.cluster import ClusterConfig
from xce.provisioner.client import ControllerClient
from xce.provisioner.provider import Provider, ProviderError

Note = Callable[[str, str, str, str], None]  # action, detail, reason, outcome


class TokenLending:
    """The token steps of the pools the providers lend."""

    def __init__(self, client: ControllerClient, config: ClusterConfig,
                 providers: Mapping[str, Provider], note: Note) -> None:
        self.client = client
        self.config = config
        self.providers = providers
        self.note = note

    def pool_provider(self, pool: str) -> str | None:
        """Who lends `pool`: its countable's `provider:`, else the first of ours whose
        description offers it."""
        for countable in self.config.catalog.countables:
            named = pool in (countable.resource, f"{countable.resource}/{countable.pool}")
            if named and countable.provider:
                return countable.provider
        for name, provider in self.providers.items():
            try:
                if any(p.pool == pool for p in provider.describe().pools):
                    return name
            except ProviderError:
                continue
        return None

    async def reconcile(self, provider: str) -> None:
        """Match the controller's token steps of the pools `provider` lends with what it
        says it lends (at the start of a round no borrow or return of ours is under
        way): tokens asked for and never answered (the owner died mid-borrow) are
        granted as far as the provider lent them, refused otherwise; tokens the provider
        lends beyond what the controller counts are given back to it; tokens the
        controller counts that the provider no longer lends (they expired there) are
        returned at the controller."""
        call = self.client.call
        source = self.providers[provider]
        lent = await asyncio.to_thread(source.lent)
        pools = (await call("GET", "/resources"))["resources"]
        for pool in pools:
            key = pool["pool"]
            if pool.get("max_borrow") is None or self.pool_provider(key) != provider:
                continue
            have = lent.get(key, 0.0)
            held = pool["borrowed"] - pool["returning"]  # what should be lent now
            path = f"/resources/{quote(key, safe='')}"
            if pool["in_flight"] > EPSILON:
                granted = min(pool["in_flight"], max(0.0, have - held))
                if granted > EPSILON:
                    await call("POST", f"{path}/grant", {"amount": granted}, provider=provider)
                if pool["in_flight"] - granted > EPSILON:
                    await call("POST", f"{path}/refuse",
                               {"amount": pool["in_flight"] - granted}, provider=provider)
                held += granted
                self.note("Reconcile", key, "tokens asked for, never answered",
                          f"granted {granted:g}, refused {pool['in_flight'] - granted:g}")
            if have - held > EPSILON:
                await asyncio.to_thread(source.give_back, key, have - held)
                self.note("Reconcile", key, "tokens lent that no step records",
                          f"gave back {have - held:g}")
            elif held - have > EPSILON:
                await call("POST", f"{path}/return", {"amount": held - have},
                           provider=provider)
                self.note("Reconcile", key, "tokens no longer lent by the provider",
                          f"returned {held - have:g}")

    async def borrow(self, pool: str, amount: float) -> str:
        """Ask the controller, then the provider; grant what it lent, refuse the rest."""
        provider = self.pool_provider(pool)
        if provider is None:
            return f"no provider lends {pool}"
        call = self.client.call
        path = f"/resources/{quote(pool, safe='')}"
        await call("POST", f"{path}/borrow", {"amount": amount}, provider=provider)
        try:
            granted = await asyncio.to_thread(self.providers[provider].borrow, pool, amount)
        except ProviderError:
            granted = 0.0
        if granted > 0:
            await call("POST", f"{path}/grant", {"amount": granted}, provider=provider)
        if granted < amount:
            await call("POST", f"{path}/refuse", {"amount": amount - granted},
                       provider=provider)
        return f"granted {granted:g} of {amount:g}"

    async def give_back(self, pool: str, amount: float) -> str:
        """Return at the controller, then give back to the provider."""
        provider = self.pool_provider(pool)
        if provider is None:
            return f"no provider lends {pool}"
        await self.client.call("POST", f"/resources/{quote(pool, safe='')}/return",
                               {"amount": amount}, provider=provider)
        await asyncio.to_thread(self.providers[provider].give_back, pool, amount)
        return f"returned {amount:g}"
