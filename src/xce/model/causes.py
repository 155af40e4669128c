"""Why a host leaves service: a cause for programs, kept apart from the reason for
people (like Ray's termination causes). Actions carry their cause (`DrainHost(cause=
LIFETIME)`); what a driver does follows from it, never from the reason's words.

The values are the close reasons of the controller's API (`POST /hosts/{name}/close?
reason=`) and of `HostStateChanged` facts, so a cause is sent and stored as it is."""

from __future__ import annotations

from enum import StrEnum


class Cause(StrEnum):
    ADMIN = "admin"  # an administrator closed it
    IDLE = "idle"  # idle past its template's idle time: given back
    LIFETIME = "lifetime"  # reached the policy's max_lifetime
    RECLAIM = "reclaim"  # its provider takes it back soon (a notice)
    DRAINED = "drained"  # closed and empty: given back to its provider
