"""The `resources:` section, and resource values given by hosts and templates."""

from __future__ import annotations

import re
from typing import Literal

from xce.config.fields import MapReader, Place, as_bool, as_number, describe
from xce.model.cluster import ResourceDef, ResourceValue
from xce.resreq import NGPUS

BUILTIN_RESOURCES = frozenset({"slots", "type", "model", "hname", NGPUS})
_RESOURCE_KEYS = ("type", "consumable", "shared")
# Names appear in requirement strings (`select[mem>4000]`) and in `resource/pool`.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def read_resources(value: object, place: Place) -> dict[str, ResourceDef]:
    """Validate `resources:` (name -> {type, consumable, shared}) in config order."""
    section = MapReader(value, place)
    resources: dict[str, ResourceDef] = {}
    for name, _, _ in section.items():
        checked = resource_name(name, section.key_place(name))
        resources[checked] = _read_resource(
            checked, section.get(checked), section.value_place(checked)
        )
    return resources


def resource_name(name: object, place: Place) -> str:
    """A name that may be declared as a resource (`resources:`, or a pool of `shared:`
    that declares its resource)."""
    if not isinstance(name, str):
        place.fail(f"a resource name must be a string, got {describe(name)}")
    if name in BUILTIN_RESOURCES:
        place.fail(f"{name!r} is a builtin resource and cannot be declared")
    if not _NAME.match(name):
        place.fail(
            f"invalid resource name {name!r}: use letters, digits and '_', "
            "not starting with a digit"
        )
    return name


def _read_resource(name: str, value: object, place: Place) -> ResourceDef:
    entry = MapReader(value, place, _RESOURCE_KEYS)
    kind: Literal["numeric", "boolean"] = "numeric"
    if "type" in entry:
        type_place = entry.value_place("type")
        given = entry.get("type")
        if given == "numeric":
            kind = "numeric"
        elif given == "boolean":
            kind = "boolean"
        else:
            type_place.fail(f"type must be 'numeric' or 'boolean', got {describe(given)}")
    shared = entry.flag("shared", False)
    consumable = entry.flag("consumable", shared)
    if kind == "boolean" and shared:
        entry.value_place("shared").fail("a boolean resource cannot be shared")
    if kind == "boolean" and consumable:
        entry.value_place("consumable").fail("a boolean resource cannot be consumable")
    if shared and not consumable:
        entry.value_place("consumable").fail("a shared resource must be consumable")
    return ResourceDef(name=name, type=kind, consumable=consumable, shared=shared)


def read_resource_values(
    value: object, place: Place, resources: dict[str, ResourceDef]
) -> dict[str, ResourceValue]:
    """Validate the `resources:` of a host or template: declared, per-host resources.

    Boolean resources take true/false; numeric ones a number >= 0 (stored as float).
    """
    section = MapReader(value, place)
    values: dict[str, ResourceValue] = {}
    for name, given, value_place in section.items():
        definition = resources.get(name) if isinstance(name, str) else None
        if definition is None:
            section.key_place(name).fail(f"unknown resource {name!r}")
        if definition.shared:
            section.key_place(name).fail(
                f"shared resource {definition.name!r} cannot be a host resource"
            )
        if definition.type == "boolean":
            values[definition.name] = as_bool(given, value_place)
        else:
            values[definition.name] = as_number(given, value_place, definition.name, minimum=0)
    return values
