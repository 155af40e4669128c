"""A queue's `fairshare:` (LSF's USER_SHARES) and the cluster's `fairshare:` factors."""

from __future__ import annotations

from collections.abc import Mapping

from xce.config.fields import MapReader, Place, as_number, as_text
from xce.config.groups import USER_GROUP_PREFIX
from xce.model.cluster import FairshareFactors

DEFAULT_USER = "default"  # the share of every user no entry names (LSF's `default`)

_FACTOR_KEYS = ("cpu_time_factor", "run_time_factor", "run_job_factor", "hist_hours")


def read_shares(
    value: object, place: Place, user_groups: Mapping[str, tuple[str, ...]]
) -> tuple[tuple[str, float], ...]:
    """A queue's `fairshare:` mapping: user names (any name: LSF takes users it does not
    know), `group:NAME` of `user_groups:`, and `default`, each to a number of shares
    (> 0), in the order written."""
    section = MapReader(value, place)
    if not section.mapping:
        place.fail("needs at least one share (omit fairshare: for none)")
    shares: list[tuple[str, float]] = []
    for name, share, share_place in section.items():
        name_place = section.key_place(name)
        text = as_text(name, name_place)
        if text.startswith(USER_GROUP_PREFIX):
            group = text[len(USER_GROUP_PREFIX):]
            if group not in user_groups:
                known = ", ".join(sorted(user_groups)) or "none"
                name_place.fail(f"unknown user group {group!r} (user_groups: {known})")
        elif text == "all" or any(c.isspace() for c in text):
            name_place.fail(f"invalid user name {text!r}")
        shares.append((text, as_number(share, share_place, "shares", positive=True)))
    return tuple(shares)


def read_factors(value: object, place: Place) -> FairshareFactors:
    """The cluster's `fairshare:` mapping: the dynamic priority's factors (>= 0; the
    run-job factor > 0, so that a priority is always defined) and `hist_hours` (> 0)."""
    defaults = FairshareFactors()
    if value is None:
        return defaults
    section = MapReader(value, place, _FACTOR_KEYS)
    return FairshareFactors(
        cpu_time_factor=section.number("cpu_time_factor", defaults.cpu_time_factor, minimum=0),
        run_time_factor=section.number("run_time_factor", defaults.run_time_factor, minimum=0),
        run_job_factor=section.number("run_job_factor", defaults.run_job_factor, positive=True),
        hist_hours=section.number("hist_hours", defaults.hist_hours, positive=True),
    )
