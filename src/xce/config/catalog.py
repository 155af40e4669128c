"""The `catalog:` section: host templates and countable shared resources."""

from __future__ import annotations

from xce.config.fields import MapReader, Place, as_entries, describe
from xce.config.hosts import read_gpus, read_host_shape
from xce.model.cluster import (
    CHOOSE_RULES,
    Catalog,
    Choose,
    Countable,
    HostTemplate,
    ResourceDef,
    SharedPool,
)

_CATALOG_KEYS = (
    "idle_time", "max_jobs_per_session", "templates", "countables", "choose", "static_first"
)
_TEMPLATE_KEYS = (
    "name",
    "provider",
    "slots",
    "gpus",
    "type",
    "model",
    "resources",
    "max",
    "rank",
    "idle_time",
    "expected_lead_time",
    "price",
)
_COUNTABLE_KEYS = ("resource", "pool", "max_borrow", "idle_time", "provider")


def read_catalog(
    value: object | None,
    place: Place,
    resources: dict[str, ResourceDef],
    shared: dict[str, tuple[SharedPool, ...]],
) -> Catalog:
    """Validate `catalog:`; templates and countables stay in config order."""
    if value is None:
        return Catalog()
    section = MapReader(value, place, _CATALOG_KEYS)
    defaults = Catalog()
    idle_time = section.number("idle_time", defaults.idle_time, minimum=0)
    max_jobs = section.integer("max_jobs_per_session", defaults.max_jobs_per_session, minimum=0)
    choose = _read_choose(section, defaults.choose)
    static_first = section.flag("static_first", defaults.static_first)
    templates: tuple[HostTemplate, ...] = ()
    if (templates_section := section.section("templates")) is not None:
        templates = _read_templates(*templates_section, resources)
    countables: tuple[Countable, ...] = ()
    if (countables_section := section.section("countables")) is not None:
        countables = _read_countables(*countables_section, resources, shared)
    return Catalog(
        idle_time=idle_time,
        max_jobs_per_session=max_jobs,
        templates=templates,
        countables=countables,
        choose=choose,
        static_first=static_first,
    )


def _read_choose(section: MapReader, default: Choose) -> Choose:
    """`catalog.choose`: where new hosts come from (rank, cost or least-waste)."""
    value = section.text("choose", default)
    for rule in CHOOSE_RULES:
        if value == rule:
            return rule
    section.value_place("choose").fail(
        f"expected one of {', '.join(CHOOSE_RULES)}, got {value!r}"
    )


def _read_templates(
    value: object, place: Place, resources: dict[str, ResourceDef]
) -> tuple[HostTemplate, ...]:
    templates: list[HostTemplate] = []
    names: set[str] = set()
    for entry in as_entries(value, place, _TEMPLATE_KEYS):
        name = entry.unique_text("name", names, "template")
        provider = entry.text("provider")
        slots, host_type, model, values = read_host_shape(entry, resources, min_slots=1)
        templates.append(
            HostTemplate(
                name=name,
                provider=provider,
                slots=slots,
                type=host_type,
                model=model,
                resources=values,
                gpus=read_gpus(entry),
                max=entry.integer("max", 0, minimum=0),
                rank=entry.integer("rank", 0),
                idle_time=entry.optional_number("idle_time", minimum=0),
                expected_lead_time=entry.optional_number("expected_lead_time", minimum=0),
                price=entry.number("price", 0.0, minimum=0),
            )
        )
    return tuple(templates)


def _read_countables(
    value: object,
    place: Place,
    resources: dict[str, ResourceDef],
    shared: dict[str, tuple[SharedPool, ...]],
) -> tuple[Countable, ...]:
    countables: list[Countable] = []
    seen: set[tuple[str, str]] = set()
    for entry in as_entries(value, place, _COUNTABLE_KEYS):
        resource = entry.text("resource")
        resource_place = entry.value_place("resource")
        if resource not in resources:
            resource_place.fail(f"unknown resource {resource!r}")
        if resource not in shared:
            resource_place.fail(f"resource {resource!r} is not shared")
        pool = _read_pool(entry, resource, shared[resource])
        if (resource, pool) in seen:
            resource_place.fail(f"duplicate countable '{resource}/{pool}'")
        seen.add((resource, pool))
        countables.append(
            Countable(
                resource=resource,
                pool=pool,
                max_borrow=entry.number("max_borrow", 0, minimum=0),
                idle_time=entry.number("idle_time", 300, minimum=0),
                provider=entry.text("provider", ""),
            )
        )
    return tuple(countables)


def _read_pool(entry: MapReader, resource: str, pools: tuple[SharedPool, ...]) -> str:
    """The pool borrowed tokens go to: named, or the only pool of the resource."""
    if "pool" not in entry:
        if len(pools) > 1:
            entry.value_place("pool").fail(f"resource {resource!r} has several pools: name one")
        return pools[0].pool
    name = entry.get("pool")
    if not isinstance(name, str):
        entry.value_place("pool").fail(f"expected a string, got {describe(name)}")
    if all(pool.pool != name for pool in pools):
        known = ", ".join(pool.pool for pool in pools)
        entry.value_place("pool").fail(
            f"unknown pool {name!r} of resource {resource!r} (pools: {known})"
        )
    return name
