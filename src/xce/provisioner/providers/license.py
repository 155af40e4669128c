"""The `license` provider: tokens of countable pools borrowed from a license pool
service (`xce license-pool`, or a site's adapter in front of FlexNet or RLM speaking
the same protocol; docs/providers/license.md).

It serves no host templates. Each configured pool key of the cluster (`vcs`,
`hspice/cloud`) maps to a feature of the pool service. `borrow` asks the service for a
lease (taking what is free, up to the amount: 0 when nothing is, which is no error);
`give_back` returns leases, the last one in part when needed. Leases expire at the
service unless renewed: a background thread renews every lease of this provider's
holder (`<cluster>/<provider>`) every `lease_ttl / 3` seconds, the ones it borrowed
itself and the ones an earlier instance borrowed (after a crash or a takeover, with
no file of the dead instance needed). A cluster that stops renewing (killed, cut off)
loses its tokens after `lease_ttl`: they are free again at the pool.

Configuration: `<confPath>/license.yaml` (or `license.json`), read by
`xce.config.providers.license`; the wire types are `xce.model.license_api`.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import msgspec

from xce.config.providers.file import ProviderSpec
from xce.config.providers.license import LicenseConfig, license_config
from xce.model.amounts import EPSILON
from xce.model.license_api import FeatureList, Lease, LeaseList, Returned
from xce.provisioner.provider import (
    Description,
    ErrorKind,
    HostGrant,
    Instance,
    PoolOffer,
    ProviderError,
    lent_pool,
)
from xce.provisioner.registry import ProviderContext

log = logging.getLogger("xce.provisioner.license")

T = TypeVar("T")
# No proxy: a license pool is a site service (and `http_proxy` must not catch 127.0.0.1).
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def from_spec(spec: ProviderSpec, context: ProviderContext) -> LicenseProvider:
    """The license provider of a providers file entry (its license.yaml in confPath)."""
    return LicenseProvider(license_config(spec, context.cluster))


# ---------------------------------------------------------------- the provider
class LicenseProvider:
    """Borrows tokens from a license pool service and keeps its leases alive."""

    def __init__(self, config: LicenseConfig, renew: bool = True) -> None:
        self.config = config
        self._sizes: dict[str, float] = {}  # pool -> the feature's total, last seen
        self._problem = ""  # the last describe() problem logged (logged once)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        if renew:
            self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                             name=f"license-renew-{config.provider}")
            self._renewer.start()

    def close(self) -> None:
        """Stop renewing (the leases then expire at the pool unless given back)."""
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(self.config.timeout + 1)

    # ------------------------------------------------------------ describing
    def describe(self) -> Description:
        """No templates; one pool per configured pool key, its size the feature's total
        at the service. When the service cannot be reached the last sizes seen are
        reported (0 before any was seen): the provisioner must go on with its rounds."""
        try:
            shown = self._call("GET", "/features", None, FeatureList)
        except ProviderError as err:
            self._warn_once(f"cannot describe the pools of {self.config.url}: {err}")
        else:
            totals = {f.name: f.total for f in shown.features}
            missing = sorted(f for f in self.config.pools.values() if f not in totals)
            if missing:
                self._warn_once(f"the pool {self.config.url} has no feature "
                                f"{', '.join(missing)}: nothing of it can be borrowed")
            else:
                self._problem = ""
            self._sizes = {pool: totals.get(feature, 0.0)
                           for pool, feature in self.config.pools.items()}
        return Description(
            provider=self.config.provider,
            pools=tuple(PoolOffer(pool, self._sizes.get(pool, 0.0))
                        for pool in sorted(self.config.pools)),
        )

    def _warn_once(self, message: str) -> None:
        if message != self._problem:
            log.warning("%s", message)
            self._problem = message

    # ------------------------------------------------------------ hosts: none
    def request_hosts(self, request_id: str, template: str,
                      hosts: Sequence[HostGrant]) -> list[Instance]:
        raise ProviderError("request", f"provider {self.config.provider} serves no host "
                            f"templates (it lends tokens of {', '.join(sorted(self.config.pools))})"
                            f", not {template}")

    def release(self, instance_ids: Sequence[str]) -> None:
        if instance_ids:
            raise ProviderError("request", f"no such instance: {', '.join(instance_ids)} "
                                f"(provider {self.config.provider} has no instances)")

    def instances(self) -> list[Instance]:
        return []

    # ------------------------------------------------------------ tokens
    def borrow(self, pool: str, amount: float) -> float:
        """A lease of what is free of the pool's feature, up to `amount`: the amount
        granted (0 when nothing is free: the pool answers 409, which is no error)."""
        feature = self._feature(pool, amount)
        body = {"holder": self.config.holder, "amount": amount,
                "ttl": self.config.lease_ttl, "partial": True}
        try:
            lease = self._call("POST", f"/features/{quote(feature, safe='')}/borrow", body,
                               Lease)
        except _Refused as err:
            if err.status == 409:
                log.info("pool %s: nothing of %s lent: %s", pool, feature, err.message)
                return 0.0
            raise err.provider_error() from None
        log.info("pool %s: lease %s of %g token(s) of %s", pool, lease.id, lease.amount,
                 feature)
        return min(lease.amount, amount)

    def lent(self) -> dict[str, float]:
        """Tokens of each configured pool this holder has leases on at the pool."""
        held: dict[str, float] = {}
        for lease in self.leases():
            for pool, feature in self.config.pools.items():
                if feature == lease.feature:
                    held[pool] = held.get(pool, 0.0) + lease.amount
        return held

    def give_back(self, pool: str, amount: float) -> None:
        """Return `amount` tokens of the pool's feature: whole leases where they fit
        (one of just that amount first, else the newest), one lease in part at most.
        Tokens that already expired at the pool are back already: a shortfall is
        logged, not refused."""
        feature = self._feature(pool, amount)
        left = amount
        leases = self.leases(feature)
        while left > EPSILON and leases:
            lease = _pick(leases, left)
            leases.remove(lease)
            part = min(left, lease.amount)
            body = None if part >= lease.amount - EPSILON else {"amount": part}
            try:
                self._call("POST", f"/leases/{quote(lease.id, safe='')}/return", body,
                           Returned)
            except _Refused as err:
                if err.status == 404:  # it expired meanwhile: already back
                    continue
                raise err.provider_error() from None
            left -= part
        if left > EPSILON:
            log.warning("pool %s: %g of %g token(s) of %s were no longer held at the pool "
                        "(expired): already back", pool, left, amount, feature)

    def leases(self, feature: str | None = None) -> list[Lease]:
        """This holder's live leases at the pool (of one feature), oldest first."""
        query = {"holder": self.config.holder}
        if feature is not None:
            query["feature"] = feature
        try:
            return self._call("GET", f"/leases?{urlencode(query)}", None, LeaseList).leases
        except _Refused as err:
            raise err.provider_error() from None

    def renew_all(self) -> int:
        """Renew every live lease of this holder for `lease_ttl`; how many were."""
        renewed = 0
        for lease in self.leases():
            try:
                self._call("POST", f"/leases/{quote(lease.id, safe='')}/renew",
                           {"ttl": self.config.lease_ttl}, Lease)
                renewed += 1
            except _Refused as err:  # expired between the listing and now
                log.warning("lease %s (%g token(s) of %s) could not be renewed: %s",
                            lease.id, lease.amount, lease.feature, err.message)
        return renewed

    def _renew_loop(self) -> None:
        """At once (adopting an earlier instance's leases), then every lease_ttl / 3."""
        while True:
            try:
                self.renew_all()
            except ProviderError as err:
                log.warning("cannot renew the leases of %s at %s: %s", self.config.holder,
                            self.config.url, err)
            if self._stop.wait(self.config.lease_ttl / 3):
                return

    def _feature(self, pool: str, amount: float) -> str:
        return lent_pool(self.config.pools, pool, amount, f"pool {pool}: not lent by "
                         f"provider {self.config.provider}", "its pools")

    # ------------------------------------------------------------ HTTP
    def _call(self, method: str, path: str, body: Any, kind: type[T]) -> T:
        """The answer decoded as `kind`; _Refused for a 4xx answer,
        ProviderError('unavailable') when the service cannot be reached or fails."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.config.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.config.token:
            request.add_header("Authorization", f"Bearer {self.config.token}")
        where = f"{method} {self.config.url}{path}"
        try:
            with _opener.open(request, timeout=self.config.timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as err:
            message = _error_message(err)
            if 400 <= err.code < 500:
                raise _Refused(err.code, message) from None
            raise ProviderError("unavailable", f"{where}: HTTP {err.code}: {message}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise ProviderError("unavailable", f"{where}: {reason}") from None
        try:
            return msgspec.json.decode(raw, type=kind)
        except msgspec.DecodeError as err:
            raise ProviderError("unavailable", f"{where}: unexpected answer: {err}") from None


def _pick(leases: list[Lease], left: float) -> Lease:
    """The lease to return next for `left` tokens: one of exactly that amount, else the
    newest that fits whole, else the newest (returned in part)."""
    for lease in leases:
        if abs(lease.amount - left) <= EPSILON:
            return lease
    whole = [lease for lease in leases if lease.amount <= left + EPSILON]
    return (whole or leases)[-1]


class _Refused(Exception):
    """A 4xx answer of the pool service."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message

    def provider_error(self) -> ProviderError:
        """Authentication problems: `unavailable` (fix the token, it then works);
        anything else: `request`."""
        kind: ErrorKind = "unavailable" if self.status in (401, 403) else "request"
        return ProviderError(kind, f"the license pool refused: HTTP {self.status}: "
                             f"{self.message}")


def _error_message(err: urllib.error.HTTPError) -> str:
    """The `error` of a JSON error answer, else the HTTP reason."""
    try:
        shown = json.loads(err.read())
    except (OSError, ValueError):
        return str(err.reason)
    if isinstance(shown, dict) and isinstance(shown.get("error"), str):
        return str(shown["error"])
    return str(err.reason)
