"""What hosts of priced templates cost (a template's `price` is per host-hour): the one
rule the simulator's summary and report, `xce demand` and `xce provisioner status`
share. Per template, an amount (hosts, or host-hours) times its price; the total is
their sum. Amounts are rounded to 3 decimal places, as the summary's host-hours."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from xce.model.lifecycle import HostState

DECIMALS = 3
# The states of a provisioned host that its provider bills: joined and not given back.
RUNNING_STATES: Final = (HostState.OK, HostState.CLOSED, HostState.UNREACH)


class Priced(Protocol):
    """A template as configured (HostTemplate) or as the API shows it (TemplateInfo)."""

    @property
    def name(self) -> str: ...

    @property
    def price(self) -> float: ...


def template_prices(templates: Iterable[Priced]) -> dict[str, float]:
    """Each template's price per host-hour; empty when none has a price (nothing is
    priced, so no cost is shown)."""
    prices = {template.name: template.price for template in templates}
    return prices if any(price > 0 for price in prices.values()) else {}


def costs(
    amounts: Mapping[str, float], prices: Mapping[str, float]
) -> tuple[dict[str, float], float]:
    """Per template of `amounts` (hosts, or host-hours) the amount times its price (0
    for a template without one), in the order of `amounts`, and their total."""
    each = {name: amount * prices.get(name, 0.0) for name, amount in amounts.items()}
    total = sum(each.values())
    return {name: round(cost, DECIMALS) for name, cost in each.items()}, round(total, DECIMALS)
