"""Pend reasons as plain LSF-like sentences, and the kinds the catalog pass reads."""

from __future__ import annotations

from typing import Final

from xce.resreq import Select

# A job that failed on resources may be helped by provisioning; the others may not.
RESOURCE: Final = "resource"
LIMIT: Final = "limit"
HOLD: Final = "hold"
PROVISIONING: Final = "provisioning"

HELD: Final = "The job was suspended by the user while pending"


def no_host(select: Select | None, queue: str) -> str:
    if select is not None:
        return f"No host satisfies select[{select.text}]"
    return f"No host is available to queue {queue}"


def none_open(closed: int) -> str:
    return f"No eligible host is open: {closed} closed or unavailable"


def short_shared(resource: str, short: float, free: float) -> str:
    return f"Short {short:g} of {resource} (shared): {free:g} free"
