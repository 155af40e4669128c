"""The leadership's metrics (docs/metrics.md, docs/ha.md), for controllers that share a
PostgreSQL log: whether this one leads, the leader's term, and (on the leader) how many
facts each live standby has yet to apply."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class Led(Protocol):
    """What the metrics read of the leadership (leadership.py)."""

    @property
    def leading(self) -> bool: ...

    def leader_term(self) -> int: ...

    def lags(self) -> dict[str, int]: ...


class LeadershipCollector(Collector):
    """xce_leader, xce_leader_term, xce_standby_lag_facts, built at each scrape."""

    def __init__(self, leadership: Led) -> None:
        self.leadership = leadership

    def collect(self) -> Iterator[Metric]:
        led = self.leadership
        yield GaugeMetricFamily("xce_leader", "1 while this controller leads (0: a standby)",
                                value=1 if led.leading else 0)
        yield GaugeMetricFamily("xce_leader_term", "The leader's term as this controller "
                                "last read it (raised by every takeover)",
                                value=led.leader_term())
        lag = GaugeMetricFamily("xce_standby_lag_facts", "Facts of the log a live standby has "
                                "yet to apply (on the leader; a second old at most)",
                                labels=["controller"])
        for name, facts in sorted(led.lags().items()):
            lag.add_metric([name], facts)
        yield lag

    def describe(self) -> Iterable[Metric]:
        return []
