"""The `hosts:` section: static hosts, name ranges expanded."""

from __future__ import annotations

from xce.config.fields import MapReader, Place, as_entries, as_text
from xce.config.host_patterns import ALL_HOSTS, TEMPLATE_PREFIX
from xce.config.hostnames import expand_hostnames
from xce.config.resources import read_resource_values
from xce.model.cluster import HostSpec, ResourceDef, ResourceValue

_HOST_KEYS = ("name", "slots", "gpus", "type", "model", "resources")


def read_hosts(
    value: object, place: Place, resources: dict[str, ResourceDef]
) -> tuple[HostSpec, ...]:
    """Validate `hosts:` into one HostSpec per host name, in config order.

    A name may be a range (`n[02-10]`); every host of a range shares the entry's
    attributes. A name seen before (in any entry) is an error at the later entry.
    """
    hosts: list[HostSpec] = []
    seen: set[str] = set()
    for entry in as_entries(value, place, _HOST_KEYS):
        pattern, name_place = entry.required("name")
        names = _expand(as_text(pattern, name_place), name_place)
        slots, host_type, model, values = read_host_shape(entry, resources, min_slots=0)
        gpus = read_gpus(entry)
        for name in names:
            if name in seen:
                name_place.fail(f"duplicate host {name!r}")
            seen.add(name)
            hosts.append(
                HostSpec(
                    name=name, slots=slots, type=host_type, model=model,
                    resources=dict(values), gpus=gpus,
                )
            )
    return tuple(hosts)


def read_host_shape(
    entry: MapReader, resources: dict[str, ResourceDef], *, min_slots: int
) -> tuple[int, str, str, dict[str, ResourceValue]]:
    """The `slots`, `type`, `model` and `resources` of a static host entry or of a
    template, read in that order."""
    slots = entry.integer("slots", minimum=min_slots)
    host_type = entry.text("type", "X86_64")
    model = entry.text("model", "", nonempty=False)
    values: dict[str, ResourceValue] = {}
    if (section := entry.section("resources")) is not None:
        values = read_resource_values(*section, resources)
    return slots, host_type, model, values


def read_gpus(entry: MapReader) -> int:
    """The `gpus` of a static host entry or of a template: GPUs per host, an integer
    >= 0 (default 0), the built-in `ngpus` of select[] and order[]."""
    return entry.integer("gpus", 0, minimum=0)


def _expand(pattern: str, place: Place) -> list[str]:
    if pattern == ALL_HOSTS or pattern.startswith(TEMPLATE_PREFIX):
        place.fail(f"{pattern!r} is reserved in host lists and cannot name a host")
    try:
        return expand_hostnames(pattern)
    except ValueError as exc:
        place.fail(str(exc))
