"""The errors by which the scheduler state refuses what it is given."""

from __future__ import annotations


class SubmitError(ValueError):
    """A job the scheduler cannot accept (unknown queue, bad requirement, ...)."""


class SchedulerInputError(ValueError):
    """An event that contradicts the state (unknown job or host), or that is not a
    scheduler event at all (a lease, a provisioning request: the controller's own)."""
