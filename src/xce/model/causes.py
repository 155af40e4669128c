"""Why a host (or its provider's instance) leaves service, or never enters it: a cause
for programs, kept apart from the reason for people (like Ray's termination causes).
Actions carry their cause (`DrainHost(cause=LIFETIME)`), and so do the facts of a
lifecycle change (`HostStateChanged.cause`, `ExpectedHostEnded.cause`,
`InstanceChanged.cause`); what a driver does follows from it, never from the reason's
words (xce.model.lifecycle: the tables, and how a fact written before facts carried a
cause gets one).

The first four values are the close reasons of the controller's API (`POST
/hosts/{name}/close?reason=`) and of `HostStateChanged` facts, so a close's cause is
sent and stored as it is."""

from __future__ import annotations

from enum import StrEnum


class Cause(StrEnum):
    ADMIN = "admin"  # an administrator closed it
    IDLE = "idle"  # idle past its template's idle time: given back
    LIFETIME = "lifetime"  # reached the policy's max_lifetime
    # its provider takes it back: announced (the host is closed, closed_Recl) or done
    # (the host is lost, its jobs requeued or exited; its instance lost)
    RECLAIM = "reclaim"
    DRAINED = "drained"  # closed and empty: given back to its provider
    CANCELLED = "cancelled"  # an expected host removed before it joined (no job needs it)
    REFUSED = "refused"  # its provider refused the request: the expected host is removed
