"""The parsed form of a requirement string."""

from __future__ import annotations

from dataclasses import dataclass

from xce.resreq.select import Select


@dataclass(frozen=True, slots=True)
class OrderKey:
    """One key of `order[...]`.

    `order[mem]` -> `OrderKey("mem", descending=True)`: hosts with the most free `mem`
    first (LSF: best first). `order[-mem]` -> `descending=False`: the least first
    (packing).
    """

    name: str  # a numeric resource name or "slots"
    descending: bool


@dataclass(frozen=True, slots=True)
class ResReq:
    """A parsed requirement string; empty sections are None or ().

    `name_columns` lists `(name, column, section)` for every resource or attribute
    name referenced in `select` (string literals excluded), `rusage` and `order`,
    in column order; `section` is "select", "rusage" or "order".
    """

    text: str
    select: Select | None = None
    rusage: tuple[tuple[str, float], ...] = ()
    span_hosts: int | None = None
    span_ptile: int | None = None
    order: tuple[OrderKey, ...] = ()
    name_columns: tuple[tuple[str, int, str], ...] = ()
