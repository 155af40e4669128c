"""Typed reading of loaded YAML values, each error naming file, line and field.

Validation code reads a document through `MapReader` and the `as_*` helpers so that
every problem becomes a ConfigError pointing at the offending value. Plain dicts and
lists (no line marks) are accepted too; their lines fall back to the nearest marked
parent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NoReturn

from xce.config.errors import ConfigError
from xce.config.marked_yaml import MarkedMap, MarkedSeq


@dataclass(frozen=True, slots=True)
class Place:
    """Where a value sits: the file, its 1-based line and its field path."""

    filename: str
    line: int
    field: str

    def fail(self, message: str) -> NoReturn:
        """Raise the ConfigError for a problem at this place."""
        raise ConfigError(self.filename, self.line, self.field, message)

    def key(self, key: object, line: int | None = None) -> Place:
        """The place of `key` inside this mapping (at `line` when known)."""
        text = key if isinstance(key, str) else str(key)
        field = f"{self.field}.{text}" if self.field else text
        return Place(self.filename, self.line if line is None else line, field)

    def index(self, index: int, line: int | None = None) -> Place:
        """The place of item `index` inside this sequence (at `line` when known)."""
        return Place(self.filename, self.line if line is None else line, f"{self.field}[{index}]")


def describe(value: object) -> str:
    """A short description of a value's kind for error messages: "a string ('x')"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def line_of(value: object, default: int) -> int:
    """The line a loaded mapping or sequence starts on, else `default`."""
    if isinstance(value, MarkedMap | MarkedSeq) and value.line > 0:
        return value.line
    return default


class MapReader:
    """A mapping under validation: checks its keys and reads them with types."""

    def __init__(self, value: object, place: Place, allowed: Iterable[str] | None = None) -> None:
        if not isinstance(value, dict):
            place.fail(f"expected a mapping, got {describe(value)}")
        self.mapping: dict[object, object] = value
        self.place = Place(place.filename, line_of(value, place.line), place.field)
        if allowed is not None:
            known = set(allowed)
            for key in value:
                if key not in known:
                    self.key_place(key).fail(f"unknown key {key!r}")

    def __contains__(self, key: str) -> bool:
        return key in self.mapping

    def items(self) -> Iterator[tuple[object, object, Place]]:
        """Each key, its value and the value's place, in document order."""
        for key, value in self.mapping.items():
            yield key, value, self.value_place(key)

    def get(self, key: str) -> object:
        """The raw value of `key` (None when absent)."""
        return self.mapping.get(key)

    def key_place(self, key: object) -> Place:
        """The place of `key` itself (the mapping's line when the key is absent)."""
        line = self.mapping.line_of(key) if isinstance(self.mapping, MarkedMap) else None
        return self.place.key(key, line)

    def value_place(self, key: object) -> Place:
        """The place of the value of `key` (the mapping's line when the key is absent)."""
        value = self.mapping.get(key)
        if isinstance(self.mapping, MarkedMap):
            line = line_of(value, self.mapping.value_line_of(key))
        else:
            line = line_of(value, self.place.line)
        return self.place.key(key, line)

    def required(self, key: str) -> tuple[object, Place]:
        """The value of a key that must be present, with its place."""
        if key not in self.mapping:
            self.value_place(key).fail(f"missing required key {key!r}")
        return self.mapping[key], self.value_place(key)

    def section(self, key: str) -> tuple[object, Place] | None:
        """An optional section: None when absent or null (an emptied-out section)."""
        if self.mapping.get(key) is None:
            return None
        return self.mapping[key], self.value_place(key)

    def text(self, key: str, default: str | None = None, *, nonempty: bool = True) -> str:
        """A string value; required when `default` is None."""
        if default is not None and key not in self.mapping:
            return default
        value, place = self.required(key)
        return as_text(value, place, nonempty=nonempty)

    def integer(self, key: str, default: int | None = None, *, minimum: int | None = None) -> int:
        """An integer value (not a boolean); required when `default` is None."""
        if default is not None and key not in self.mapping:
            return default
        value, place = self.required(key)
        return as_int(value, place, key, minimum=minimum)

    def optional_integer(self, key: str, *, minimum: int | None = None) -> int | None:
        """An integer value, or None when absent."""
        if key not in self.mapping:
            return None
        return self.integer(key, minimum=minimum)

    def number(
        self,
        key: str,
        default: float | None = None,
        *,
        minimum: float | None = None,
        positive: bool = False,
    ) -> float:
        """A finite number (int or float, not a boolean); required when `default` is None."""
        if default is not None and key not in self.mapping:
            return default
        value, place = self.required(key)
        return as_number(value, place, key, minimum=minimum, positive=positive)

    def optional_number(self, key: str, *, minimum: float | None = None) -> float | None:
        """A finite number, or None when absent."""
        if key not in self.mapping:
            return None
        return self.number(key, minimum=minimum)

    def unique_text(self, key: str, seen: set[str], what: str) -> str:
        """A required name that no earlier entry of the list used (`seen` collects them)."""
        name = self.text(key)
        if name in seen:
            self.value_place(key).fail(f"duplicate {what} {name!r}")
        seen.add(name)
        return name

    def flag(self, key: str, default: bool) -> bool:
        """A boolean value (true/false)."""
        if key not in self.mapping:
            return default
        return as_bool(self.mapping[key], self.value_place(key))


