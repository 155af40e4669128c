"""How long a new host of a template takes from its request to its join, as observed:
the estimate the provisioner publishes in the runtime catalog, so that the scheduler
plans in-flight and new hosts at the arrival this provider really achieves
(docs/provisioner.md, "Lead time").

An observation is one provisioned host: its join time less its request's creation
time. The estimate of a template is the median of its last `RECENT` observations (by
join time): robust to one slow or fast host, quick to follow a provider that changes.
A template without an observation has no estimate: the configured expected_lead_time
applies.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

RECENT = 20  # observations per template the estimate is the median of
TOLERANCE = 0.05  # s: a smaller change of the estimate is not worth a fact


class LeadTimes:
    """Request-to-join observations per template, the `RECENT` latest by join time."""

    def __init__(self, recent: int = RECENT) -> None:
        self.recent = recent
        # template -> host -> (joined at, seconds from request to join)
        self._seen: dict[str, dict[str, tuple[float, float]]] = {}

    def observe(self, template: str, host: str, requested: float,
                joined: float) -> float | None:
        """Host `host` of `template`, requested at `requested`, joined at `joined`: its
        seconds from request to join, None when it was seen already (which changes
        nothing); an observation older than the `recent` kept ones is dropped at once."""
        seen = self._seen.setdefault(template, {})
        if host in seen:
            return None
        seconds = max(0.0, joined - requested)
        seen[host] = (joined, seconds)
        if len(seen) > self.recent:
            oldest = min(seen, key=lambda name: seen[name])
            del seen[oldest]
        return seconds

    def observe_hosts(self, hosts: Iterable[Mapping[str, Any]],
                      requested: Mapping[str, float],
                      templates: Iterable[str]) -> list[tuple[str, str, float]]:
        """Every joined host of `templates` in `hosts` (GET /hosts) whose request's
        creation time `requested` knows (request id -> time); the new observations
        (template, host, seconds)."""
        wanted = set(templates)
        found = []
        for host in hosts:
            template, joined = host.get("template"), host.get("joined")
            made = requested.get(host.get("request") or "")
            if template in wanted and joined is not None and made is not None:
                seconds = self.observe(template, host["name"], made, float(joined))
                if seconds is not None:
                    found.append((str(template), str(host["name"]), seconds))
        return found

    def estimate(self, template: str) -> float | None:
        """The median of the template's recent observations; None without any."""
        seen = self._seen.get(template)
        if not seen:
            return None
        return float(statistics.median(seconds for _, seconds in seen.values()))

    def changed(self, template: str, published: float | None) -> float | None:
        """The estimate to publish for `template` when it differs from the `published`
        one (the catalog's runtime value) by more than TOLERANCE; None otherwise (and
        always while there is no observation: the configured value stays)."""
        found = self.estimate(template)
        if found is None:
            return None
        if published is not None and abs(found - published) <= TOLERANCE:
            return None
        return round(found, 3)
