"""The controller's metrics (docs/metrics.md), in a registry of its own.

Two kinds:

* what is counted once, at the event (`FactCounters`, the kernel's `Watch`): provider
  requests by outcome, request-to-join times, hosts given back by cause, each
  session's phases, each commit's time in the store; and every API request by route
  and status (`ControllerMetrics.middleware`);
* what the controller's state says now (`StateCollector`), built at each scrape from
  the same figures the API answers with: jobs per state and queue (counted as facts
  apply: ClusterView.counts), slots, hosts, the last session's pend reasons, demand,
  idle supply and reservations, in-flight hosts, borrowed tokens, leases, cost per
  hour. Nothing of it walks the jobs.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Iterable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from xce.controller.core import Controller
from xce.controller.kernel import Watch
from xce.controller.supply import resources
from xce.controller.view import PEND, RUN
from xce.metrics import FAST_BUCKETS, JOIN_BUCKETS, exposition, new_registry
from xce.model.causes import Cause
from xce.model.cost import RUNNING_STATES, costs, template_prices
from xce.model.events import (
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    RequestChanged,
    RequestRecorded,
)
from xce.model.lifecycle import HostState, LeaseState, RequestState
from xce.model.result import SessionResult

# The close causes that start giving a provisioned host back: remembered until the
# host is removed, the cause its release is counted under.
_LEAVING = (Cause.IDLE, Cause.LIFETIME, Cause.RECLAIM, Cause.ADMIN)
# SessionStats' timings (ms) by the phase label they are observed under
PHASES = (("real_pass", "real_pass_ms"), ("catalog_pass", "catalog_pass_ms"),
          ("end", "end_ms"), ("session", "session_ms"))
UNMATCHED = "unmatched"  # the route label of a request no route matched
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FactCounters(Watch):
    """The counters and histograms of what happens, fed by the kernel (live facts
    only: recovery replays none of them, so a restart starts them at 0)."""

    def __init__(self, ctl: Controller, registry: CollectorRegistry) -> None:
        self.ctl = ctl
        self._requested: set[str] = set()  # requests not answered yet
        self._leaving: dict[str, str] = {}  # provisioned host -> why it is given back
        self.requests = Counter(
            "xce_provider_requests", "Provider requests by outcome: accepted (the "
            "provider started its instances) or refused (it failed before any started)",
            ("provider", "template", "outcome"), registry=registry)
        self.join = Histogram(
            "xce_provider_join_seconds", "Seconds from a host's request to its join",
            ("provider", "template"), buckets=JOIN_BUCKETS,
            registry=registry)
        self.released = Counter(
            "xce_hosts_released", "Provisioned hosts removed from the cluster (given back, "
            "cancelled before they joined, refused, failed), by template and cause",
            ("template", "cause"), registry=registry)
        self.sessions = Histogram(
            "xce_session_duration_seconds", "Scheduling sessions' time, by phase "
            "(real_pass, catalog_pass, end, session: the whole)", ("phase",), buckets=FAST_BUCKETS,
            registry=registry)
        self.store = Histogram(
            "xce_store_append_seconds", "Seconds of each commit of facts to the durable log",
            buckets=FAST_BUCKETS, registry=registry)
        self._phases = [(self.sessions.labels(label), field) for label, field in PHASES]

    # ------------------------------------------------------------------ Watch
    def recovered(self) -> None:
        """The requests the recovered records show unanswered."""
        self._requested = {rid for rid, r in self.ctl.records.requests.items()
                           if r.state == RequestState.REQUESTED}

    def session(self, result: SessionResult) -> None:
        for child, field in self._phases:
            child.observe(getattr(result.stats, field) / 1000.0)

    def appended(self, seconds: float) -> None:
        self.store.observe(seconds)  # (the journal's writer thread: Histogram locks)

    def fact(self, time: float, event: Event) -> None:
        """Count what a fact says, before it applies (the view still shows the host
        or expected host it changes)."""
        match event:
            case RequestRecorded(request=rid):
                self._requested.add(rid)
            case RequestChanged(request=rid, state=state):
                self._answered(rid, state)
            case HostAdded(name=name, template=template, time=joined) if template is not None:
                expected = self.ctl.view.expected.get(name)
                if expected is not None:
                    self.join.labels(expected.provider, template).observe(
                        max(0.0, joined - expected.since))
            case HostStateChanged(name=name, cause=cause) if cause in _LEAVING:
                host = self.ctl.view.hosts.get(name)
                if host is not None and host.template is not None:
                    self._leaving.setdefault(name, str(cause))
            case HostRemoved(name=name):
                host = self.ctl.view.hosts.get(name)
                if host is not None and host.template is not None:
                    why = self._leaving.pop(name, None) or str(host.cause or Cause.DRAINED)
                    self.released.labels(host.template, why).inc()
            case ExpectedHostEnded(name=name, state=HostState.REMOVED, cause=cause):
                expected = self.ctl.view.expected.get(name)
                if expected is not None:
                    failed = expected.state == HostState.FAILED
                    why = str(cause) if cause is not None else (
                        "failed" if failed else str(Cause.CANCELLED))
                    self.released.labels(expected.template, why).inc()
            case _:
                pass

    def _answered(self, rid: str, state: str) -> None:
        """A request's first change is its provider's answer: in flight (accepted) or
        failed (refused); counted once."""
        if rid not in self._requested:
            return
        self._requested.discard(rid)
        record = self.ctl.records.requests.get(rid)
        if record is None:
            return
        outcome = "refused" if state == RequestState.FAILED else "accepted"
        self.requests.labels(record.provider, record.template, outcome).inc()


class StateCollector(Collector):
    """The gauges of the controller's state, built at each scrape."""

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self._kinds: tuple[SessionResult | None, dict[str, int]] = (None, {})

    def collect(self) -> Iterator[Metric]:
        yield from self._jobs()
        yield from self._hosts()
        yield from self._session()
        yield from self._supply()

    def describe(self) -> Iterable[Metric]:
        return []  # (built at scrape time: nothing to check at registration)

    def _jobs(self) -> Iterator[Metric]:
        ctl = self.ctl
        jobs = GaugeMetricFamily("xce_jobs", "Jobs the controller keeps, by state and queue "
                                 "(pend, psusp, run, ususp, done, exit)", labels=("state", "queue"))
        counts = Tally({key: n for key, n in ctl.view.counts.items()})
        for job_id in ctl.suspends.stopped:  # (a few: the stopped running jobs)
            job = ctl.view.jobs.get(job_id)
            if job is not None and job.state == RUN:
                counts[(RUN, job.spec.queue)] -= 1
                counts[("USUSP", job.spec.queue)] += 1
        queues = [q.name for q in ctl.view.config.queues]
        for state in (PEND, "PSUSP", RUN, "USUSP", "DONE", "EXIT"):
            for queue in dict.fromkeys([*queues, *(q for s, q in counts if s == state)]):
                jobs.add_metric((state.lower(), queue), counts.get((state, queue), 0))
        yield jobs

    def _hosts(self) -> Iterator[Metric]:
        view = self.ctl.view
        hosts = GaugeMetricFamily("xce_hosts", "Hosts by state and template (empty: static "
                                  "hosts); expected and failed: requested, not joined",
                                  labels=("state", "template"))
        slots = GaugeMetricFamily("xce_slots", "Job slots: used by jobs, free on open hosts, "
                                  "unavailable (unused on hosts not ok)", labels=("state",))
        billed: Tally[str] = Tally()
        used = free = unavailable = 0
        for host in view.hosts.values():
            if host.template is not None and host.state in RUNNING_STATES:
                billed[host.template] += 1
            used += host.used
            if host.state == HostState.OK:
                free += max(0, host.slots - host.used)
            else:
                unavailable += max(0, host.slots - host.used)
        by_state = view.hosts_by_template_and_state()
        for (template, state), n in sorted(by_state.items(), key=lambda kv: kv[0][::-1]):
            hosts.add_metric((state, template), n)
        for state, n in (("used", used), ("free", free), ("unavailable", unavailable)):
            slots.add_metric((state,), n)
        yield hosts
        yield slots
        templates = view.config.catalog.templates
        flight = GaugeMetricFamily("xce_supply_in_flight", "Hosts requested from providers, "
                                   "not joined yet (expected), by template", labels=("template",))
        cost = GaugeMetricFamily("xce_cost_per_hour", "What the provisioned hosts running cost "
                                 "an hour (hosts x the template's price)", labels=("template",))
        each, _total = costs({t.name: billed[t.name] for t in templates},
                             template_prices(templates))
        for shape in templates:
            flight.add_metric((shape.name,), by_state[(shape.name, HostState.EXPECTED)])
            cost.add_metric((shape.name,), each.get(shape.name, 0.0))
        yield flight
        yield cost

    def _session(self) -> Iterator[Metric]:
        sessions = self.ctl.sessions
        result = sessions.last_result
        yield CounterMetricFamily("xce_sessions", "Scheduling sessions run since the "
                                  "controller started", sessions.count)
        yield CounterMetricFamily("xce_failure_cache_hits", "Buckets' failures reused from "
                                  "earlier sessions", sessions.failure_cache_hits)
        last = GaugeMetricFamily("xce_session_last_timestamp_seconds",
                                 "When the last session ran (seconds since the epoch)")
        pending = GaugeMetricFamily("xce_pending_jobs", "Pending jobs of the last session by "
                                    "the kind of their pend reason", labels=("reason_kind",))
        demand = GaugeMetricFamily("xce_demand_hosts", "New hosts the last session's demand "
                                   "asks for (GET /demand), by template", labels=("template",))
        tokens = GaugeMetricFamily("xce_demand_tokens", "Tokens the last session's demand asks "
                                   "for, by pool", labels=("resource",))
        idle = GaugeMetricFamily("xce_idle_hosts", "Provisioned hosts idle past their idle "
                                 "time in the last session (GET /idle)", labels=("template",))
        reserved = GaugeMetricFamily("xce_reservations", "Reservations of the last session "
                                     "(planned starts of blocked jobs)")
        if result is not None:
            last.add_metric((), result.now)
            for kind, n in self._pend_kinds(result).items():
                pending.add_metric((kind,), n)
            for label, count in _summed((h.template, h.count) for h in result.demand.hosts):
                demand.add_metric((label,), count)
            for label, amount in _summed((r.resource, r.amount)
                                         for r in result.demand.resources):
                tokens.add_metric((label,), amount)
            for label, hosts in _summed((h.template, 1) for h in result.idle.hosts):
                idle.add_metric((label,), hosts)
            reserved.add_metric((), len(result.reservations))
        yield from (last, pending, demand, tokens, idle, reserved)

    def _pend_kinds(self, result: SessionResult) -> dict[str, int]:
        """Pending jobs per reason kind (per session: the groups are walked once)."""
        seen, kinds = self._kinds
        if seen is not result:
            tally: Tally[str] = Tally()
            for group in result.pending:
                tally[group.kind] += len(group.members)
            kinds = dict(tally)
            self._kinds = (result, kinds)
        return kinds

    def _supply(self) -> Iterator[Metric]:
        ctl = self.ctl
        borrowed = GaugeMetricFamily("xce_tokens_borrowed", "Tokens borrowed (granted, not "
                                     "returning) per shared pool (GET /resources)",
                                     labels=("resource",))
        for pool in resources(ctl).resources:
            borrowed.add_metric((pool.pool,), pool.borrowed)
        yield borrowed
        leases = GaugeMetricFamily("xce_lease_held", "1 while a provider's lease is live, "
                                   "0 once expired or released", labels=("provider", "holder"))
        now = ctl.clock()
        for lease in ctl.leases.leases.values():
            live = lease.state(now) == LeaseState.LIVE
            leases.add_metric((lease.provider, lease.holder), 1.0 if live else 0.0)
        yield leases


def _summed(pairs: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Amounts summed per label, in first-seen order."""
    total: dict[str, float] = {}
    for label, amount in pairs:
        total[label] = total.get(label, 0.0) + amount
    return list(total.items())


class ControllerMetrics:
    """The controller's registry: its counters, its state collector, the API middleware
    and the exposition."""

    def __init__(self, ctl: Controller) -> None:
        self.registry = new_registry("controller")
        self.facts = FactCounters(ctl, self.registry)
        self.registry.register(StateCollector(ctl))
        self.api = Counter("xce_api_requests", "API requests by route and status",
                           ("route", "status"), registry=self.registry)
        self._children: dict[tuple[str, int], Counter] = {}
        ctl.watch = self.facts

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Handler) -> web.StreamResponse:
        """Count every request by its route's pattern and the status it got."""
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as err:
            status = err.status
            raise
        finally:
            resource = request.match_info.route.resource
            route = resource.canonical if resource is not None else UNMATCHED
            child = self._children.get((route, status))
            if child is None:
                child = self._children[(route, status)] = self.api.labels(route, str(status))
            child.inc()

    def response(self) -> web.Response:
        return exposition(self.registry)


METRICS: web.AppKey[ControllerMetrics] = web.AppKey("metrics", ControllerMetrics)
