"""The status page's sections, built from what the API answers (job_info, host_info,
request_info, lease_info, the catalog and pools of supply.py, the last session's
result): pending jobs with their reasons and expected starts, running jobs, hosts by
state and template, demand and supply, provider requests, leases.

A table shows its first `rows` rows and says how many there are; counts are made in
one pass over the jobs, so the page stays fast with 100,000 pending jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from xce.controller import app as api
from xce.controller import supply
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.suspend import USUSP
from xce.controller.ui.html import Html, banner, document, join, number, section, table, tag, when
from xce.controller.view import PEND, PSUSP, RUN, JobRecord
from xce.model.api import JobInfo
from xce.model.cost import costs, template_prices
from xce.model.job_ids import jobs_column

ROWS = 200  # rows of each table, by default
REASONS = 30  # pend reasons listed (the most common), by default
STATIC = "(static)"  # the template column of a configured host
SECTIONS = (("pending", "Pending jobs"), ("running", "Running jobs"), ("hosts", "Hosts"),
            ("supply", "Demand and supply"), ("requests", "Provider requests"),
            ("leases", "Leases"))


def hosts_of(job: JobInfo) -> str:
    return " ".join(f"{slots}*{host}" if slots > 1 else host
                    for host, slots in job.exec_hosts.items())


def what(job: JobInfo) -> str:
    return job.name or " ".join(job.command)


class JobPass:
    """One pass over the jobs: counts by state and by pend reason, and the first
    `rows` pending and running jobs."""

    def __init__(self, ctl: Controller, rows: int) -> None:
        self.states: Counter[str] = Counter()
        self.reasons: Counter[tuple[str, str]] = Counter()  # (kind, reason)
        self.pending: list[JobRecord] = []
        self.running: list[JobRecord] = []
        reason_of = ctl.sessions.pend_reason
        for job in ctl.view.jobs.values():
            state = job.state
            if state in (PEND, PSUSP):
                self.reasons[reason_of(job.spec.id)[::-1]] += 1
                if len(self.pending) < rows:
                    self.pending.append(job)
            elif state == RUN:
                if ctl.control.suspended(job) is not None:
                    state = USUSP
                if len(self.running) < rows:
                    self.running.append(job)
            self.states[state] += 1


class StatusPage:
    """The page for one request."""

    def __init__(self, ctl: Controller, who: Identity, rows: int = ROWS,
                 refresh: int = 15) -> None:
        self.ctl = ctl
        self.who = who
        self.rows = rows
        self.refresh = refresh
        self.now = ctl.clock()
        self.jobs = JobPass(ctl, rows)

    def render(self) -> str:
        config = self.ctl.view.config
        body = (banner(config.cluster, f"{self.who.name} ({self.who.role})", self.refresh,
                       SECTIONS)
                + tag("main", self.overview() + self.pending() + self.running()
                      + self.hosts() + self.supply() + self.requests() + self.leases()))
        return document(f"XCE {config.cluster}: status", body, self.refresh)

    def table(self, headers: tuple[str, ...], rows: Iterable[tuple[object, ...]],
              total: int, empty: str = "none") -> Html:
        return table(headers, rows, total=total, empty=empty)

    def overview(self) -> Html:
        sessions = self.ctl.sessions
        last = sessions.last_result
        states = ", ".join(f"{state} {count:,}" for state, count in
                           sorted(self.jobs.states.items())) or "no jobs"
        ran = (f"session {sessions.count:,} at " if last is not None
               else "no session yet")
        at = when(last.now, self.now) if last is not None else Html("")
        return tag("p", tag("strong", "Jobs: ") + states + " · Last "
                   + ran + at + " · Page made " + when(self.now, self.now),
                   class_="summary", id="overview")

    def pending(self) -> Html:
        waiting = self.jobs.states[PEND] + self.jobs.states[PSUSP]
        reasons = self.jobs.reasons.most_common(REASONS)
        by_reason = self.table(
            ("jobs", "kind", "pend reason"),
            ((f"{count:,}", kind, reason) for (kind, reason), count in reasons),
            len(self.jobs.reasons))
        infos = [api.job_info(self.ctl, job) for job in self.jobs.pending]
        listed = self.table(
            ("job", "user", "queue", "state", "slots", "submitted", "expected start",
             "pend reason", "name"),
            ((j.id, j.user, j.queue, j.state, j.n, when(j.submit_time, self.now),
              when(j.expected_start, self.now), j.pend_reason, what(j)) for j in infos),
            waiting)
        body = tag("h3", "By pend reason") + by_reason + tag("h3", "Jobs") + listed
        return section("pending", "Pending jobs",
                       f"{waiting:,} pending; expected starts are the last session's "
                       "reservations.", body + self.reservations())

    def reservations(self) -> Html:
        last = self.ctl.sessions.last_result
        held = last.reservations if last is not None else []
        rows = ((r.job, when(r.start, self.now), " ".join(sorted(r.hosts)),
                 "yes" if r.virtual else "") for r in held[:self.rows])
        return tag("h3", "Reservations") + self.table(
            ("job", "expected start", "hosts", "on supply being obtained"), rows, len(held))

    def running(self) -> Html:
        running = self.jobs.states[RUN] + self.jobs.states[USUSP]
        infos = [api.job_info(self.ctl, job) for job in self.jobs.running]
        rows = ((j.id, j.user, j.queue, j.state, j.n, hosts_of(j), when(j.start_time, self.now),
                 "-" if j.run_limit is None else f"{j.run_limit:g} s", what(j)) for j in infos)
        return section("running", "Running jobs", f"{running:,} running", self.table(
            ("job", "user", "queue", "state", "slots", "hosts", "started", "run limit", "name"),
            rows, running))

    def hosts(self) -> Html:
        view = self.ctl.view
        counts = Counter({(template or STATIC, state): n for (template, state), n
                          in view.hosts_by_template_and_state().items()})
        states = sorted({state for _, state in counts})
        templates = sorted({template for template, _ in counts})
        grid = self.table(
            ("template", *states, "all"),
            ((t, *(number(counts[(t, s)]) for s in states),
              number(sum(counts[(t, s)] for s in states))) for t in templates),
            len(templates))
        names = [*view.hosts, *view.expected]
        infos = [api.host_info(self.ctl, name) for name in names[:self.rows]]
        listed = self.table(
            ("host", "status", "template", "provider", "slots used", "jobs", "reason",
             "idle since"),
            ((h.name, h.status or h.state, h.template or STATIC, h.provider,
              f"{h.used}/{h.slots}", jobs_column(h.jobs), h.reason,
              when(h.idle_since, self.now)) for h in infos), len(names))
        return section("hosts", "Hosts", f"{len(names):,} hosts, by template and state",
                       grid + tag("h3", "Hosts") + listed)

    def supply(self) -> Html:
        return section("supply", "Demand and supply",
                       "What the last session found missing, what is in flight and "
                       "provisioned, and what is idle.",
                       tag("div", self.demand() + self.catalog(), class_="grid")
                       + tag("div", self.pools() + self.idle(), class_="grid"))

    def demand(self) -> Html:
        last = self.ctl.sessions.last_result
        demand = last.demand if last is not None else None
        hosts = demand.hosts if demand is not None else []
        tokens = demand.resources if demand is not None else []
        surplus = demand.surplus_hosts if demand is not None else []
        return tag("div", tag("h3", "Demand: new hosts") + self.table(
            ("template", "hosts", "in flight used", "jobs"),
            ((d.template, d.count, d.in_flight_used, jobs_column(d.jobs)) for d in hosts),
            len(hosts)) + tag("h3", "Demand: tokens") + self.table(
            ("resource", "amount", "in flight used", "jobs"),
            ((d.resource, number(d.amount), number(d.in_flight_used), jobs_column(d.jobs))
             for d in tokens), len(tokens)) + tag("h3", "In flight, needed by no job")
            + self.table(("template", "hosts"), ((s.template, s.count) for s in surplus),
                         len(surplus)))

    def catalog(self) -> Html:
        templates = supply.catalog(self.ctl).templates
        each, total = costs({t.name: t.alive for t in templates}, template_prices(templates))
        rows = ((t.name, t.provider, t.slots, t.alive, t.in_flight, t.max, t.available,
                 f"{t.lead_time:g} s", f"{t.price:g}", f"{each.get(t.name, 0.0):g}")
                for t in templates)
        return tag("div", tag("h3", f"Supply: templates (cost {total:g} per hour)")
                   + self.table(("template", "provider", "slots", "provisioned", "in flight",
                                 "max", "may add", "lead time", "price/h", "cost/h"),
                                rows, len(templates)))

    def pools(self) -> Html:
        pools = supply.resources(self.ctl).resources
        return tag("div", tag("h3", "Shared pools") + self.table(
            ("pool", "base", "borrowed", "in flight", "returning", "in use", "free",
             "headroom"),
            ((p.pool, *(number(v) for v in (p.base, p.borrowed, p.in_flight, p.returning,
                                            p.in_use, p.free, p.headroom))) for p in pools),
            len(pools)))

    def idle(self) -> Html:
        last = self.ctl.sessions.last_result
        hosts = last.idle.hosts if last is not None else []
        tokens = last.idle.resources if last is not None else []
        return tag("div", tag("h3", "Idle supply") + self.table(
            ("host", "template", "idle for"),
            ((h.host, h.template, f"{h.idle_for:.0f} s") for h in hosts[:self.rows]),
            len(hosts)) + self.table(("resource", "idle tokens"),
                                     ((r.resource, number(r.amount)) for r in tokens),
                                     len(tokens), empty="no idle tokens"))

    def requests(self) -> Html:
        shown = api.requests_shown(self.ctl, None, every=False)
        infos = [api.request_info(self.ctl, r) for r in shown[-self.rows:]]
        rows = ((r.request, r.provider, r.template, r.count, r.holder, r.state, r.reason,
                 when(r.since, self.now),
                 join(", ".join(f"{i.host} {i.state}" for i in r.instances)),
                 jobs_column(r.jobs)) for r in reversed(infos))
        return section("requests", "Provider requests",
                       f"{len(shown):,} not ended (the latest first)", self.table(
                           ("request", "provider", "template", "hosts", "holder", "state",
                            "reason", "since", "instances", "jobs"), rows, len(shown)))

    def leases(self) -> Html:
        leases = list(self.ctl.leases.leases.values())
        rows = ((lease.provider, lease.holder, lease.token, lease.state(self.now),
                 when(lease.expires, self.now)) for lease in leases[:self.rows])
        return section("leases", "Leases", "Which provisioner holds each provider",
                       self.table(("provider", "holder", "fencing token", "state",
                                   "expires"), rows, len(leases)))


def status_page(ctl: Controller, who: Identity, rows: int = ROWS, refresh: int = 15) -> str:
    return StatusPage(ctl, who, rows, refresh).render()
