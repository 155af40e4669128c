"""What a simulation run measures: job waits and slowdowns (the longest, and that of
wide jobs), utilization, plans (jobs backfilled, jobs ended at their run limit),
elastic supply (provider requests, hosts requested, joined, reclaimed, host-hours and
the busy part of them, tokens), and time series for the report."""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Mapping
from typing import Any, Final

from xce.model.cost import costs

BSLD_TAU: Final = 10.0  # s: bounded slowdown threshold
SAMPLE_BATCH: Final = 13 * 4096  # time-series values gathered before they are packed


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


class TimeSeries:
    """One sample per session, compact: rows gathered in a short list, then packed
    into one array of doubles, row after row; `columns` splits it."""

    FIELDS = (
        "time", "pending", "running", "busy_slots", "static_hosts", "provisioned_hosts",
        "closed_hosts", "in_flight_hosts", "demand_hosts", "tokens_borrowed", "tokens_used",
        "idle_hosts", "cost",
    )

    def __init__(self) -> None:
        self._rows: array[float] = array("d")
        self._batch: list[float] = []

    @property
    def columns(self) -> dict[str, array[float]]:
        """The samples per field, in the order of FIELDS."""
        self._pack()
        width = len(self.FIELDS)
        return {f: self._rows[k::width] for k, f in enumerate(self.FIELDS)}

    def add_row(
        self, time: float, pending: float, running: float, busy_slots: float,
        static_hosts: float, provisioned_hosts: float, closed_hosts: float,
        in_flight_hosts: float, demand_hosts: float, tokens_borrowed: float,
        tokens_used: float, idle_hosts: float, cost: float,
    ) -> None:
        """One sample, the values in the order of FIELDS: `provisioned_hosts` are the
        open ones (`idle_hosts` of them run nothing), `closed_hosts` the drained ones
        not given back yet; `cost` is what provisioned hosts cost up to `time`."""
        batch = self._batch
        batch.extend((
            time, pending, running, busy_slots, static_hosts, provisioned_hosts,
            closed_hosts, in_flight_hosts, demand_hosts, tokens_borrowed, tokens_used,
            idle_hosts, cost,
        ))
        if len(batch) >= SAMPLE_BATCH:
            self._pack()

    def _pack(self) -> None:
        batch = self._batch
        if batch:
            self._rows.frombytes(struct.pack(f"{len(batch)}d", *batch))
            batch.clear()


