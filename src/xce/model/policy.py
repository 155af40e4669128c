"""Provisioning policy knobs and simulated provider models (the `policy:` and
`simulation:` sections of the cluster file)."""

from __future__ import annotations

from typing import Literal

import msgspec


class PolicyConfig(msgspec.Struct, frozen=True):
    """When to request supply and when to give it back (see docs/policy.md)."""

    persistence: float = 60  # s demand must persist before supply is requested
    max_requests_per_round: int = 50  # hosts per template per policy round
    min_hosts: dict[str, int] = {}  # keep at least this many hosts of a template
    max_hosts: dict[str, int] = {}  # never more than this many (below the template max)
    max_lifetime: float = 86400  # s, then drain and decommission (0: no limit)
    backoff_initial: float = 60  # s of back-off after a provider failure
    backoff_max: float = 1800  # back-off doubles per failure up to this
    # no idle host of a template is drained while the scheduler demands new hosts of it
    keep_idle_while_demand: bool = True
    # s after hosts of a template were requested during which none of its idle hosts
    # is drained (Cluster Autoscaler's scale-down-delay-after-add; 0: off)
    scale_down_delay_after_add: float = 0
    # in-flight hosts no pending job needs any more are cancelled before they join
    cancel_surplus: bool = True


class LeadTime(msgspec.Struct, frozen=True):
    """A lead time: fixed (`mean` only) or drawn from a seeded distribution."""

    dist: Literal["fixed", "uniform", "exponential", "normal"] = "fixed"
    mean: float = 120
    low: float = 0
    high: float = 0
    sd: float = 0


class ProviderModel(msgspec.Struct, frozen=True):
    """How a simulated host provider answers."""

    lead_time: LeadTime = LeadTime()
    failure_rate: float = 0.0  # probability that a requested host never joins
    capacity: int = 1_000_000  # hosts it can have at once; beyond: insufficient capacity
    reclaim_rate: float = 0.0  # reclaims per host-hour (spot-style loss)


class TokenModel(msgspec.Struct, frozen=True):
    """How a simulated license pool answers a borrow request."""

    grant_delay: float = 30
    refusal_rate: float = 0.0
    pool: float | None = None  # tokens it can lend at once (None: the countable's max_borrow)


class SimulationConfig(msgspec.Struct, frozen=True):
    seed: int = 1
    # End a job at its run limit (as the live controller does); False replays the
    # recorded run times, a job past its limit planned to end one second from now.
    enforce_run_limits: bool = True
    providers: dict[str, ProviderModel] = {}
    countables: dict[str, TokenModel] = {}
    # Trace jobs without a configured queue go to these queues in these proportions,
    # by a hash of their id (sim/jobs.py, `queue_of`); empty: the first queue
    queue_mix: dict[str, float] = {}
