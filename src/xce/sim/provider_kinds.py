"""Simulated provider models derived from a site's real providers (`xce sim run
--providers FILE`, docs/simulator.md "Evaluating your real providers offline").

The providers file (`load_providers`) and each provider's own settings (ec2.yaml,
scriptconf.yaml, local.yaml, license.yaml) are read by the provisioner's own readers
(`xce.config.providers`), with the same ConfigErrors, but nothing is contacted and
nothing is run. From them comes one simulated model per host template and per
countable pool, by provider type:

* `ec2`, per template of ec2.yaml: lead time the template's `lead_time`, else
  ec2.yaml's (120 s); capacity the template's `max` there, if set; no failures;
  SPOT_RECLAIM_RATE reclaims per host-hour for `market: spot`, none on-demand. That
  `max` also caps the template's `max` in the catalog the simulator gets, as the
  provisioner's allowance caps it live.
* `script`: lead time scriptconf's `lead_time` (300 s); no failures, no reclaims.
* `local`: lead time local.yaml's `lead_time` (5 s); no failures, no reclaims; the
  pools of local.yaml lend after GRANT_DELAY, never refuse, their size as configured.
* `license`: no templates (a template naming it gets capacity 0: every request is
  refused, as live); the pools of license.yaml lend after GRANT_DELAY, never refuse,
  the countable's `max_borrow` at once (the real size is known only to the service).

Keys the cluster file's `simulation:` section sets explicitly win, key by key, over
what is derived, with two readings: an explicit `capacity` of a provider caps all its
templates together (on top of each template's own capacity), and an explicit
`reclaim_rate` of an `ec2` provider applies to its spot templates only (EC2 does not
interrupt on-demand instances).

The simulator's own models are per provider name (`simulation.providers`); these are
per template, so that a provider's spot and on-demand templates differ. They reach
the simulator as one `HostProvider` per template (`Simulator(host_providers=...)`),
and the token models as `simulation.countables` entries of the cluster given to it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from xce.config import MarkedMap, load_yaml
from xce.config.providers.ec2 import conf_file, load_ec2_config
from xce.config.providers.file import ProviderSpec, load_providers
from xce.config.providers.license import license_config, pool_keys
from xce.config.providers.local import load_local_settings
from xce.config.providers.script import load_script_conf
from xce.model.cluster import ClusterConfig, Countable
from xce.model.policy import LeadTime, ProviderModel, TokenModel
from xce.sim.providers import HostProvider

SPOT_RECLAIM_RATE = 0.05  # spot interruptions per host-hour, unless simulation: says
GRANT_DELAY = 1.0  # s from a borrow request to its tokens (one provisioner round)
HOST_KEYS = ("lead_time", "failure_rate", "capacity", "reclaim_rate")
TOKEN_KEYS = ("grant_delay", "refusal_rate", "pool")
UNLIMITED = ProviderModel().capacity


@dataclass(frozen=True)
class Explicit:
    """The keys the cluster file's `simulation:` section sets, per provider and per
    countable entry (`vcs`, `hspice/cloud`)."""

    providers: dict[str, frozenset[str]] = field(default_factory=dict)
    countables: dict[str, frozenset[str]] = field(default_factory=dict)


def explicit_keys(cluster_file: str | Path) -> Explicit:
    """What `simulation.providers` and `simulation.countables` of a cluster file set
    (the file is already validated by `load_config`: only the keys are looked at)."""
    root = load_yaml(Path(cluster_file).read_text(encoding="utf-8"), str(cluster_file))
    section = root.get("simulation") if isinstance(root, MarkedMap) else None

    def keys(name: str) -> dict[str, frozenset[str]]:
        found = section.get(name) if isinstance(section, MarkedMap) else None
        if not isinstance(found, MarkedMap):
            return {}
        return {str(k): frozenset(str(key) for key in v) if isinstance(v, MarkedMap)
                else frozenset() for k, v in found.items()}

    return Explicit(providers=keys("providers"), countables=keys("countables"))


# ---------------------------------------------------------------- what is derived
@dataclass(frozen=True)
class TemplateModel:
    """A template's simulated provider: derived from its provider's settings, with
    the cluster file's explicit keys applied."""

    template: str
    provider: str
    type: str | None  # the provider's type; None: not in the providers file
    model: ProviderModel
    market: str = ""  # ec2: spot or on-demand
    note: str = ""
    limit: int | None = None  # the provider's own max, when below the catalog's


@dataclass(frozen=True)
class Derived:
    """What a provider's settings say of one of its templates."""

    model: ProviderModel
    market: str = ""
    note: str = ""
    limit: int | None = None  # the provider's own max of the template, if it has one


