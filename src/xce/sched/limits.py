"""Resource-allocation limits (LSF `Limit` sections): which counters a job uses,
and the pend reason when one is reached."""

from __future__ import annotations

from typing import Literal

from xce.model.cluster import Limit


def limit_key(limit: Limit, user: str, queue: str) -> tuple[str, str] | None:
    """The counter of `limit` that a job of `user` in `queue` uses, or None if the
    limit does not apply to it."""
    user_part = _counter_part(limit.users, user)
    if user_part is None:
        return None
    queue_part = _counter_part(limit.queues, queue)
    if queue_part is None:
        return None
    return (user_part, queue_part)


def _counter_part(dimension: Literal["each"] | tuple[str, ...] | None, name: str) -> str | None:
    """A job's part of the counter along one dimension of a limit (users or queues):
    "" when the dimension is not one or the job's `name` is among those counted
    together, `name` for one counter each, None when the limit does not apply."""
    if dimension is None:
        return ""
    if dimension == "each":
        return name
    if name in dimension:
        return ""
    return None


def limit_reason(limit: Limit, what: str) -> str:
    """An LSF-like sentence naming the limit reached; `what` is e.g. '64 slots'."""
    if limit.users is not None:
        return f"The user has reached the limit {limit.name} ({what})"
    if limit.queues is not None:
        return f"The queue has reached the limit {limit.name} ({what})"
    return f"The limit {limit.name} has been reached ({what})"
