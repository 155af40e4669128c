"""Resource-allocation limits (LSF `Limit` sections): which counters a job uses,
and the pend reason when one is reached."""

from __future__ import annotations

from xce.model.cluster import Limit


def limit_key(limit: Limit, user: str, queue: str) -> tuple[str, str] | None:
    """The counter of `limit` that a job of `user` in `queue` uses, or None if the
    limit does not apply to it."""
    if limit.users is None:
        user_part = ""
    elif limit.users == "each":
        user_part = user
    elif user in limit.users:
        user_part = ""
    else:
        return None
    if limit.queues is None:
        queue_part = ""
    elif limit.queues == "each":
        queue_part = queue
    elif queue in limit.queues:
        queue_part = ""
    else:
        return None
    return (user_part, queue_part)


def limit_reason(limit: Limit, what: str) -> str:
    """An LSF-like sentence naming the limit reached; `what` is e.g. '64 slots'."""
    if limit.users is not None:
        return f"The user has reached the limit {limit.name} ({what})"
    if limit.queues is not None:
        return f"The queue has reached the limit {limit.name} ({what})"
    return f"The limit {limit.name} has been reached ({what})"
