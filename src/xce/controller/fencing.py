"""Provider leases as the API serves them, and the fencing they give: a provisioner
takes and renews the lease on a provider, and changes that provider's hosts, requests
and pools only while it holds the live lease, with its current fencing token (the
lease table itself: leases.py)."""

from __future__ import annotations

import logging

from xce.controller.auth import Identity
from xce.controller.kernel import FactKernel
from xce.controller.leases import Lease, LeaseRefused
from xce.controller.problems import ApiProblem, refuse


class Fencing:
    """Takes and releases provider leases; fences a provisioner's changes."""

    def __init__(self, facts: FactKernel) -> None:
        self.facts = facts

    def fenced(self, who: Identity, provider: str) -> None:
        """A provisioner's change to `provider`: refused unless it holds the provider's
        live lease and sends its current fencing token."""
        if who.role != "provisioner":
            return
        try:
            self.facts.leases.check(provider, who.name, who.fence, self.facts.clock())
        except LeaseRefused as err:
            refuse(who, err.status, err.message)

    def providers(self) -> set[str]:
        """The providers the catalog names: of templates, and of countables."""
        catalog = self.facts.state.config.catalog
        return ({t.provider for t in catalog.templates}
                | {c.provider for c in catalog.countables if c.provider})

    async def lease(self, who: Identity, provider: str, ttl: float) -> Lease:
        """Take or renew the lease on `provider` for the caller."""
        facts = self.facts
        if provider not in self.providers():
            raise ApiProblem(404, f"provider {provider}: no template or countable of the "
                                  "catalog names it")
        try:
            fact = facts.leases.grant(provider, who.name, ttl, facts.clock())
        except LeaseRefused as err:  # a standby instance asks every round: not a warning
            refuse(who, err.status, err.message, logging.INFO)
        await facts.commit(facts.clock(), [fact])
        return facts.leases.leases[provider]

    async def release(self, who: Identity, provider: str, token: int) -> None:
        facts = self.facts
        try:
            fact = facts.leases.release(provider, who.name, token, facts.clock())
        except LeaseRefused as err:
            refuse(who, err.status, err.message)
        await facts.commit(facts.clock(), [fact])
