"""Which providers a provisioner runs: one factory per provider type of the providers
file (read by `xce.config.providers.file`), and the providers built from its entries.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

import msgspec

from xce.config.providers.file import PROVIDER_TYPES, ProviderSpec
from xce.model.cluster import ClusterConfig
from xce.provisioner.provider import Provider


class ProviderContext(msgspec.Struct, frozen=True):
    """What every provider may need besides its own entry."""

    cluster: ClusterConfig
    controller: str  # the URL agents join
    work_dir: str  # the provisioner's work directory (a provider keeps files under it)
    pools: dict[str, float] = {}  # `--pool` sizes, for the local provider


Factory = Callable[[ProviderSpec, ProviderContext], Provider]

# type -> "module:function", for every type the providers file knows: `from_spec` of
# the module named after the type. Imported only when a provider of that type is
# configured, so a site without boto3 can still run the local provider.
FACTORIES: dict[str, str] = {
    kind: f"xce.provisioner.providers.{kind}:from_spec" for kind in PROVIDER_TYPES
}


def build_providers(specs: list[ProviderSpec], context: ProviderContext) -> dict[str, Provider]:
    """One provider per spec, by name. A factory's ConfigError names the spec's file."""
    built: dict[str, Provider] = {}
    for spec in specs:
        module, _, function = FACTORIES[spec.type].partition(":")
        factory: Factory = getattr(importlib.import_module(module), function)
        built[spec.name] = factory(spec, context)
    return built


def default_providers() -> list[ProviderSpec]:
    """Without a providers file: the embedded default, the local provider."""
    return [ProviderSpec(name="local", type="local")]


def check_catalog(specs: list[ProviderSpec], cluster: ClusterConfig,
                  providers: Mapping[str, Provider]) -> list[str]:
    """Catalog templates whose provider this instance does not run (warnings, not
    errors: another provisioner instance may run it)."""
    names = {s.name for s in specs} | set(providers)
    return sorted(f"template {t.name}: provider {t.provider} is not in this instance's "
                  f"providers ({', '.join(sorted(names))})"
                  for t in cluster.catalog.templates if t.provider not in names)
