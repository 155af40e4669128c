"""The license pool's rules, without HTTP: features with their totals, leases, expiry,
and the optional durable state file.

Every change is written to the state file (when there is one) before it takes effect
in memory, so a change the file could not take is refused whole (503) and a restarted
pool finds exactly the leases it had granted. Expiry is by the wall clock (epoch
seconds), which is what a state file that outlives the process needs: a lease that
expired while the pool was down is dropped when the pool starts again.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from xce.model.amounts import EPSILON
from xce.model.license_api import (
    FEATURE_NAME,
    BorrowRequest,
    FeatureInfo,
    Lease,
    PoolState,
    Returned,
)

log = logging.getLogger("xce.license")



class PoolError(Exception):
    """A refused request: `status` is the HTTP status (4xx, or 503 for the state file)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class StateFileError(Exception):
    """The --state file exists but cannot be read as a pool's state."""


class LicensePool:
    """Features and leases. Not thread-safe: the server calls it from one event loop."""

    def __init__(
        self,
        features: Mapping[str, float],
        lease_ttl: float = 60.0,
        max_ttl: float = 3600.0,
        state_file: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, total in features.items():
            if not FEATURE_NAME.fullmatch(name):
                raise ValueError(f"feature {name!r}: a name of letters, digits, _ . + - "
                                 "(not starting with a punctuation mark)")
            if not math.isfinite(total) or total < 0:
                raise ValueError(f"feature {name}: the total must be a number >= 0")
        if not (math.isfinite(lease_ttl) and 0 < lease_ttl <= max_ttl):
            raise ValueError(f"the lease ttl must be above 0 and at most {max_ttl:g} s")
        self.features = dict(features)
        self.lease_ttl = lease_ttl
        self.max_ttl = max_ttl
        self.state_file = state_file
        self.clock = clock
        self.leases: dict[str, Lease] = {}
        if state_file is not None and state_file.exists():
            self.leases = self._load(state_file)

    # ------------------------------------------------------------ reading
    def in_use(self, feature: str) -> float:
        return _clean(sum((lease.amount for lease in self.leases.values()
                           if lease.feature == feature), 0.0))

    def feature(self, name: str) -> FeatureInfo:
        if name not in self.features:
            known = ", ".join(sorted(self.features)) or "none"
            raise PoolError(404, f"unknown feature {name!r} (features: {known})")
        total = self.features[name]
        used = self.in_use(name)
        count = sum(1 for lease in self.leases.values() if lease.feature == name)
        return FeatureInfo(name=name, total=total, in_use=used,
                           free=max(0.0, _clean(total - used)), leases=count)

    def feature_list(self) -> list[FeatureInfo]:
        return [self.feature(name) for name in sorted(self.features)]

    def lease(self, lease_id: str) -> Lease:
        lease = self.leases.get(lease_id)
        if lease is None:
            raise PoolError(404, f"no lease {lease_id!r} (it expired, was returned, "
                                 "or never was)")
        return lease

    def lease_list(self, holder: str | None = None, feature: str | None = None) -> list[Lease]:
        if feature is not None:
            self.feature(feature)  # 404 for an unknown feature
        chosen = [lease for lease in self.leases.values()
                  if (holder is None or lease.holder == holder)
                  and (feature is None or lease.feature == feature)]
        return sorted(chosen, key=lambda lease: (lease.granted, lease.id))

    # ------------------------------------------------------------ changing
    def expire(self) -> list[Lease]:
        """Drop the leases whose time is up (their tokens are free again)."""
        now = self.clock()
        gone = [lease for lease in self.leases.values() if lease.expires <= now]
        if not gone:
            return []
        kept = {i: lease for i, lease in self.leases.items() if lease.expires > now}
        try:
            self._commit(kept)
        except PoolError as err:  # safe: a restart drops them again, they are past due
            log.warning("%s; the expired leases are dropped anyway", err.message)
            self.leases = kept
        for lease in gone:
            log.info("lease %s of %s expired: %g token(s) of %s free again (not renewed "
                     "since %.1f s)", lease.id, lease.holder, lease.amount, lease.feature,
                     now - lease.renewed)
        return gone

    def borrow(self, feature: str, request: BorrowRequest) -> Lease:
        """A new lease of `request.amount` tokens (with `partial`: of what is free, up to
        it); 409 when nothing (or, without `partial`, not enough) is free."""
        info = self.feature(feature)
        amount = _amount(request.amount)
        ttl = self._ttl(request.ttl, self.lease_ttl)
        if request.partial:
            granted = min(amount, info.free)
            if granted <= EPSILON:
                raise PoolError(409, f"no free token of {feature}: {info.in_use:g} of "
                                     f"{info.total:g} in use")
        else:
            if amount > info.free + EPSILON:
                raise PoolError(409, f"cannot borrow {amount:g} token(s) of {feature}: "
                                     f"{info.free:g} free ({info.in_use:g} of {info.total:g} "
                                     "in use)")
            granted = amount
        now = self.clock()
        lease = Lease(id=secrets.token_hex(8), feature=feature, holder=request.holder,
                      amount=granted, ttl=ttl, granted=now, renewed=now, expires=now + ttl)
        self._commit({**self.leases, lease.id: lease})
        log.info("lease %s: %g token(s) of %s to %s for %g s", lease.id, granted, feature,
                 lease.holder, ttl)
        return lease

    def renew(self, lease_id: str, ttl: float | None) -> Lease:
        """The lease again valid for `ttl` seconds (default: its own ttl) from now."""
        lease = self.lease(lease_id)
        seconds = self._ttl(ttl, lease.ttl)
        now = self.clock()
        renewed = msgspec.structs.replace(lease, ttl=seconds, renewed=now, expires=now + seconds)
        self._commit({**self.leases, lease_id: renewed})
        log.debug("lease %s of %s renewed for %g s", lease_id, lease.holder, seconds)
        return renewed

    def give_back(self, lease_id: str, amount: float | None) -> Returned:
        """Return the whole lease, or `amount` of its tokens (the lease shrinks)."""
        lease = self.lease(lease_id)
        back = lease.amount if amount is None else _amount(amount)
        if back > lease.amount + EPSILON:
            raise PoolError(409, f"cannot return {back:g} token(s): lease {lease_id} holds "
                                 f"{lease.amount:g} of {lease.feature}")
        back = min(back, lease.amount)
        remaining = _clean(lease.amount - back)
        kept = dict(self.leases)
        if remaining <= EPSILON:
            remaining = 0.0
            del kept[lease_id]
        else:
            kept[lease_id] = msgspec.structs.replace(lease, amount=remaining)
        self._commit(kept)
        log.info("lease %s of %s: %g token(s) of %s returned, %g kept", lease_id,
                 lease.holder, back, lease.feature, remaining)
        return Returned(id=lease_id, feature=lease.feature, holder=lease.holder,
                        returned=back, remaining=remaining)

    def _ttl(self, ttl: float | None, default: float) -> float:
        seconds = default if ttl is None else ttl
        if not math.isfinite(seconds) or seconds <= 0 or seconds > self.max_ttl:
            raise PoolError(400, f"ttl must be above 0 and at most {self.max_ttl:g} s, "
                                 f"not {seconds:g}")
        return seconds

    # ------------------------------------------------------------ the state file
    def _commit(self, leases: dict[str, Lease]) -> None:
        """Write `leases` to the state file, then make them the pool's (or 503 and no
        change)."""
        if self.state_file is not None:
            state = PoolState(leases=sorted(leases.values(), key=lambda x: (x.granted, x.id)))
            try:
                _write_atomically(self.state_file, msgspec.json.encode(state))
            except OSError as err:
                raise PoolError(503, f"cannot write the state file {self.state_file}: "
                                     f"{err.strerror or err}") from err
        self.leases = leases

    def _load(self, path: Path) -> dict[str, Lease]:
        try:
            state = msgspec.json.decode(path.read_bytes(), type=PoolState)
        except (OSError, msgspec.DecodeError) as err:
            raise StateFileError(f"{path}: not a license pool state file: {err}") from err
        leases: dict[str, Lease] = {}
        for lease in state.leases:
            if lease.feature not in self.features:
                log.warning("lease %s of %s: feature %s is not configured any more; "
                            "dropped (%g token(s))", lease.id, lease.holder, lease.feature,
                            lease.amount)
                continue
            leases[lease.id] = lease
        log.info("%d lease(s) read from %s", len(leases), path)
        return leases


def _amount(amount: float) -> float:
    if not math.isfinite(amount) or amount <= 0:
        raise PoolError(400, f"amount must be a number above 0, not {amount:g}")
    return amount


def _clean(value: float) -> float:
    """`value` with float noise around whole numbers removed (3 - 2.0000000001 -> 1)."""
    nearest = round(value)
    return float(nearest) if abs(value - nearest) < EPSILON else value


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` by `data` so that a reader (or a crash) sees the old file or the
    new one, never a part."""
    partial = path.with_name(path.name + ".tmp")
    with open(partial, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