@dataclass(frozen=True)
class PoolModel:
    """A countable pool's simulated lender."""

    key: str  # the simulator's key (`vcs`, `hspice/cloud`)
    provider: str | None  # the provider lending it; None: none in the providers file
    type: str | None
    model: TokenModel
    size: float  # tokens it lends at once (the model's pool, else the max_borrow)


@dataclass
class ProviderKinds:
    """Everything derived from a providers file for one cluster."""

    cluster: ClusterConfig  # token models in simulation.countables, maxima capped
    templates: dict[str, TemplateModel]  # template -> its model
    pools: dict[str, PoolModel]  # simulator key -> its lender
    shared_capacity: dict[str, int]  # provider -> explicit capacity (all its templates)
    explicit: Explicit
    specs: tuple[ProviderSpec, ...]

    def host_providers(self) -> dict[str, HostProvider]:
        """Fresh simulated providers, one per template of a provider in the file (for
        `Simulator(host_providers=...)`; each run needs its own: they count hosts)."""
        shared = {name: HostProvider(name, ProviderModel(capacity=capacity))
                  for name, capacity in self.shared_capacity.items()}
        return {name: TemplateProvider(f"{t.provider}/{name}", t.model, shared.get(t.provider))
                for name, t in self.templates.items() if t.type is not None}

    def shown(self) -> dict[str, Any]:
        """The models per provider, as `xce sim run --json` shows them
        (`provider_models`)."""
        out: dict[str, dict[str, Any]] = {}

        def entry(provider: str, kind: str | None) -> dict[str, Any]:
            if provider not in out:
                spec = next((s for s in self.specs if s.name == provider), None)
                shown: dict[str, Any] = {"type": kind}
                if spec is None:
                    shown["note"] = ("not in the providers file: the simulation: model, "
                                     "else the defaults")
                shown["explicit"] = sorted(self.explicit.providers.get(provider, ()))
                if provider in self.shared_capacity:
                    shown["capacity"] = self.shared_capacity[provider]
                out[provider] = shown
            return out[provider]

        for spec in self.specs:
            entry(spec.name, spec.type)
        for name, t in self.templates.items():
            shown = entry(t.provider, t.type).setdefault("templates", {})
            shown[name] = _show_host_model(t)
        for key, p in self.pools.items():
            if p.provider is None:
                continue
            shown = entry(p.provider, p.type).setdefault("pools", {})
            shown[key] = {"grant_delay": p.model.grant_delay,
                          "refusal_rate": p.model.refusal_rate, "pool": p.size}
        for name, key in _explicit_pool_names(self.cluster, self.explicit).items():
            p = self.pools[key]
            if p.provider is not None:
                out[p.provider]["pools"][key]["explicit"] = sorted(
                    self.explicit.countables[name])
        return out

    def rows(self) -> dict[str, str]:
        """One line per template and lent pool, for the summary table and the report:
        `model aws/aws.spot` -> `ec2 spot: lead 180 s; failures 0; capacity 5; ...`."""
        rows: dict[str, str] = {}
        for name, t in self.templates.items():
            what = " ".join(w for w in (t.type or "simulation:", t.market) if w)
            explicit = sorted(self.explicit.providers.get(t.provider, ()))
            parts = [_describe(t.model)]
            if t.limit is not None:
                parts.append(f"max {t.limit} (the provider's)")
            if t.provider in self.shared_capacity:
                parts.append(f"{t.provider} capacity {self.shared_capacity[t.provider]}")
            if explicit:
                parts.append(f"explicit: {' '.join(explicit)}")
            if t.note:
                parts.append(t.note)
            rows[f"model {t.provider}/{name}"] = f"{what}: {'; '.join(parts)}"
        for key, p in self.pools.items():
            if p.provider is None:
                continue
            rows[f"model {p.provider}/{key}"] = (
                f"{p.type}: grant {p.model.grant_delay:g} s; refusals {p.model.refusal_rate:g}; "
                f"pool {p.size:g}")
        return rows


class TemplateProvider(HostProvider):
    """One template's simulated provider, within its provider's explicit capacity
    (`shared`, counted across the provider's templates) when the cluster file sets
    one."""

    def __init__(self, name: str, model: ProviderModel,
                 shared: HostProvider | None = None) -> None:
        super().__init__(name, model)
        self.shared = shared

    def answer(self, rng: random.Random) -> tuple[str, float]:
        shared = self.shared
        if shared is not None and shared.active >= shared.model.capacity:
            return "capacity", 0.0
        fate, delay = super().answer(rng)
        if shared is not None and fate != "capacity":
            shared.active += 1
        return fate, delay

    def released(self) -> None:
        super().released()
        if self.shared is not None:
            self.shared.released()


def load_provider_kinds(cluster_file: str | Path, cluster: ClusterConfig,
                        providers_file: str | Path) -> ProviderKinds:
    """The models of `providers_file` for `cluster` (loaded from `cluster_file`), or
    ConfigError (file, line, field) as the provisioner gives it."""
    return derive(cluster, load_providers(providers_file), explicit_keys(cluster_file))


