"""The host lifecycle: one transition table, a reason for every edge.

Provisioned hosts: expected -> ok (joined) -> closed (drain) -> decommissioned -> removed;
an expected host past its join deadline becomes failed, a cancelled one is removed.
Any host: ok/closed -> unreach (no heartbeat) -> back, or lost (unreachable too long:
its jobs are requeued or exited) -> back; ok/closed -> lost when the provider takes it
back. A static host is unavail until its agent first registers.

Each transition is one durable fact (`HostStateChanged`; `ExpectedHostEnded` for an
expected host that fails or is removed). `closed` carries why as its reason, a cause's
value: admin, idle, lifetime or reclaim (shown as closed_Adm, closed_Idle, closed_Life,
closed_Recl by `xce hosts`). A host lost because its provider took it back carries
`cause=reclaim` (its agent may not come back); its reason stays the sentence RECLAIMED.
"""

from __future__ import annotations

from enum import StrEnum

from xce.model.causes import Cause
from xce.model.lifecycle.table import Lifecycle


class HostState(StrEnum):
    """A host's state, as facts, snapshots and the API store it."""

    EXPECTED = "expected"  # requested from a provider, not joined (counts as in flight)
    UNAVAIL = "unavail"  # a static host whose agent has not registered yet
    OK = "ok"
    CLOSED = "closed"  # no new jobs; running ones finish
    UNREACH = "unreach"  # no heartbeat
    LOST = "lost"  # unreachable too long, or reclaimed: its jobs requeued or exited
    FAILED = "failed"  # an expected host that did not join by its deadline
    DECOMMISSIONED = "decommissioned"  # given back: its provider releases it
    REMOVED = "removed"  # not a state a host is in: it is gone


RECLAIMED = "reclaimed by the provider"  # the reason of a host lost for good
# A close's reason is its cause's value; how `xce hosts` shows each (STATUS).
CLOSE_REASONS: dict[str, str] = {
    Cause.ADMIN: "closed_Adm",
    Cause.IDLE: "closed_Idle",
    Cause.LIFETIME: "closed_Life",
    Cause.RECLAIM: "closed_Recl",
}

HOST_LIFE: Lifecycle[HostState] = Lifecycle(
    "host",
    HostState,
    {
        (HostState.EXPECTED, HostState.OK): "joined",
        (HostState.EXPECTED, HostState.FAILED): "join deadline passed",
        (HostState.EXPECTED, HostState.REMOVED): "cancelled",
        (HostState.FAILED, HostState.REMOVED): "cleared",
        (HostState.UNAVAIL, HostState.OK): "agent registered",
        (HostState.OK, HostState.CLOSED): Cause.ADMIN.value,  # (a close's default)
        (HostState.CLOSED, HostState.OK): "opened",
        (HostState.CLOSED, HostState.DECOMMISSIONED): "decommissioned",
        (HostState.LOST, HostState.DECOMMISSIONED): "decommissioned",
        (HostState.DECOMMISSIONED, HostState.REMOVED): "released",
        (HostState.OK, HostState.UNREACH): "no heartbeat",
        (HostState.CLOSED, HostState.UNREACH): "no heartbeat",
        (HostState.UNREACH, HostState.OK): "heartbeat again",
        (HostState.UNREACH, HostState.CLOSED): "heartbeat again",
        (HostState.UNREACH, HostState.LOST): "unreachable too long",
        (HostState.LOST, HostState.OK): "agent back",
        (HostState.LOST, HostState.CLOSED): "agent back",
        (HostState.OK, HostState.LOST): RECLAIMED,
        (HostState.CLOSED, HostState.LOST): RECLAIMED,
    },
    final=(HostState.REMOVED,),
    choices={(HostState.OK, HostState.CLOSED): ("close reason", tuple(CLOSE_REASONS))},
    # The cause of a fact that carries none (every fact of release 0.1): a close's
    # reason is its cause's value; a host lost with RECLAIMED was reclaimed.
    stored={
        **{(HostState.CLOSED, reason): Cause(reason) for reason in CLOSE_REASONS},
        (HostState.LOST, RECLAIMED): Cause.RECLAIM,
    },
)


def host_change(name: str, current: str, target: str, reason: str = "",
                cause: Cause | None = None) -> tuple[str, Cause | None]:
    """The reason and the cause a host's change `current -> target` records
    (TransitionError if the table forbids it). A close needs no cause given: its
    reason is its cause's value (admin by default)."""
    why = HOST_LIFE.reason_for(name, current, target, reason)
    return why, HOST_LIFE.cause_of(target, why, cause)


def status_label(state: str, reason: str) -> str:
    """The STATUS column: closed_Adm and friends for closed hosts (a closed host's
    reason is its close cause's value)."""
    if state == HostState.CLOSED:
        return CLOSE_REASONS.get(reason, "closed")
    return state
