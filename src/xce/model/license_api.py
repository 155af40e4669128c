"""The license pool's wire types (msgspec structs): what its HTTP API reads and writes.

Shared by the pool service (`xce.license`, which serves them) and the license provider
(`xce.provisioner.providers.license`, which sends and reads them); documented in
docs/providers/license.md.

Amounts of tokens are numbers (JSON numbers, above 0); times are epoch seconds; `ttl`
is in seconds. Request bodies refuse unknown fields.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

# Feature names appear in URLs (`/features/{feature}/borrow`): no slash, no space.
FEATURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")

Holder = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Amount = Annotated[float, msgspec.Meta(gt=0)]
Seconds = Annotated[float, msgspec.Meta(gt=0)]


class FeatureInfo(msgspec.Struct, frozen=True):
    """One feature of the pool: its tokens and how many are lent."""

    name: str
    total: float  # tokens of the pool
    in_use: float  # tokens held by live leases
    free: float  # total less in use (never below 0)
    leases: int  # live leases of the feature


class FeatureList(msgspec.Struct, frozen=True):
    features: list[FeatureInfo]


class Lease(msgspec.Struct, frozen=True):
    """Tokens of one feature lent to one holder until `expires` (unless renewed)."""

    id: str
    feature: str
    holder: str
    amount: float
    ttl: float  # seconds a renewal adds from the time of the renewal
    granted: float  # epoch seconds: when the tokens were borrowed
    renewed: float  # epoch seconds: the last borrow or renewal
    expires: float  # epoch seconds: dropped, its tokens free, from then on


class LeaseList(msgspec.Struct, frozen=True):
    leases: list[Lease]


class BorrowRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /features/{feature}/borrow`."""

    holder: Holder
    amount: Amount
    ttl: Seconds | None = None  # default: the pool's --lease-ttl
    partial: bool = False  # true: take what is free, up to amount (at least some)


class RenewRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /leases/{id}/renew` (the body may be empty)."""

    ttl: Seconds | None = None  # default: the lease's own ttl


class ReturnRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`POST /leases/{id}/return` (the body may be empty)."""

    amount: Amount | None = None  # default: the whole lease


class Returned(msgspec.Struct, frozen=True):
    """What a return did: `remaining` 0 means the lease is gone."""

    id: str
    feature: str
    holder: str
    returned: float
    remaining: float


class ApiError(msgspec.Struct, frozen=True):
    """Every error response: `{"error": "...", "status": 409}`."""

    error: str
    status: int


class PoolState(msgspec.Struct, frozen=True):
    """The `--state` file: the live leases (features come from the command line)."""

    version: int = 1
    leases: list[Lease] = []
