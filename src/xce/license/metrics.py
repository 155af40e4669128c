"""The license pool's metrics (docs/metrics.md): per feature (the `pool` label), its
tokens by state (total, in_use: lent to live leases, free) and its live leases, from
the same figures `GET /features` answers with, built at each scrape."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from xce.license.pool import LicensePool
from xce.metrics import new_registry


class PoolCollector(Collector):
    def __init__(self, pool: LicensePool) -> None:
        self.pool = pool

    def collect(self) -> Iterator[Metric]:
        tokens = GaugeMetricFamily("xce_license_tokens", "The pool's tokens by feature and "
                                   "state: total, in_use (lent), free", labels=("pool", "state"))
        leases = GaugeMetricFamily("xce_license_leases", "Live leases by feature",
                                   labels=("pool",))
        for feature in self.pool.feature_list():
            for state, amount in (("total", feature.total), ("in_use", feature.in_use),
                                  ("free", feature.free)):
                tokens.add_metric((feature.name, state), amount)
            leases.add_metric((feature.name,), feature.leases)
        yield tokens
        yield leases

    def describe(self) -> Iterable[Metric]:
        return []


def pool_registry(pool: LicensePool) -> CollectorRegistry:
    registry = new_registry("license-pool")
    registry.register(PoolCollector(pool))
    return registry
