"""Host lists of queues and shared pools: names, ranges, `all`, `template:GLOB`."""

from __future__ import annotations

from collections.abc import Collection

from xce.config.fields import MapReader, Place, as_list, as_text
from xce.config.hostnames import expand_hostnames

ALL_HOSTS = "all"
TEMPLATE_PREFIX = "template:"


def read_entry_hosts(entry: MapReader, static_hosts: Collection[str]) -> tuple[str, ...] | None:
    """The `hosts:` list of a queue or pool entry; None when it has none (every host)."""
    if "hosts" not in entry:
        return None
    return read_host_patterns(entry.get("hosts"), entry.value_place("hosts"), static_hosts)


def read_host_patterns(
    value: object, place: Place, static_hosts: Collection[str]
) -> tuple[str, ...]:
    """Validate the `hosts:` list of a queue or pool (callers map an absent list to None).

    Names and ranges are expanded and must be static hosts; `all` and `template:GLOB`
    are kept verbatim. Repeated names are kept once, in first-seen order.
    """
    items = as_list(value, place)
    if not items:
        place.fail("must not be empty (omit hosts for every host)")
    patterns: dict[str, None] = {}
    for item, item_place in items:
        pattern = as_text(item, item_place)
        if pattern == ALL_HOSTS:
            patterns[pattern] = None
        elif pattern.startswith(TEMPLATE_PREFIX):
            if not pattern[len(TEMPLATE_PREFIX) :].strip():
                item_place.fail(f"{pattern!r} needs a template name pattern after ':'")
            patterns[pattern] = None
        else:
            try:
                names = expand_hostnames(pattern)
            except ValueError as exc:
                item_place.fail(str(exc))
            for name in names:
                if name not in static_hosts:
                    item_place.fail(f"unknown host {name!r}")
                patterns[name] = None
    return tuple(patterns)
