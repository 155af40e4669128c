"""Run limits in the live system (docs/cluster.md, "Run limits"): when the controller
ends a job its agent did not end, and when the next session is due. The limit itself
and what a submission may ask for are the scheduler's rules (`xce.sched.runlimit`,
`SchedulerState.resolve`)."""

from __future__ import annotations

# The shortest pause between two sessions, whatever the last session's `next_due`.
MIN_SESSION_GAP = 0.05


def overdue(start: float, limit: float | None, grace: float, now: float,
            up_since: float = 0.0) -> bool:
    """Whether a job that started at `start` ran past its limit and the grace the
    controller leaves its agent to end it and report (`limit_grace`). The grace
    starts again at `up_since` (the controller's start): while it was down, no agent
    could report."""
    return limit is not None and now >= max(start + limit, up_since) + grace


def session_delay(interval: float, now: float, next_due: float) -> float:
    """Seconds until the next session: `session_interval`, or less when the last
    session's `next_due` (inf: none) comes sooner; never below MIN_SESSION_GAP (nor
    above the interval)."""
    return max(min(interval, MIN_SESSION_GAP), min(interval, next_due - now))
