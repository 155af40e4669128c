"""Sections kept as plain data (`policy:`, `simulation:`) until their owners type them."""

from __future__ import annotations

from xce.config.fields import MapReader, Place


def read_plain_mapping(value: object | None, place: Place) -> dict[str, object]:
    """A mapping converted to plain dicts and lists (no line marks); {} when absent."""
    if value is None:
        return {}
    MapReader(value, place)  # must be a mapping
    try:
        plain = _to_plain(value, place, {}, set())
    except RecursionError:
        place.fail("nested too deeply")
    assert isinstance(plain, dict)
    return plain


def _to_plain(value: object, place: Place, done: dict[int, object], active: set[int]) -> object:
    if not isinstance(value, dict | list):
        return value
    if id(value) in done:  # an alias used twice: share, do not copy again
        return done[id(value)]
    if id(value) in active:
        place.fail("a recursive alias cannot be used here")
    active.add(id(value))
    converted: object
    if isinstance(value, dict):
        converted = {key: _to_plain(item, place, done, active) for key, item in value.items()}
    else:
        converted = [_to_plain(item, place, done, active) for item in value]
    active.discard(id(value))
    done[id(value)] = converted
    return converted
