"""The `shared:` section: pools of shared (license-like) resources."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from xce.config.fields import MapReader, Place, as_entries, describe
from xce.config.host_patterns import NO_GROUPS, read_entry_hosts
from xce.config.resources import resource_name
from xce.model.cluster import ResourceDef, SharedPool

DEFAULT_POOL = "default"
_SHORTHAND_KEYS = ("total",)
_POOL_KEYS = ("pool", "total", "hosts")


def read_shared(
    value: object | None,
    place: Place,
    resources: dict[str, ResourceDef],
    static_hosts: Collection[str],
    host_groups: Mapping[str, tuple[str, ...]] = NO_GROUPS,
) -> dict[str, tuple[SharedPool, ...]]:
    """Validate `shared:` into the pools of every shared resource.

    `vcs: {total: 10}` is one pool "default" reachable from every host; a list gives
    named pools with host lists. A declared shared resource not listed here gets one
    empty pool "default"; a name listed here but not under `resources:` is declared
    by it, as a shared numeric consumable (added to `resources`, as FORMATS.md's
    `hspice`). Resources come in declaration order, pools in config order.
    """
    given: dict[str, tuple[SharedPool, ...]] = {}
    if value is not None:
        section = MapReader(value, place)
        for name, pools, pools_place in section.items():
            definition = resources.get(name) if isinstance(name, str) else None
            if definition is None:
                declared = resource_name(name, section.key_place(name))
                definition = resources[declared] = ResourceDef(
                    name=declared, consumable=True, shared=True
                )
            if not definition.shared:
                section.key_place(name).fail(f"resource {definition.name!r} is not shared")
            given[definition.name] = _read_pools(
                definition.name, pools, pools_place, static_hosts, host_groups
            )
    return {
        name: given.get(name, (SharedPool(resource=name, pool=DEFAULT_POOL, total=0),))
        for name, definition in resources.items()
        if definition.shared
    }


def _read_pools(
    resource: str,
    value: object,
    place: Place,
    static_hosts: Collection[str],
    host_groups: Mapping[str, tuple[str, ...]],
) -> tuple[SharedPool, ...]:
    if isinstance(value, dict):
        shorthand = MapReader(value, place, _SHORTHAND_KEYS)
        total = shorthand.number("total", minimum=0)
        return (SharedPool(resource=resource, pool=DEFAULT_POOL, total=total),)
    if not isinstance(value, list):
        place.fail(f"expected a mapping {{total: N}} or a list of pools, got {describe(value)}")
    entries = as_entries(value, place, _POOL_KEYS, empty="needs at least one pool")
    pools: list[SharedPool] = []
    names: set[str] = set()
    for entry in entries:
        name = entry.unique_text("pool", names, "pool")
        total = entry.number("total", minimum=0)
        hosts = read_entry_hosts(entry, static_hosts, host_groups)
        pools.append(SharedPool(resource=resource, pool=name, total=total, hosts=hosts))
    return tuple(pools)
