"""The lifecycle of a provider's lease (controller/leases.py keeps the leases): one
transition table, a reason for every edge.

    live -> live (renewed) | released | expired;  released | expired -> live (taken)

A lease's state is never stored: it follows from what is (`released`, `expires`), so
`lease_state` derives it. The fencing token stays on a renewal and grows by one on
every other change to live (the lease changed hands, or was taken again).
"""

from __future__ import annotations

from enum import StrEnum

from xce.model.lifecycle.table import Lifecycle


class LeaseState(StrEnum):
    LIVE = "live"  # its holder acts for the provider with its fencing token
    EXPIRED = "expired"  # not renewed within its ttl: anyone may take it
    RELEASED = "released"  # its holder gave it up: anyone may take it


LEASE_LIFE: Lifecycle[LeaseState] = Lifecycle(
    "lease on provider",
    LeaseState,
    {
        (LeaseState.LIVE, LeaseState.LIVE): "renewed by its holder: the token is kept",
        (LeaseState.LIVE, LeaseState.RELEASED): "given up by its holder",
        (LeaseState.LIVE, LeaseState.EXPIRED): "not renewed within its ttl",
        (LeaseState.EXPIRED, LeaseState.LIVE): "taken: the fencing token grows",
        (LeaseState.RELEASED, LeaseState.LIVE): "taken: the fencing token grows",
    },
)


def lease_state(released: bool, expires: float, now: float) -> LeaseState:
    """The state of a lease that was `released` or not, and expires at `expires`."""
    if released:
        return LeaseState.RELEASED
    return LeaseState.LIVE if now < expires else LeaseState.EXPIRED
