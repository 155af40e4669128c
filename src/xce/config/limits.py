"""The `limits:` section (LSF `Limit` sections)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from xce.config.fields import MapReader, Place, as_entries, as_list, as_text, describe
from xce.model.cluster import Limit

EACH = "each"
_LIMIT_KEYS = ("name", "slots", "jobs", "users", "queues")


def read_limits(value: object, place: Place, queue_names: Collection[str]) -> tuple[Limit, ...]:
    """Validate `limits:`: unique names, slots and/or jobs, users and queues dimensions."""
    limits: list[Limit] = []
    names: set[str] = set()
    for entry in as_entries(value, place, _LIMIT_KEYS):
        name = entry.unique_text("name", names, "limit")
        slots = entry.optional_integer("slots", minimum=0)
        jobs = entry.optional_integer("jobs", minimum=0)
        if slots is None and jobs is None:
            entry.place.fail("a limit needs slots or jobs")
        users = _read_dimension(entry, "users", "user names", None)
        queues = _read_dimension(entry, "queues", "queue names", queue_names)
        limits.append(Limit(name=name, slots=slots, jobs=jobs, users=users, queues=queues))
    return tuple(limits)


def _read_dimension(
    entry: MapReader, key: str, what: str, known: Collection[str] | None
) -> Literal["each"] | tuple[str, ...] | None:
    """`each`, or a non-empty list of names (checked against `known` when given)."""
    if key not in entry:
        return None
    value, place = entry.get(key), entry.value_place(key)
    if value == EACH:
        return "each"
    if not isinstance(value, list):
        place.fail(f"expected 'each' or a list of {what}, got {describe(value)}")
    items = as_list(value, place)
    if not items:
        place.fail(f"expected 'each' or a list of {what}, got an empty list")
    names: dict[str, None] = {}
    for item, item_place in items:
        name = as_text(item, item_place)
        if known is not None and name not in known:
            item_place.fail(f"unknown {key[:-1]} {name!r}")
        names[name] = None
    return tuple(names)
