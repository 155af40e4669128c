"""Host lists of queues and shared pools: names, ranges, `all`, `template:GLOB` and
host group names (`host_groups:`, resolved here into the entries they stand for)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from xce.config.fields import MapReader, Place, as_list, as_text
from xce.config.hostnames import expand_hostnames

ALL_HOSTS = "all"
TEMPLATE_PREFIX = "template:"
NO_GROUPS: Mapping[str, tuple[str, ...]] = {}


def read_entry_hosts(
    entry: MapReader,
    static_hosts: Collection[str],
    groups: Mapping[str, tuple[str, ...]] = NO_GROUPS,
) -> tuple[str, ...] | None:
    """The `hosts:` list of a queue or pool entry; None when it has none (every host)."""
    if "hosts" not in entry:
        return None
    return read_host_patterns(entry.get("hosts"), entry.value_place("hosts"), static_hosts, groups)


def read_host_patterns(
    value: object,
    place: Place,
    static_hosts: Collection[str],
    groups: Mapping[str, tuple[str, ...]] = NO_GROUPS,
) -> tuple[str, ...]:
    """Validate the `hosts:` list of a queue or pool (callers map an absent list to None).

    Names and ranges are expanded and must be static hosts; `all` and `template:GLOB`
    are kept verbatim; a host group stands for its entries. Repeated names are kept
    once, in first-seen order.
    """
    items = as_list(value, place)
    if not items:
        place.fail("must not be empty (omit hosts for every host)")
    patterns: dict[str, None] = {}
    for item, item_place in items:
        pattern = as_text(item, item_place)
        found = groups.get(pattern)
        if found is not None:
            patterns.update(dict.fromkeys(found))
        else:
            patterns.update(dict.fromkeys(expand_host_entry(pattern, item_place, static_hosts)))
    return tuple(patterns)


def expand_host_entry(pattern: str, place: Place, static_hosts: Collection[str]) -> list[str]:
    """One host-list entry other than a group: `all`, `template:GLOB` (kept), or a
    name or range of static hosts (expanded)."""
    if pattern == ALL_HOSTS:
        return [pattern]
    if pattern.startswith(TEMPLATE_PREFIX):
        if not pattern[len(TEMPLATE_PREFIX) :].strip():
            place.fail(f"{pattern!r} needs a template name pattern after ':'")
        return [pattern]
    try:
        names = expand_hostnames(pattern)
    except ValueError as exc:
        place.fail(str(exc))
    for name in names:
        if name not in static_hosts:
            place.fail(f"unknown host {name!r}")
    return names