def as_text(value: object, place: Place, *, nonempty: bool = True) -> str:
    """A string; YAML's other scalars (numbers, booleans, null) are refused."""
    if not isinstance(value, str):
        place.fail(f"expected a string, got {describe(value)}")
    if nonempty and not value.strip():
        place.fail("must not be empty")
    return value


def as_int(value: object, place: Place, name: str, *, minimum: int | None = None) -> int:
    """An integer (a boolean is not an integer here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        place.fail(f"expected an integer, got {describe(value)}")
    if minimum is not None and value < minimum:
        place.fail(f"{name} must be >= {minimum}")
    return value


def as_number(
    value: object,
    place: Place,
    name: str,
    *,
    minimum: float | None = None,
    positive: bool = False,
) -> float:
    """A finite int or float (not a boolean), returned as float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        place.fail(f"expected a number, got {describe(value)}")
    try:
        number = float(value)
    except OverflowError:
        place.fail(f"{name} is too large")
    if not math.isfinite(number):
        place.fail(f"{name} must be a finite number")
    if positive and number <= 0:
        place.fail(f"{name} must be > 0")
    if minimum is not None and number < minimum:
        place.fail(f"{name} must be >= {show_number(minimum)}")
    return number


def as_bool(value: object, place: Place) -> bool:
    """A boolean (true/false)."""
    if not isinstance(value, bool):
        place.fail(f"expected true or false, got {describe(value)}")
    return value


def as_list(value: object, place: Place) -> list[tuple[object, Place]]:
    """The items of a sequence with their places (a non-list value is an error)."""
    if not isinstance(value, list):
        place.fail(f"expected a list, got {describe(value)}")
    here = Place(place.filename, line_of(value, place.line), place.field)
    items: list[tuple[object, Place]] = []
    for index, item in enumerate(value):
        line = value.line_of(index) if isinstance(value, MarkedSeq) else here.line
        items.append((item, here.index(index, line_of(item, line))))
    return items


def as_entries(
    value: object, place: Place, allowed: Iterable[str], *, empty: str | None = None
) -> Iterator[MapReader]:
    """The items of a list section, each a mapping of the `allowed` keys (checked as
    it is reached, in order). `empty`: the complaint about an empty list (None: an
    empty list is fine)."""
    items = as_list(value, place)
    if not items and empty is not None:
        place.fail(empty)
    return (MapReader(item, item_place, allowed) for item, item_place in items)


def show_number(number: float) -> str:
    """A number as a user wrote it: 3600 for 3600.0, 0.5 as is."""
    return str(int(number)) if number == int(number) else str(number)


def as_id_range(text: str, place: Place) -> list[int]:
    """Job ids written as one id ("7") or an inclusive range ("3-1002")."""
    try:
        first, _, last = text.partition("-")
        low, high = int(first), int(last or first)
    except ValueError:
        place.fail(f"expected an id range like '3-1002', got '{text}'")
    if low < 0 or high < low or high - low > 10_000_000:
        place.fail(f"bad id range '{text}'")
    return list(range(low, high + 1))
