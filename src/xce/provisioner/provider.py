"""The seam between the provisioner and whatever supplies hosts and tokens: a small
`Provider` protocol and the data it exchanges (docs/providers.md).

A provider describes what it can supply, starts one machine per expected host (each
with the host's name and join token, so that its agent joins as that host), releases
machines, lists everything it has for the cluster (so the provisioner can reconcile its
own records after a crash or a takeover), and lends and takes back tokens of countable
pools. Every refusal is a `ProviderError` whose `kind` tells the caller how to react.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol, TypeVar

import msgspec

from xce.model.cluster import HostShape

ErrorKind = Literal["capacity", "request", "unavailable"]
# A machine as its provider's inventory lists it (not the controller's record of it,
# xce.model.lifecycle.InstanceState): running, or gone for good.
InstanceState = Literal["running", "gone"]
T = TypeVar("T")


class TemplateOffer(HostShape, frozen=True):
    """A host template as its provider offers it."""

    max: int = 0  # most instances of the template at once
    lead_time: float = 0.0  # typical seconds from request to a joined host
    cost_per_hour: float | None = None  # None: unknown


class PoolOffer(msgspec.Struct, frozen=True):
    """A countable pool the provider lends tokens of."""

    pool: str  # the pool key: "vcs", or "hspice/cloud" for a resource of several pools
    size: float  # the most tokens it lends at once


class Description(msgspec.Struct, frozen=True):
    """What a provider can supply."""

    provider: str
    templates: tuple[TemplateOffer, ...] = ()
    pools: tuple[PoolOffer, ...] = ()


class HostGrant(msgspec.Struct, frozen=True):
    """An expected host as the controller made it: the name its agent must join as,
    and the single-use join token it must present."""

    name: str
    join_token: str


class Instance(msgspec.Struct, frozen=True):
    """One machine of the provider, tagged with what it was made for."""

    id: str
    cluster: str
    template: str
    request: str  # the provisioner's request id
    host: str  # the expected host it joins as
    state: InstanceState
    started: float  # epoch seconds
    reclaim_at: float | None = None  # the provider announced it takes it back then


# Host names become directory names and tags: no separators, no leading dot.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def grant_names(hosts: Sequence[HostGrant]) -> list[str]:
    """The names of the hosts a request is for, checked: plain names, each once."""
    names = [grant.name for grant in hosts]
    for name in names:
        if not HOST_NAME.fullmatch(name):
            raise ProviderError("request", f"host name {name!r} is not a plain name")
    if len(set(names)) != len(names):
        raise ProviderError("request", f"a host is named twice in {', '.join(names)}")
    return names


def offered_template(templates: Mapping[str, T], name: str, refusal: str, listed: str) -> T:
    """`templates[name]`; else a `request` ProviderError: `refusal` and the templates
    served, in their order (`listed` names them: "its templates")."""
    found = templates.get(name)
    if found is None:
        raise _not_served(refusal, listed, templates)
    return found


def lent_pool(pools: Mapping[str, T], pool: str, amount: float, refusal: str,
              listed: str) -> T:
    """`pools[pool]`, once `amount` is known to be a number of tokens above 0; else a
    `request` ProviderError (for an unknown pool: `refusal` and the pools served,
    sorted, `listed` naming them: "its pools")."""
    found = pools.get(pool)
    if found is None:
        raise _not_served(refusal, listed, sorted(pools))
    if not math.isfinite(amount) or amount <= 0:
        raise ProviderError("request", f"the amount must be a number above 0, not {amount:g}")
    return found


def _not_served(refusal: str, listed: str, served: Iterable[str]) -> ProviderError:
    return ProviderError("request", f"{refusal} ({listed}: {', '.join(served) or 'none'})")


class ProviderError(Exception):
    """A refusal or failure of a provider.

    `capacity`: the provider has no room now (try later, or another template);
    `request`: the request itself is wrong (do not retry it as is);
    `unavailable`: the provider cannot be reached or failed (back off, then retry).
    """

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind


class Provider(Protocol):
    """What the provisioner needs of a provider; every method may raise ProviderError."""

    def describe(self) -> Description:
        """The templates and pools this provider serves."""
        ...

    def request_hosts(self, request_id: str, template: str,
                      hosts: Sequence[HostGrant]) -> list[Instance]:
        """Start one instance of `template` per expected host, whose agent joins as that
        host with its token; the instances, in the order of `hosts`."""
        ...

    def release(self, instance_ids: Sequence[str]) -> None:
        """Stop and give back these instances."""
        ...

    def instances(self) -> list[Instance]:
        """Every instance the provider has for this cluster, running or gone."""
        ...

    def borrow(self, pool: str, amount: float) -> float:
        """Ask for `amount` tokens of `pool`; the amount granted (0 to `amount`)."""
        ...

    def give_back(self, pool: str, amount: float) -> None:
        """Return `amount` borrowed tokens of `pool`."""
        ...

    def lent(self) -> dict[str, float]:
        """Tokens of each pool it lends to this cluster now (for reconciliation)."""
        ...