class Metrics:
    """Counters kept while the simulation runs."""

    def __init__(self) -> None:
        self.submitted: dict[int, float] = {}  # job -> submit time
        self.started: dict[int, float] = {}  # job -> first start
        self.slots: dict[int, int] = {}
        self.waits: list[float] = []
        self.bslds: list[float] = []
        # Jobs of at least this many slots are wide (a quarter of the machine; the
        # driver sets it) and the longest wait of one that finished.
        self.wide_slots = 0.0
        self.wide_wait_max = 0.0
        self.backfilled: set[int] = set()  # jobs a session dispatched as backfill
        self.jobs_killed_at_limit = 0
        self.busy_slot_seconds = 0.0
        self.finished = 0
        self.too_large: list[int] = []
        # jobs the scheduler refused on arrival (a dependency on a job it does not
        # know), and jobs ended because their condition could never be satisfied
        self.refused: list[int] = []
        self.orphans_ended = 0
        self.sessions = 0
        self.hosts_requested: dict[str, int] = {}
        self.hosts_joined: dict[str, int] = {}
        self.hosts_failed: dict[str, int] = {}
        self.hosts_cancelled: dict[str, int] = {}  # in flight, cancelled by the policy
        self.hosts_reclaimed: dict[str, int] = {}
        self.hosts_lost: dict[str, int] = {}
        self.host_seconds: dict[str, float] = {}  # of provisioned hosts given back
        # slot-seconds of ended runs on provisioned hosts over the template's slots
        self.busy_host_seconds: dict[str, float] = {}
        self.requests = 0  # provider requests made (RequestHosts, RequestTokens)
        self.hosts_never_used = 0
        self.tokens_requested = 0.0
        self.tokens_borrowed = 0.0
        self.tokens_refused = 0.0
        self.token_seconds = 0.0
        self.series = TimeSeries()
        # With preemption or fairshare: each job's queue, for waits per queue (None:
        # not kept), and the preemptions carried out by action
        self.queue_of: dict[int, str] | None = None
        self.queue_waits: dict[str, list[float]] = {}
        self.preemptions: dict[str, int] = {}

    def preempted(self, action: str) -> None:
        self.preemptions[action] = self.preemptions.get(action, 0) + 1

    def finish(self, job: int, end: float) -> None:
        start = self.started[job]
        run = end - start
        wait = start - self.submitted[job]
        self.waits.append(wait)
        slowdown = (wait + run) / (run if run > BSLD_TAU else BSLD_TAU)
        self.bslds.append(slowdown if slowdown > 1.0 else 1.0)  # (compiled, no max() call)
        slots = self.slots[job]
        self.busy_slot_seconds += run * slots
        if slots >= self.wide_slots and wait > self.wide_wait_max:
            self.wide_wait_max = wait
        self.finished += 1
        if self.queue_of is not None:
            self.queue_waits.setdefault(self.queue_of.pop(job), []).append(wait)

    def summary(
        self, *, jobs: int, skipped: int, sim_seconds: float, wall_seconds: float,
        capacity_slot_seconds: float, host_seconds: Mapping[str, float],
        busy_host_seconds: Mapping[str, float], prices: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """The simulator summary of FORMATS.md (plus a few more fields); the seconds
        per template of provisioned hosts and of their busy part, up to now. With
        `prices` (per host-hour; model/cost.py), also `cost` per template (its
        host-hours times its price) and `cost_total`."""
        waits = sorted(self.waits)
        templates = sorted(
            set(self.hosts_requested) | set(self.hosts_joined) | set(host_seconds)
        )
        summary: dict[str, Any] = {
            "jobs": jobs,
            "finished": self.finished,
            "skipped": skipped,
            "too_large": len(self.too_large),
            "jobs_backfilled": len(self.backfilled),
            "jobs_killed_at_limit": self.jobs_killed_at_limit,
            "sim_seconds": sim_seconds,
            "wall_seconds": round(wall_seconds, 3),
            "sessions": self.sessions,
            "wait_mean": sum(waits) / len(waits) if waits else 0.0,
            "wait_p50": percentile(waits, 0.5),
            "wait_p95": percentile(waits, 0.95),
            "wait_p99": percentile(waits, 0.99),
            "wait_max": waits[-1] if waits else 0.0,
            "wide_wait_max": self.wide_wait_max,
            "bsld_mean": sum(self.bslds) / len(self.bslds) if self.bslds else 0.0,
            "utilization": (
                self.busy_slot_seconds / capacity_slot_seconds if capacity_slot_seconds else 0.0
            ),
            "hosts_requested": sum(self.hosts_requested.values()),
            "hosts_joined": sum(self.hosts_joined.values()),
            "hosts_failed": sum(self.hosts_failed.values()),
            "hosts_cancelled": sum(self.hosts_cancelled.values()),
            "hosts_reclaimed": sum(self.hosts_reclaimed.values()),
            "hosts_lost": sum(self.hosts_lost.values()),
            "requests": self.requests,
            "host_hours": {t: round(host_seconds.get(t, 0.0) / 3600, 3) for t in templates},
            "host_hours_busy": {
                t: round(busy_host_seconds.get(t, 0.0) / 3600, 3) for t in templates
            },
            "hosts_never_used": self.hosts_never_used,
            "tokens_requested": self.tokens_requested,
            "tokens_borrowed": self.tokens_borrowed,
            "tokens_refused": self.tokens_refused,
            "token_hours": round(self.token_seconds / 3600, 3),
        }
        if self.refused:
            summary["refused"] = len(self.refused)
        if self.orphans_ended:
            summary["orphans_ended"] = self.orphans_ended
        if self.queue_of is not None:
            summary["preemptions"] = dict(sorted(self.preemptions.items()))
            summary["queues"] = {
                queue: {
                    "finished": len(waits),
                    "wait_mean": sum(waits) / len(waits),
                    "wait_max": max(waits),
                }
                for queue, waits in sorted(self.queue_waits.items())
            }
        if prices:
            hours = {t: host_seconds.get(t, 0.0) / 3600 for t in templates}
            summary["cost"], summary["cost_total"] = costs(hours, prices)
        return summary
