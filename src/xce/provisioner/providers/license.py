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

Configuration: `<confPath>/license.yaml` (or `license.json`):

    url: http://licpool.example.com:7070
    token_file: pool.token        # optional; relative to confPath
    lease_ttl: 60                 # optional, seconds (default 60)
    timeout: 10                   # optional, seconds per HTTP request (default 10)
    pools:
      vcs: vcs                    # pool key of the cluster catalog: feature at the pool
      hspice/cloud: hspice
"""

from __future__ import annotations

import json
import logging
import math
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import msgspec

from xce.config import ConfigError, MarkedMap, load_yaml_file
from xce.license.pool import FEATURE_NAME
from xce.license.wire import FeatureList, Lease, LeaseList, Returned
from xce.model.cluster import ClusterConfig
from xce.provisioner.provider import (
    Description,
    ErrorKind,
    HostGrant,
    Instance,
    PoolOffer,
    ProviderError,
)
from xce.provisioner.registry import ProviderContext, ProviderSpec

log = logging.getLogger("xce.provisioner.license")

T = TypeVar("T")
CONF_FILES = ("license.yaml", "license.yml", "license.json")
FIELDS = ("url", "token_file", "lease_ttl", "timeout", "pools")
EPSILON = 1e-9
# No proxy: a license pool is a site service (and `http_proxy` must not catch 127.0.0.1).
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LicenseConfig(msgspec.Struct, frozen=True):
    """Where the pool service is, and which of its features lend to which pool."""

    url: str  # the pool service, e.g. http://licpool:7070
    holder: str  # the name leases are taken under: <cluster>/<provider>
    pools: dict[str, str]  # pool key of the cluster (vcs, hspice/cloud) -> feature
    provider: str = "license"  # its name in the providers file
    token: str = ""  # bearer token for the service ("" : none)
    lease_ttl: float = 60.0  # seconds a lease lasts without renewal
    timeout: float = 10.0  # seconds per HTTP request


def from_spec(spec: ProviderSpec, context: ProviderContext) -> LicenseProvider:
    """The license provider of a providers file entry (its license.yaml in confPath)."""
    if not spec.conf_path:
        raise ConfigError(spec.file or "providers file", spec.line, f"{spec.name}.confPath",
                          "a license provider needs confPath: the directory of its "
                          "license.yaml")
    return LicenseProvider(load_license_config(Path(spec.conf_path), context.cluster,
                                               spec.name))


# ---------------------------------------------------------------- configuration
def pool_keys(cluster: ClusterConfig) -> dict[str, str]:
    """Every name of a countable pool of `cluster` -> its key (the label the scheduler
    and the controller use): `vcs` and `vcs/default` -> `vcs`; `hspice/cloud` when
    the resource has several pools."""
    keys: dict[str, str] = {}
    for countable in cluster.catalog.countables:
        pools = cluster.shared.get(countable.resource, ())
        full = f"{countable.resource}/{countable.pool}"
        label = countable.resource if len(pools) <= 1 else full
        keys[label] = label
        keys[full] = label
    return keys


def load_license_config(conf_dir: Path, cluster: ClusterConfig,
                        provider: str = "license") -> LicenseConfig:
    """The configuration in `conf_dir`/license.yaml (or .json), or ConfigError naming
    the file, line and field."""
    path = next((conf_dir / name for name in CONF_FILES if (conf_dir / name).exists()),
                conf_dir / CONF_FILES[0])
    filename = str(path)
    root = load_yaml_file(path, f"the license provider reads {' or '.join(CONF_FILES)} "
                                "in its confPath")
    if not isinstance(root, MarkedMap):
        raise ConfigError(filename, 1, "", "expected a mapping with url and pools")
    for key in root:
        if key not in FIELDS:
            raise ConfigError(filename, root.line_of(key), str(key),
                              f"unknown field (known: {', '.join(FIELDS)})")
    for required in ("url", "pools"):
        if required not in root:
            raise ConfigError(filename, root.line or 1, required, "missing")

    def fail(field: str, message: str) -> ConfigError:
        return ConfigError(filename, root.value_line_of(field), field, message)

    url = root["url"]
    if not isinstance(url, str) or not _is_http_url(url):
        raise fail("url", f"expected an http:// or https:// URL, got {url!r}")
    token = ""
    if "token_file" in root:
        name = root["token_file"]
        if not isinstance(name, str) or not name:
            raise fail("token_file", "expected a file name")
        token_path = conf_dir / name
        try:
            token = token_path.read_text().strip()
        except OSError as err:
            raise fail("token_file", f"cannot read {token_path}: {err.strerror}") from err
        if not token:
            raise fail("token_file", f"{token_path} is empty")
    seconds = {"lease_ttl": 60.0, "timeout": 10.0}
    for field in seconds:
        if field in root:
            value = root[field]
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or value <= 0):
                raise fail(field, f"expected a number of seconds above 0, got {value!r}")
            seconds[field] = float(value)
    return LicenseConfig(url=url.rstrip("/"), holder=f"{cluster.cluster}/{provider}",
                         pools=_pools(root, filename, cluster), provider=provider,
                         token=token, **seconds)


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # a bad port, a bad IPv6 address
        return False


def _pools(root: MarkedMap, filename: str, cluster: ClusterConfig) -> dict[str, str]:
    section = root["pools"]
    if not isinstance(section, MarkedMap) or not section:
        raise ConfigError(filename, root.value_line_of("pools"), "pools",
                          "expected a mapping of pool keys to features, e.g. {vcs: vcs}")
    keys = pool_keys(cluster)
    known = ", ".join(sorted(set(keys.values()))) or "none"
    pools: dict[str, str] = {}
    for name, feature in section.items():
        field = f"pools.{name}"
        key = keys.get(name) if isinstance(name, str) else None
        if key is None:
            raise ConfigError(filename, section.line_of(name), field,
                              f"no countable pool {name!r} in cluster {cluster.cluster} "
                              f"(catalog.countables: {known})")
        if key in pools:
            raise ConfigError(filename, section.line_of(name), field,
                              f"pool {key} is named twice")
        if not isinstance(feature, str) or not FEATURE_NAME.fullmatch(feature):
            raise ConfigError(filename, section.value_line_of(name), field,
                              f"expected a feature name (letters, digits, _ . + -), "
                              f"got {feature!r}")
        pools[key] = feature
    return pools


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
        feature = self.config.pools.get(pool)
        if feature is None:
            served = ", ".join(sorted(self.config.pools)) or "none"
            raise ProviderError("request", f"pool {pool}: not lent by provider "
                                f"{self.config.provider} (its pools: {served})")
        if not math.isfinite(amount) or amount <= 0:
            raise ProviderError("request", f"the amount must be a number above 0, "
                                f"not {amount:g}")
        return feature

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
