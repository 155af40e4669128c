"""The host lifecycle: one transition table, a reason for every edge.

Provisioned hosts: expected -> ok (joined) -> closed (drain) -> decommissioned -> removed;
an expected host past its join deadline becomes failed, a cancelled one is removed.
Any host: ok/closed -> unreach (no heartbeat) -> back, or lost (unreachable too long:
its jobs are requeued or exited) -> back; ok/closed -> lost when the provider takes it
back. A static host is unavail until its agent first registers.

Each transition is one durable fact. `closed` carries why: admin, idle, lifetime or
reclaim (shown as closed_Adm, closed_Idle, closed_Life, closed_Recl by `xce hosts`).
"""

from __future__ import annotations

RECLAIMED = "reclaimed by the provider"  # a host lost for good: its agent may not return

# (from, to) -> the reason recorded when none more specific is given
TRANSITIONS: dict[tuple[str, str], str] = {
    ("expected", "ok"): "joined",
    ("expected", "failed"): "join deadline passed",
    ("expected", "removed"): "cancelled",
    ("failed", "removed"): "cleared",
    ("unavail", "ok"): "agent registered",
    ("ok", "closed"): "admin",
    ("closed", "ok"): "opened",
    ("closed", "decommissioned"): "decommissioned",
    ("lost", "decommissioned"): "decommissioned",
    ("decommissioned", "removed"): "released",
    ("ok", "unreach"): "no heartbeat",
    ("closed", "unreach"): "no heartbeat",
    ("unreach", "ok"): "heartbeat again",
    ("unreach", "closed"): "heartbeat again",
    ("unreach", "lost"): "unreachable too long",
    ("lost", "ok"): "agent back",
    ("lost", "closed"): "agent back",
    ("ok", "lost"): RECLAIMED,
    ("closed", "lost"): RECLAIMED,
}
CLOSE_REASONS = {"admin": "closed_Adm", "idle": "closed_Idle", "lifetime": "closed_Life",
                 "reclaim": "closed_Recl"}


class TransitionError(ValueError):
    """A transition the table does not allow."""


def reason_for(name: str, current: str, target: str, reason: str = "") -> str:
    """The reason to record for `current -> target`, or TransitionError."""
    default = TRANSITIONS.get((current, target))
    if default is None:
        allowed = sorted(t for (f, t) in TRANSITIONS if f == current)
        raise TransitionError(
            f"host {name} is {current}: it cannot become {target} "
            f"(from {current}: {', '.join(allowed) or 'nothing'})"
        )
    if target == "closed" and current == "ok" and reason and reason not in CLOSE_REASONS:
        raise TransitionError(
            f"host {name}: close reason must be one of {', '.join(CLOSE_REASONS)}"
        )
    return reason or default


def status_label(state: str, reason: str) -> str:
    """The STATUS column: closed_Adm and friends for closed hosts."""
    if state == "closed":
        return CLOSE_REASONS.get(reason, "closed")
    return state