def derive(cluster: ClusterConfig, specs: Sequence[ProviderSpec],
           explicit: Explicit | None = None) -> ProviderKinds:
    """The models of the providers `specs` for `cluster`. `explicit`: the keys the
    cluster file's `simulation:` sets (None: every key of each entry there)."""
    if explicit is None:
        explicit = Explicit(
            providers={k: frozenset(HOST_KEYS) for k in cluster.simulation.providers},
            countables={k: frozenset(TOKEN_KEYS) for k in cluster.simulation.countables},
        )
    hosts: dict[str, tuple[ProviderSpec, Derived]] = {}
    lent: dict[str, tuple[ProviderSpec, TokenModel]] = {}  # pool label -> lender
    for spec in specs:
        derived_hosts, derived_pools = KINDS[spec.type](spec, cluster)
        for template, derived in derived_hosts.items():
            hosts[template] = (spec, derived)
        for label, tokens in derived_pools.items():
            lent.setdefault(label, (spec, tokens))
    templates: dict[str, TemplateModel] = {}
    shared_capacity: dict[str, int] = {}
    shapes = []
    for t in cluster.catalog.templates:
        given = cluster.simulation.providers.get(t.provider)
        keys = explicit.providers.get(t.provider, frozenset())
        if t.name not in hosts:
            templates[t.name] = TemplateModel(t.name, t.provider, None,
                                              given or ProviderModel())
            shapes.append(t)
            continue
        spec, derived = hosts[t.name]
        model = derived.model
        if given is not None:
            model = _merge_hosts(model, given, keys, on_demand=derived.market == "on-demand")
            if "capacity" in keys:
                shared_capacity[t.provider] = given.capacity
        limit = derived.limit if derived.limit is not None and derived.limit < t.max else None
        if limit is not None:  # as the provisioner's allowance caps it live
            t = msgspec.structs.replace(t, max=limit)
        shapes.append(t)
        templates[t.name] = TemplateModel(t.name, t.provider, spec.type, model, derived.market,
                                          derived.note, limit)
    catalog = msgspec.structs.replace(cluster.catalog, templates=tuple(shapes))
    pools, cluster = _pool_models(msgspec.structs.replace(cluster, catalog=catalog), lent,
                                  explicit)
    return ProviderKinds(cluster=cluster, templates=templates, pools=pools,
                         shared_capacity=shared_capacity, explicit=explicit,
                         specs=tuple(specs))


def _merge_hosts(derived: ProviderModel, given: ProviderModel, keys: frozenset[str],
                 on_demand: bool) -> ProviderModel:
    """`derived` with the keys the cluster file sets taken from `given` (capacity is
    the provider's, applied apart; an on-demand EC2 template is never reclaimed)."""
    return ProviderModel(
        lead_time=given.lead_time if "lead_time" in keys else derived.lead_time,
        failure_rate=given.failure_rate if "failure_rate" in keys else derived.failure_rate,
        capacity=derived.capacity,
        reclaim_rate=(given.reclaim_rate if "reclaim_rate" in keys and not on_demand
                      else derived.reclaim_rate),
    )


def _sim_key(countable: Countable) -> str:
    """The simulator's key of a countable pool (as `xce.sim.supply.Supply.token_key`)."""
    if countable.pool in (None, "default"):
        return countable.resource
    return f"{countable.resource}/{countable.pool}"


def _explicit_pool_names(cluster: ClusterConfig, explicit: Explicit) -> dict[str, str]:
    """`simulation.countables` entry -> the simulator key it applies to, for the
    entries the simulator uses (its own key first, else the resource's)."""
    names: dict[str, str] = {}
    for countable in cluster.catalog.countables:
        key = _sim_key(countable)
        for name in (key, countable.resource):
            if name in cluster.simulation.countables:
                if name in explicit.countables:
                    names[name] = key
                break
    return names


def _pool_models(cluster: ClusterConfig, lent: Mapping[str, tuple[ProviderSpec, TokenModel]],
                 explicit: Explicit) -> tuple[dict[str, PoolModel], ClusterConfig]:
    """The lender of each countable pool, and the cluster with the token models of the
    lent pools (explicit keys applied) in `simulation.countables`, under the
    simulator's key, so that they are the ones it uses."""
    labels = pool_keys(cluster)
    given_models = cluster.simulation.countables
    countables = dict(given_models)
    pools: dict[str, PoolModel] = {}
    for countable in cluster.catalog.countables:
        key = _sim_key(countable)
        label = labels[f"{countable.resource}/{countable.pool}"]
        name = next((n for n in (key, countable.resource) if n in given_models), "")
        given = given_models.get(name)
        lender = lent.get(label)
        if lender is None:
            model = given or TokenModel()
            pools[key] = PoolModel(key, None, None, model, _size(model, countable))
            continue
        spec, model = lender
        if given is not None:
            keys = explicit.countables.get(name, frozenset())
            model = TokenModel(**{k: getattr(given if k in keys else model, k)
                                  for k in TOKEN_KEYS})
        countables[key] = model
        pools[key] = PoolModel(key, spec.name, spec.type, model, _size(model, countable))
    simulation = msgspec.structs.replace(cluster.simulation, countables=countables)
    return pools, msgspec.structs.replace(cluster, simulation=simulation)


