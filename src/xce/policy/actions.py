"""What the policy asks the provisioning side to do, each with its reason."""

from __future__ import annotations

import msgspec

from xce.model.causes import Cause


class RequestHosts(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    template: str
    count: int
    reason: str
    jobs: tuple[int, ...] = ()  # the jobs the demand was for, in scheduling order


class CancelHosts(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    """Cancel `count` hosts of a template still in flight (requested, not joined): the
    latest requested first."""

    template: str
    count: int
    reason: str


class RequestTokens(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    resource: str  # "vcs" or "hspice/cloud"
    amount: float
    reason: str


class DrainHost(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    """Close a provisioned host to new work (LSF: closed_RC), for `cause` (idle or
    lifetime: the close reason sent to the controller)."""

    host: str
    reason: str
    cause: Cause = Cause.IDLE


class DecommissionHost(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    """Give a drained, empty host back to its provider."""

    host: str
    reason: str
    cause: Cause = Cause.DRAINED


class ReturnTokens(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    resource: str
    amount: float
    reason: str


class SetAllowance(msgspec.Struct, frozen=True, tag=True, tag_field="action"):
    """Cap new hosts of a template (0 while backed off, so the scheduler moves demand to
    the next template by rank); `allowance=None` lifts the cap."""

    template: str
    allowance: int | None
    reason: str


Action = (
    RequestHosts | CancelHosts | RequestTokens | DrainHost | DecommissionHost | ReturnTokens
    | SetAllowance
)
