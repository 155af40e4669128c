"""The `license` provider's configuration, `<confPath>/license.yaml` (or `license.json`;
docs/providers/license.md), read by the provider and by the simulator's model of it
alike:

    url: http://licpool.example.com:7070
    token_file: pool.token        # optional; relative to confPath
    lease_ttl: 60                 # optional, seconds (default 60)
    timeout: 10                   # optional, seconds per HTTP request (default 10)
    pools:
      vcs: vcs                    # pool key of the cluster catalog: feature at the pool
      hspice/cloud: hspice

Every problem is a ConfigError naming file, line and field.
"""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from xce.config.errors import ConfigError
from xce.config.marked_yaml import MarkedMap, load_yaml_file
from xce.config.providers.file import ProviderSpec
from xce.model.cluster import ClusterConfig
from xce.model.license_api import FEATURE_NAME

CONF_FILES = ("license.yaml", "license.yml", "license.json")
FIELDS = ("url", "token_file", "lease_ttl", "timeout", "pools")


class LicenseConfig(msgspec.Struct, frozen=True):
    """Where the pool service is, and which of its features lend to which pool."""

    url: str  # the pool service, e.g. http://licpool:7070
    holder: str  # the name leases are taken under: <cluster>/<provider>
    pools: dict[str, str]  # pool key of the cluster (vcs, hspice/cloud) -> feature
    provider: str = "license"  # its name in the providers file
    token: str = ""  # bearer token for the service ("" : none)
    lease_ttl: float = 60.0  # seconds a lease lasts without renewal
    timeout: float = 10.0  # seconds per HTTP request


def license_config(spec: ProviderSpec, cluster: ClusterConfig) -> LicenseConfig:
    """The configuration of a license provider's entry (its license.yaml in confPath),
    or ConfigError."""
    if not spec.conf_path:
        raise ConfigError(spec.file or "providers file", spec.line, f"{spec.name}.confPath",
                          "a license provider needs confPath: the directory of its "
                          "license.yaml")
    return load_license_config(Path(spec.conf_path), cluster, spec.name)


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