def _size(model: TokenModel, countable: Countable) -> float:
    return countable.max_borrow if model.pool is None else model.pool


# ---------------------------------------------------------------- per provider type
HostModels = dict[str, Derived]  # template -> what its provider's settings say
PoolModels = dict[str, TokenModel]  # pool label -> model
Kind = Callable[[ProviderSpec, ClusterConfig], tuple[HostModels, PoolModels]]


def _served(spec: ProviderSpec, cluster: ClusterConfig) -> list[str]:
    return [t.name for t in cluster.catalog.templates if t.provider == spec.name]


def _ec2(spec: ProviderSpec, cluster: ClusterConfig) -> tuple[HostModels, PoolModels]:
    path = conf_file(spec.conf_path, spec.file, spec.line, spec.name)
    config = load_ec2_config(path, cluster, spec.name, "")
    hosts: HostModels = {}
    for t in config.templates:
        lead = config.lead_time if t.lead_time is None else t.lead_time
        limit = None if t.max is None else t.limit
        hosts[t.name] = Derived(ProviderModel(
            lead_time=LeadTime(mean=lead),
            capacity=UNLIMITED if limit is None else limit,
            reclaim_rate=SPOT_RECLAIM_RATE if t.market == "spot" else 0.0,
        ), t.market, limit=limit)
    return hosts, {}


def _script(spec: ProviderSpec, cluster: ClusterConfig) -> tuple[HostModels, PoolModels]:
    served = _served(spec, cluster)
    conf = load_script_conf(spec.conf_path, spec.file, spec.line, spec.name, served)
    model = ProviderModel(lead_time=LeadTime(mean=conf.lead_time))
    return {name: Derived(model) for name in served}, {}


def _local(spec: ProviderSpec, cluster: ClusterConfig) -> tuple[HostModels, PoolModels]:
    settings = load_local_settings(spec)
    model = ProviderModel(lead_time=LeadTime(mean=settings.lead_time))
    labels = pool_keys(cluster)
    pools = {labels[key]: TokenModel(grant_delay=GRANT_DELAY, pool=size)
             for key, size in settings.pools.items() if key in labels}
    return {name: Derived(model) for name in _served(spec, cluster)}, pools


def _license(spec: ProviderSpec, cluster: ClusterConfig) -> tuple[HostModels, PoolModels]:
    config = license_config(spec, cluster)
    refused = ProviderModel(capacity=0)
    note = "a license provider serves no host templates: every request is refused"
    hosts = {name: Derived(refused, note=note) for name in _served(spec, cluster)}
    return hosts, {label: TokenModel(grant_delay=GRANT_DELAY) for label in config.pools}


KINDS: dict[str, Kind] = {"ec2": _ec2, "script": _script, "local": _local,
                          "license": _license}


# ---------------------------------------------------------------- showing
def _show_lead(lead: LeadTime) -> float | dict[str, Any]:
    if lead.dist == "fixed":
        return lead.mean
    if lead.dist == "uniform":
        return {"dist": "uniform", "low": lead.low, "high": lead.high}
    if lead.dist == "normal":
        return {"dist": "normal", "mean": lead.mean, "sd": lead.sd}
    return {"dist": lead.dist, "mean": lead.mean}


def _show_host_model(t: TemplateModel) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    if t.market:
        shown["market"] = t.market
    model = t.model
    shown.update(
        lead_time=_show_lead(model.lead_time), failure_rate=model.failure_rate,
        capacity=None if model.capacity >= UNLIMITED else model.capacity,
        reclaim_rate=model.reclaim_rate,
    )
    if t.limit is not None:
        shown["max"] = t.limit  # the catalog's max, capped to the provider's
    if t.note:
        shown["note"] = t.note
    return shown


def _describe(model: ProviderModel) -> str:
    lead = _show_lead(model.lead_time)
    if isinstance(lead, dict):
        lead_text = "lead " + " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in lead.items())
    else:
        lead_text = f"lead {lead:g} s"
    capacity = "-" if model.capacity >= UNLIMITED else str(model.capacity)
    return (f"{lead_text}; failures {model.failure_rate:g}; capacity {capacity}; "
            f"reclaims {model.reclaim_rate:g}/h")
