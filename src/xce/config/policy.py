"""The `policy:` and `simulation:` sections: provisioning knobs and simulated providers."""

from __future__ import annotations

from collections.abc import Collection

from xce.config.fields import MapReader, Place, as_int, as_number
from xce.model.cluster import Catalog
from xce.model.policy import (
    LeadTime,
    PolicyConfig,
    ProviderModel,
    SimulationConfig,
    TokenModel,
)

POLICY_KEYS = (
    "persistence", "max_requests_per_round", "min_hosts", "max_hosts", "max_lifetime", "backoff",
    "keep_idle_while_demand", "scale_down_delay_after_add", "cancel_surplus",
)

SIMULATION_KEYS = ("seed", "enforce_run_limits", "providers", "countables", "queue_mix")


def read_policy(value: object | None, place: Place, catalog: Catalog) -> PolicyConfig:
    """Validate `policy:`; template names in min_hosts/max_hosts must exist."""
    if value is None:
        return PolicyConfig()
    section = MapReader(value, place, POLICY_KEYS)
    defaults = PolicyConfig()
    templates = {t.name for t in catalog.templates}
    backoff_initial, backoff_max = defaults.backoff_initial, defaults.backoff_max
    if (found := section.section("backoff")) is not None:
        backoff = MapReader(*found, ("initial", "max"))
        backoff_initial = backoff.number("initial", backoff_initial, positive=True)
        backoff_max = backoff.number("max", backoff_max, positive=True)
        if backoff_max < backoff_initial:
            backoff.value_place("max").fail("max must be >= initial")
    return PolicyConfig(
        persistence=section.number("persistence", defaults.persistence, minimum=0),
        max_requests_per_round=section.integer(
            "max_requests_per_round", defaults.max_requests_per_round, minimum=1
        ),
        min_hosts=_min_hosts(section, catalog),
        max_hosts=_per_template(section, "max_hosts", templates),
        max_lifetime=section.number("max_lifetime", defaults.max_lifetime, minimum=0),
        backoff_initial=backoff_initial,
        backoff_max=backoff_max,
        keep_idle_while_demand=section.flag(
            "keep_idle_while_demand", defaults.keep_idle_while_demand
        ),
        scale_down_delay_after_add=section.number(
            "scale_down_delay_after_add", defaults.scale_down_delay_after_add, minimum=0
        ),
        cancel_surplus=section.flag("cancel_surplus", defaults.cancel_surplus),
    )


def _min_hosts(section: MapReader, catalog: Catalog) -> dict[str, int]:
    """`min_hosts`, each within its template's `max`."""
    counts = _per_template(section, "min_hosts", {t.name for t in catalog.templates})
    maxima = {t.name: t.max for t in catalog.templates}
    found = section.section("min_hosts")
    for name, count in counts.items():
        if count > maxima[name]:
            assert found is not None
            MapReader(*found).value_place(name).fail(
                f"min_hosts {count} is above template {name!r} max {maxima[name]}"
            )
    return counts


def _per_template(section: MapReader, key: str, templates: set[str]) -> dict[str, int]:
    found = section.section(key)
    if found is None:
        return {}
    counts: dict[str, int] = {}
    for name, count, place in MapReader(*found).items():
        if name not in templates:
            place.fail(f"unknown template {name!r}")
        counts[str(name)] = as_int(count, place, key, minimum=0)
    return counts


def read_simulation(
    value: object | None, place: Place, catalog: Catalog, queues: Collection[str] = ()
) -> SimulationConfig:
    """Validate `simulation:`; provider and countable names must be in the catalog,
    `queue_mix` names configured `queues` (each to a share > 0)."""
    if value is None:
        return SimulationConfig()
    section = MapReader(value, place, SIMULATION_KEYS)
    defaults = SimulationConfig()
    providers: dict[str, ProviderModel] = {}
    known_providers = {t.provider for t in catalog.templates}
    if (found := section.section("providers")) is not None:
        for name, model, model_place in MapReader(*found).items():
            if name not in known_providers:
                model_place.fail(f"no template uses provider {name!r}")
            providers[str(name)] = _provider(model, model_place)
    countables: dict[str, TokenModel] = {}
    known_resources = {c.resource for c in catalog.countables} | {
        f"{c.resource}/{c.pool}" for c in catalog.countables
    }
    if (found := section.section("countables")) is not None:
        for name, model, model_place in MapReader(*found).items():
            if name not in known_resources:
                model_place.fail(f"{name!r} is not a countable resource of the catalog")
            countables[str(name)] = _tokens(model, model_place)
    mix: dict[str, float] = {}
    if (found := section.section("queue_mix")) is not None:
        for name, share, share_place in MapReader(*found).items():
            if name not in queues:
                share_place.fail(f"unknown queue {name!r}")
            mix[str(name)] = as_number(share, share_place, "share", positive=True)
    return SimulationConfig(
        seed=section.integer("seed", defaults.seed),
        queue_mix=mix,
        enforce_run_limits=section.flag("enforce_run_limits", defaults.enforce_run_limits),
        providers=providers,
        countables=countables,
    )


def _provider(value: object, place: Place) -> ProviderModel:
    model = MapReader(value, place, ("lead_time", "failure_rate", "capacity", "reclaim_rate"))
    lead = LeadTime()
    raw = model.get("lead_time")
    if raw is not None:
        lead_place = model.value_place("lead_time")
        if isinstance(raw, dict):
            lead = _lead_time(raw, lead_place)
        else:
            lead = LeadTime(mean=as_number(raw, lead_place, "lead_time", minimum=0))
    return ProviderModel(
        lead_time=lead,
        failure_rate=_probability(model, "failure_rate"),
        capacity=model.integer("capacity", ProviderModel().capacity, minimum=0),
        reclaim_rate=model.number("reclaim_rate", 0.0, minimum=0),
    )


def _lead_time(value: object, place: Place) -> LeadTime:
    lead = MapReader(value, place, ("dist", "mean", "low", "high", "sd"))
    dist = lead.text("dist", "fixed")
    if dist not in ("fixed", "uniform", "exponential", "normal"):
        lead.value_place("dist").fail(
            f"unknown distribution {dist!r} (fixed, uniform, exponential or normal)"
        )
    if dist == "uniform":
        low = lead.number("low", minimum=0)
        high = lead.number("high", minimum=0)
        if high < low:
            lead.value_place("high").fail("high must be >= low")
        return LeadTime(dist="uniform", mean=(low + high) / 2, low=low, high=high)
    mean = lead.number("mean", minimum=0)
    sd = lead.number("sd", 0.0, minimum=0) if dist == "normal" else 0.0
    return LeadTime(dist=dist, mean=mean, sd=sd)  # type: ignore[arg-type]


def _tokens(value: object, place: Place) -> TokenModel:
    model = MapReader(value, place, ("grant_delay", "refusal_rate", "pool"))
    return TokenModel(
        grant_delay=model.number("grant_delay", 30.0, minimum=0),
        refusal_rate=_probability(model, "refusal_rate"),
        pool=model.optional_number("pool", minimum=0),
    )


def _probability(model: MapReader, key: str) -> float:
    rate = model.number(key, 0.0, minimum=0)
    if rate > 1:
        model.value_place(key).fail(f"{key} is a probability: at most 1")
    return rate
