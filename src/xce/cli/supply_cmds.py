"""Shared pools and the runtime catalog from the command line: `xce resources` (like
LSF's `blhosts`/`bhosts -s` for shared resources) and the catalog part of
`xce demand -l`."""

from __future__ import annotations

import click

from xce.cli.client import Client, with_client
from xce.cli.client_cmds import JSON_OPTION, _amount, _echo_json, _echo_lines, _pool, table
from xce.model.api import CatalogInfo, ResourceList

RESOURCE_COLUMNS = ("RESOURCE", "POOL", "BASE", "BORROWED", "IN_FLIGHT", "RETURNING", "IN_USE",
                    "FREE", "HEADROOM")
UNSET = "-"  # not set at run time, or not countable


def resources_lines(answer: ResourceList) -> list[str]:
    """Every shared pool: its base total, borrowed tokens (part of the total), tokens
    asked for (in flight) and being returned, tokens in use and free, and how many more
    may be borrowed (`-`: a pool without a countable, which cannot borrow)."""
    if not answer.resources:
        return ["No shared resource."]
    return table(RESOURCE_COLUMNS, [
        [*_pool(p.pool), _amount(p.base), _amount(p.borrowed), _amount(p.in_flight),
         _amount(p.returning), _amount(p.in_use), _amount(p.free),
         UNSET if p.max_borrow is None else _amount(p.headroom)]
        for p in answer.resources
    ], RESOURCE_COLUMNS[2:])


def catalog_lines(catalog: CatalogInfo) -> list[str]:
    """The runtime catalog: per template, hosts alive and in flight, the runtime
    allowance (`-`: none) and how many more may be requested; per countable pool, the
    tokens borrowed, in flight and returning, and the headroom in force (RUNTIME: the
    value set at run time, `-`: none, max_borrow decides)."""
    lines: list[str] = []
    if catalog.templates:
        lines += ["", "Templates (runtime catalog):", *table(
            ("TEMPLATE", "PROVIDER", "MAX", "ALIVE", "IN_FLIGHT", "ALLOWANCE", "AVAILABLE"),
            [[t.name, t.provider, str(t.max), str(t.alive), str(t.in_flight),
              UNSET if t.allowance is None else str(t.allowance), str(t.available)]
             for t in catalog.templates],
            ("MAX", "ALIVE", "IN_FLIGHT", "ALLOWANCE", "AVAILABLE"),
        )]
    if catalog.countables:
        numbers = ("MAX_BORROW", "BORROWED", "IN_FLIGHT", "RETURNING", "HEADROOM", "RUNTIME")
        lines += ["", "Countable resources (runtime catalog):", *table(
            ("RESOURCE", "POOL", *numbers),
            [[*_pool(c.pool), _amount(c.max_borrow), _amount(c.borrowed),
              _amount(c.in_flight), _amount(c.returning), _amount(c.headroom),
              UNSET if c.runtime_headroom is None else _amount(c.runtime_headroom)]
             for c in catalog.countables],
            numbers,
        )]
    return lines or ["", "The catalog has no template and no countable resource."]


@click.command()
@JSON_OPTION
@with_client
def resources(client: Client, as_json: bool) -> None:
    """Show shared resources: each pool's base total, borrowed tokens, tokens in
    flight and being returned, tokens in use and free, and the headroom to borrow."""
    answer = client.resources()
    if as_json:
        _echo_json(answer)
    else:
        _echo_lines(resources_lines(answer))
