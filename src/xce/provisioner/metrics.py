"""A provisioner instance's metrics (docs/metrics.md), in a registry of its own,
served by `xce provisioner run --metrics-listen HOST:PORT`.

Counted at the event: its requests by outcome (accepted: the provider started the
instances; refused: the provider refused; error: the controller refused to record
it) and each host's request-to-join time, once per host. Shown as of its last round:
the leases it holds and the hosts of its providers in flight.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from xce.metrics import JOIN_BUCKETS, new_registry
from xce.model.lifecycle import HostState


class ProvisionerMetrics(Collector):
    """The registry of one instance (`holder`: its --name)."""

    def __init__(self, holder: str, templates: Iterable[str]) -> None:
        self.holder = holder
        self.templates = list(templates)
        self.registry: CollectorRegistry = new_registry("provisioner")
        self.requests = Counter(
            "xce_provider_requests", "This instance's provider requests by outcome "
            "(accepted, refused by the provider, error: refused by the controller)",
            ("provider", "template", "outcome"), registry=self.registry)
        self.join = Histogram(
            "xce_provider_join_seconds", "Seconds from a host's request to its join",
            ("provider", "template"), buckets=JOIN_BUCKETS, registry=self.registry)
        self._joined: set[str] = set()  # hosts whose join was observed
        self._leases: set[str] = set()  # the providers leased, as of the last round
        self._in_flight: dict[str, int] = dict.fromkeys(self.templates, 0)
        self.registry.register(self)

    def requested(self, provider: str, template: str, outcome: str) -> None:
        self.requests.labels(provider, template, outcome).inc()

    def joined(self, observed: Sequence[tuple[str, str, float]],
               provider_of: Mapping[str, str]) -> None:
        """New request-to-join observations (template, host, seconds), once per host."""
        for template, host, seconds in observed:
            if host not in self._joined:
                self._joined.add(host)
                self.join.labels(provider_of.get(template, ""), template).observe(seconds)

    def leases_seen(self, providers: Iterable[str]) -> None:
        """The providers whose lease the round holds."""
        self._leases = set(providers)

    def hosts_seen(self, hosts: Sequence[Mapping[str, Any]], templates: Iterable[str]) -> None:
        """The controller's hosts as the round saw them: the expected hosts of
        `templates` (those of the leased providers) are in flight."""
        wanted = set(templates)
        flight: Tally[str] = Tally(str(h["template"]) for h in hosts
                                   if h.get("template") in wanted
                                   and h.get("state") == HostState.EXPECTED)
        self._in_flight = {t: flight[t] if t in wanted else 0 for t in self.templates}
        present = {str(h["name"]) for h in hosts}
        self._joined &= present  # (a host gone is never seen again)

    def collect(self) -> Iterator[Metric]:
        held = GaugeMetricFamily("xce_lease_held", "1 for each provider this instance "
                                 "holds the lease of", labels=("provider", "holder"))
        for provider in sorted(self._leases):
            held.add_metric((provider, self.holder), 1.0)
        yield held
        flight = GaugeMetricFamily("xce_supply_in_flight", "Hosts of the leased providers "
                                   "requested, not joined yet, by template",
                                   labels=("template",))
        for template, count in self._in_flight.items():
            flight.add_metric((template,), count)
        yield flight

    def describe(self) -> Iterable[Metric]:
        return []
