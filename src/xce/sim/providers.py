"""Simulated providers: hosts that join after a lead time (or fail, or run out of
capacity, or are reclaimed) and license pools that grant or refuse tokens. All
randomness comes from one seeded generator owned by the simulator."""

from __future__ import annotations

import random

from mypy_extensions import mypyc_attr

from xce.model.policy import LeadTime, ProviderModel, TokenModel


def draw_lead_time(lead: LeadTime, rng: random.Random) -> float:
    """A lead time drawn from its model."""
    if lead.dist == "uniform":
        return rng.uniform(lead.low, lead.high)
    if lead.dist == "exponential":
        return rng.expovariate(1 / lead.mean) if lead.mean > 0 else 0.0
    if lead.dist == "normal":
        return max(0.0, rng.gauss(lead.mean, lead.sd))
    return lead.mean


@mypyc_attr(allow_interpreted_subclasses=True)  # xce.sim.provider_kinds refines it
class HostProvider:
    """One simulated host provider (e.g. `aws`)."""

    def __init__(self, name: str, model: ProviderModel) -> None:
        self.name = name
        self.model = model
        self.active = 0  # hosts in flight or joined

    def answer(self, rng: random.Random) -> tuple[str, float]:
        """The fate of one requested host: ("join" | "fail" | "capacity", delay)."""
        if self.active >= self.model.capacity:
            return "capacity", 0.0
        self.active += 1
        delay = draw_lead_time(self.model.lead_time, rng)
        if self.model.failure_rate > 0 and rng.random() < self.model.failure_rate:
            return "fail", delay
        return "join", delay

    def reclaim_after(self, rng: random.Random) -> float | None:
        """Seconds until the provider takes a joined host back, or None."""
        if self.model.reclaim_rate <= 0:
            return None
        return rng.expovariate(self.model.reclaim_rate / 3600)

    def released(self) -> None:
        self.active = max(0, self.active - 1)


class TokenPool:
    """One simulated license pool lending tokens of a countable resource."""

    def __init__(self, key: str, model: TokenModel, size: float) -> None:
        self.key = key
        self.model = model
        self.size = size
        self.lent = 0.0  # granted or in flight

    def answer(self, amount: float, rng: random.Random) -> tuple[float, float]:
        """(tokens granted, delay); 0 tokens granted is a refusal."""
        available = max(0.0, self.size - self.lent)
        refused = self.model.refusal_rate > 0 and rng.random() < self.model.refusal_rate
        if available <= 0 or refused:
            return 0.0, self.model.grant_delay
        granted = min(amount, available)
        self.lent += granted
        return granted, self.model.grant_delay

    def returned(self, amount: float) -> None:
        self.lent = max(0.0, self.lent - amount)
