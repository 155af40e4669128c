"""Provider leases with fencing tokens.

Each provider is owned by at most one provisioner instance at a time. A lease lasts
`ttl` seconds from its last renewal; only its holder renews it; once it has expired,
anyone may take it, and the fencing token grows by one whenever the lease changes
hands (never otherwise, never back). A change a provisioner makes to a provider's
hosts carries the token it holds; the controller refuses a stale one, so an instance
that lost its lease (paused, partitioned) cannot act after another took over.

A provisioner-role caller acts only for a provider it holds a live lease on, with the
lease's current token; admins are not fenced. A lease's state (live, expired, released:
`LEASE_LIFE`, xce.model.lifecycle) follows from `released` and `expires`.
"""

from __future__ import annotations

import msgspec

from xce.model.events import Event, LeaseGranted, LeaseReleased
from xce.model.lifecycle import LeaseState, lease_state


class Lease(msgspec.Struct):
    provider: str
    holder: str
    token: int
    expires: float
    released: bool = False

    def state(self, now: float) -> LeaseState:
        return lease_state(self.released, self.expires, now)


class LeaseRefused(Exception):
    """A lease or a fenced change is refused: `status` 409 (held, stale) or 403."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LeaseTable:
    """Leases by provider, rebuilt from LeaseGranted / LeaseReleased facts."""

    # The facts `apply` follows (the kernel hands it no other: controller/kernel.py)
    FOLLOWS: tuple[type[Event], ...] = (LeaseGranted, LeaseReleased)

    def __init__(self) -> None:
        self.leases: dict[str, Lease] = {}

    def apply(self, event: Event) -> None:
        match event:
            case LeaseGranted(provider=provider, holder=holder, token=token, expires=expires):
                self.leases[provider] = Lease(provider, holder, token, expires)
            case LeaseReleased(provider=provider, token=token):
                lease = self.leases.get(provider)
                if lease is not None and lease.token == token:
                    lease.released = True
            case _:
                pass

    def _live(self, lease: Lease | None, now: float) -> bool:
        return lease is not None and lease.state(now) is LeaseState.LIVE

    def grant(self, provider: str, holder: str, ttl: float, now: float) -> LeaseGranted:
        """The fact that grants or renews `provider` to `holder`, or LeaseRefused."""
        lease = self.leases.get(provider)
        if self._live(lease, now) and lease is not None and lease.holder != holder:
            raise LeaseRefused(409, f"provider {provider} is leased to {lease.holder} "
                                    f"for {lease.expires - now:.1f} s more")
        if lease is not None and lease.holder == holder and self._live(lease, now):
            token = lease.token  # a renewal keeps the token
        else:
            token = (lease.token if lease is not None else 0) + 1
        return LeaseGranted(provider, holder, token, now + ttl, now)

    def release(self, provider: str, holder: str, token: int, now: float) -> LeaseReleased:
        if provider not in self.leases:
            raise LeaseRefused(404, f"provider {provider} is not leased")
        self.check(provider, holder, token, now)
        return LeaseReleased(provider, holder, token, now)

    def check(self, provider: str, holder: str, token: int | None, now: float) -> None:
        """A provisioner's change to `provider`: allowed only with the current token of
        a live lease it holds."""
        lease = self.leases.get(provider)
        if lease is None:
            raise LeaseRefused(409, f"provider {provider} is not leased: take its lease "
                                    f"(POST /leases/{provider}) before acting for it")
        if token is not None and token != lease.token:
            raise LeaseRefused(409, f"stale fencing token {token} for provider {provider} "
                                    f"(current {lease.token}, held by {lease.holder})")
        if lease.holder != holder:
            raise LeaseRefused(409, f"provider {provider} is leased to {lease.holder}, "
                                    f"not {holder}")
        if token is None:
            raise LeaseRefused(409, f"provider {provider} is leased: send the fencing token "
                                    "(header X-XCE-Fencing-Token)")
        if not self._live(lease, now):
            raise LeaseRefused(409, f"the lease on provider {provider} has expired or was "
                                    "released: take it again")

    def held(self, holder: str, token: int | None, now: float) -> list[str]:
        """The providers `holder` holds a live lease on with this token."""
        return sorted(p for p, lease in self.leases.items()
                      if lease.holder == holder and lease.token == token
                      and self._live(lease, now))

    def snapshot(self) -> list[Lease]:
        return list(self.leases.values())

    def restore(self, leases: list[Lease]) -> None:
        self.leases = {lease.provider: lease for lease in leases}
