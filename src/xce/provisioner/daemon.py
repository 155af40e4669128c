"""The provisioner: leases its providers, runs the policy on live demand and idle
supply every round, and carries the actions out through the controller and the
providers.

A round: take or renew each provider's lease (a provider leased to another instance
is skipped); read `GET /demand`, `GET /idle` and `GET /hosts`; run `xce.policy.decide`
(the simulator's code) for the templates of the leased providers; then, for each
action, tell the controller first (expected hosts, drain, decommission, token steps,
allowance, cancelled expected hosts) with the lease's fencing token, and the provider
after. Every decision is logged with its reason and kept for `status`.

CancelHosts (in-flight hosts no pending job needs any more, `policy.cancel_surplus`):
the newest expected hosts of the template are removed at the controller (their
instance records say "cancelled before it joined"), then their instances released;
a host that joined meanwhile is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time as wallclock
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from xce.model.amounts import EPSILON
from xce.model.api import MAX_REQUEST_JOBS, STILL_RUNS
from xce.model.cluster import ClusterConfig
from xce.model.lifecycle import HostState
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    PolicyMemory,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
    decide,
)
from xce.policy.actions import CancelHosts
from xce.provisioner.client import ControllerClient, ControllerRefused
from xce.provisioner.leadtime import LeadTimes
from xce.provisioner.metrics import ProvisionerMetrics
from xce.provisioner.provider import HostGrant, Provider, ProviderError
from xce.provisioner.reconcile import Reconciler
from xce.provisioner.round import policy_input
from xce.provisioner.status import (
    Decision,
    RequestStatus,
    Status,
    open_requests,
    running_hosts,
    write_status,
)
from xce.provisioner.tokens import TokenLending
from xce.sched.room import template_room

__all__ = ["ControllerRefused", "Decision", "Provisioner", "RequestStatus", "Status"]

log = logging.getLogger("xce.provisioner")


class Provisioner:
    def __init__(
        self,
        url: str,
        token: str,
        name: str,
        config: ClusterConfig,
        providers: Mapping[str, Provider],
        lease_ttl: float = 15.0,
        clock: Callable[[], float] = wallclock.time,
        status_file: Path | None = None,
        orphan_grace: float = 30.0,
        join_deadline: float = 600.0,
    ) -> None:
        self.join_deadline = join_deadline  # s a requested host has to join
        self.status_file = status_file
        self.client = ControllerClient(url, token)
        self._call = self.client.call
        self.fences = self.client.fences  # provider -> fencing token of our lease
        self.name = name
        self.config = config
        self.providers = dict(providers)
        self.lease_ttl = lease_ttl
        self.clock = clock
        self.memory = PolicyMemory()
        self.decisions: deque[Decision] = deque(maxlen=200)
        self._failures: list[str] = []  # templates whose requests failed this round
        self._backed_off: set[str] = set()  # templates the policy backed off
        self.tokens = TokenLending(self.client, config, self.providers, self._note)
        self.inventory = Reconciler(self.client, self.providers, clock, orphan_grace,
                                    self._note)
        self.lead_times = LeadTimes()  # request-to-join observations per template
        self._made: list[dict[str, Any]] = []  # requests made this round (JSON)
        self._session_time: float | None = None  # of the session whose demand is acted on
        self.metrics = ProvisionerMetrics(name, (t.name for t in config.catalog.templates))
        self._provider_of = {t.name: t.provider for t in config.catalog.templates}

    def _template_provider(self, template: str) -> str:
        return self._provider_of[template]  # (KeyError: not in the catalog)

    # ------------------------------------------------------------------ one round
    async def round(self) -> list[Action]:
        """One policy round; the actions decided (carried out before returning)."""
        leased: set[str] = set()
        for provider in self.providers:
            try:
                lease = await self._call("POST", f"/leases/{quote(provider, safe='')}",
                                         {"ttl": self.lease_ttl})
            except ControllerRefused as err:
                log.info("provider %s not ours this round: %s", provider, err)
                self.fences.pop(provider, None)
                continue
            token = int(lease["token"])
            if self.fences.get(provider) != token:  # a new lease: we start, or take over
                self.fences[provider] = token
                log.info("provider %s: lease taken (fencing token %d)", provider, token)
            leased.add(provider)
        self.metrics.leases_seen(leased)
        if not leased:
            return []
        joined: list[str] = []
        for provider in sorted(leased):
            try:
                came, failed = await self.inventory.reconcile(provider)
            except ProviderError as err:  # its inventory is unknown: leave it this round
                log.warning("provider %s: cannot list its instances: %s", provider, err)
                leased.discard(provider)
                continue
            joined += came
            self._failures += failed
            await self.tokens.reconcile(provider)
        if not leased:
            return []
        templates = {t.name for t in self.config.catalog.templates if t.provider in leased}
        session = await self._call("GET", "/demand")
        demand = session.get("demand")
        self._session_time = session.get("time")  # when the demand was worked out
        idle = (await self._call("GET", "/idle")).get("idle")
        hosts = (await self._call("GET", "/hosts"))["hosts"]
        requested = {r["request"]: float(r["created"])
                     for p in sorted(leased) for r in self.inventory.open.get(p, [])}
        self.metrics.joined(self.lead_times.observe_hosts(hosts, requested, templates),
                            self._provider_of)
        self.metrics.hosts_seen(hosts, templates)
        now = self.clock()
        inp = policy_input(now, demand, idle, hosts, templates, self._failures, joined)
        self._failures = []
        actions, self.memory = decide(inp, self.memory, self.config.policy,
                                      self.config.catalog)
        for action in actions:
            if _template_of(action) not in templates and _template_of(action) is not None:
                continue
            if (isinstance(action, RequestTokens | ReturnTokens)
                    and self.tokens.pool_provider(action.resource) not in leased):
                continue  # another instance lends it, or nobody does
            outcome = await self._act(action, hosts)
            jobs = action.jobs if isinstance(action, RequestHosts) else ()
            self._note(type(action).__name__, _detail(action), action.reason, outcome, jobs)
        await self._sync_catalog(leased, hosts)
        self._write_status(now, sorted(leased), hosts)
        return actions

    def _write_status(self, now: float, leased: list[str], hosts: list[dict[str, Any]]) -> None:
        """What `xce provisioner status` shows: leases held, hosts on their way, the
        open requests of the leased providers (with their jobs), the recent decisions,
        the hosts of their templates running and what they cost an hour."""
        made, self._made = self._made, []
        if self.status_file is None:
            return
        answers = [r for p in leased for r in self.inventory.open.get(p, [])]
        running, cost, total = running_hosts(
            hosts, (t for t in self.config.catalog.templates if t.provider in leased))
        status = Status(self.name, now, {p: self.fences[p] for p in leased},
                        sorted(self.inventory.watch), list(self.decisions),
                        open_requests([*answers, *made]), running, cost, total)
        write_status(self.status_file, status)

    async def _sync_catalog(self, leased: set[str], hosts: list[dict[str, Any]]) -> None:
        """Keep the runtime catalog current from the providers' descriptions: a pool's
        headroom is what its provider could still lend (its size less what is borrowed
        or asked for); a template's allowance is what its provider could still start
        (its `max` less the hosts alive or in flight) when that is below the catalog's
        `max`, and 0 while the policy has the template backed off; a template's lead
        time is the median of its recent request-to-join times, once one was observed
        (leadtime.py). Each provider's part is sent under its own lease; only what
        differs from the controller's values."""
        catalog = await self._call("GET", "/catalog")
        told = {t["name"]: t.get("allowance") for t in catalog["templates"]}
        leads = {t["name"]: t.get("runtime_lead_time") for t in catalog["templates"]}
        runtime = {c["pool"]: c.get("runtime_headroom") for c in catalog["countables"]}
        pools = {p["pool"]: p for p in (await self._call("GET", "/resources"))["resources"]}
        for provider in sorted(leased):
            try:
                description = await asyncio.to_thread(self.providers[provider].describe)
            except ProviderError as err:
                log.warning("provider %s: cannot describe itself: %s", provider, err)
                continue
            limits = {t.name: t.max for t in description.templates if t.max > 0}
            allowance: dict[str, int | None] = {}
            lead_time: dict[str, float] = {}
            for template in self.config.catalog.templates:
                if template.provider != provider:
                    continue
                lead = self.lead_times.changed(template.name, leads.get(template.name))
                if lead is not None:
                    lead_time[template.name] = lead
                present = sum(1 for h in hosts if h.get("template") == template.name
                              and h["state"] not in (HostState.FAILED,
                                                     HostState.DECOMMISSIONED))
                limit = limits.get(template.name, template.max)
                if template.name in self._backed_off:
                    wanted: int | None = 0
                elif limit < template.max:
                    wanted = template_room(limit, present)  # (present: alive or in flight)
                else:
                    wanted = None
                if told.get(template.name) != wanted:
                    allowance[template.name] = wanted
            headroom = {}
            for offer in description.pools:
                pool = pools.get(offer.pool)
                if pool is None or pool.get("max_borrow") is None:
                    continue
                if self.tokens.pool_provider(offer.pool) != provider:
                    continue
                room = max(0.0, offer.size - pool["borrowed"] - pool["in_flight"])
                room = min(room, pool["max_borrow"] - pool["borrowed"] - pool["in_flight"])
                if runtime.get(offer.pool) is None or abs(runtime[offer.pool] - room) > EPSILON:
                    headroom[offer.pool] = max(0.0, room)
            if allowance or headroom or lead_time:
                update: dict[str, Any] = {"allowance": allowance, "headroom": headroom}
                if lead_time:
                    update["lead_time"] = lead_time
                await self._call("POST", "/catalog", update, provider=provider)

    def _note(self, action: str, detail: str, reason: str, outcome: str,
              jobs: Sequence[int] = ()) -> None:
        self.decisions.append(Decision(self.clock(), action, detail, reason, outcome,
                                       list(jobs)))
        log.info("%s %s (%s): %s", action, detail, reason, outcome)

    def _release(self, provider: str, host: str) -> None:
        source = self.providers[provider]
        ids = [i.id for i in source.instances() if i.host == host and i.state == "running"]
        if ids:
            source.release(ids)

    async def _act(self, action: Action, hosts: list[dict[str, Any]]) -> str:
        try:
            match action:
                case RequestHosts(template=template, count=count, jobs=jobs):
                    return await self._request_hosts(template, count, jobs)
                case CancelHosts(template=template, count=count):
                    return await self._cancel_hosts(template, count, hosts)
                case DrainHost(host=host, cause=cause):
                    provider = self._template_provider(_template_of_host(hosts, host))
                    await self._call("POST", f"/hosts/{quote(host)}/close?reason={cause}",
                                     provider=provider)
                    return "closed"
                case DecommissionHost(host=host):
                    return await self._decommission(host, hosts)
                case SetAllowance(template=template, allowance=allowance):
                    if allowance == 0:
                        self._backed_off.add(template)
                    else:
                        self._backed_off.discard(template)
                    return "allowance 0 (backed off)" if allowance == 0 else "cap lifted"
                case RequestTokens(resource=pool, amount=amount):
                    return await self.tokens.borrow(pool, amount)
                case ReturnTokens(resource=pool, amount=amount):
                    return await self.tokens.give_back(pool, amount)
        except (ControllerRefused, ProviderError, KeyError) as err:
            log.warning("%s %s failed: %s", type(action).__name__, _detail(action), err)
            return f"failed: {err}"
        return "ignored"

    async def _decommission(self, host: str, hosts: list[dict[str, Any]]) -> str:
        """Give a drained host back: decommission, release its instance, remove it. A
        host drained idle in this very round where a job started after the idle report
        this round read is refused (409): it goes back once empty, as any drained host."""
        provider = self._template_provider(_template_of_host(hosts, host))
        try:
            await self._call("POST", f"/hosts/{quote(host)}/decommission", provider=provider)
        except ControllerRefused as err:
            if err.status != 409 or STILL_RUNS not in str(err):
                raise  # (a lease lost, a host not closed: the round's failure)
            log.info("%s kept until its jobs end: %s", host, err)
            return f"kept until its jobs end: {err}"
        await asyncio.to_thread(self._release, provider, host)
        await self._call("POST", f"/hosts/{quote(host)}/remove", provider=provider)
        return "released"

    async def _request_hosts(self, template: str, count: int, jobs: Sequence[int]) -> str:
        """Record the request at the controller (its expected hosts and instance
        records, and the jobs it is for, in one commit), ask the provider, then record
        what it answered. A crash in between leaves a `requested` record that
        reconciliation settles."""
        provider = self._template_provider(template)
        rid = f"{self.name}-{uuid.uuid4().hex[:8]}"
        body: dict[str, Any] = {"template": template, "count": count, "request": rid,
                                "deadline": self.join_deadline}
        if jobs:  # the first ones, in scheduling order, as many as a record keeps
            body["jobs"] = list(jobs[:MAX_REQUEST_JOBS])
        try:
            made = await self._call("POST", "/requests", body, provider=provider)
        except ControllerRefused:
            self.metrics.requested(provider, template, "error")
            raise
        grants = [HostGrant(h["name"], h["join_token"]) for h in made["hosts"]]
        try:
            started = await asyncio.to_thread(self.providers[provider].request_hosts, rid,
                                              template, grants)
        except ProviderError as err:  # nothing will join: the request failed, back off
            self.metrics.requested(provider, template, "refused")
            self._made.append(await self._call(
                "POST", f"/requests/{quote(rid)}/refused",
                {"reason": f"{err.kind}: {err}"}, provider=provider))
            self._failures.append(template)
            return f"failed ({err.kind}): {err}"
        self.metrics.requested(provider, template, "accepted")
        self._made.append(await self._call(
            "POST", f"/requests/{quote(rid)}/accepted",
            {"instances": {i.host: i.id for i in started}}, provider=provider))
        self.inventory.watch.update({g.name: template for g in grants})
        return f"requested {', '.join(g.name for g in grants)} ({rid})"

    async def _cancel_hosts(self, template: str, count: int,
                            hosts: list[dict[str, Any]]) -> str:
        """Cancel `count` in-flight hosts of `template`, the latest requested first:
        each expected host is removed at the controller (its instance record becomes
        `released`, "cancelled before it joined"; its join token is dead from then on),
        then the provider releases the instances of those removed.

        Only hosts the session that reported the surplus counted are candidates (those
        requested at or before its time): a host requested since is not surplus. A host
        that joined meanwhile cannot be removed (409): it is kept, a host like any other
        (idle reclaim gives it back if no job wants it). A host removed cannot join any
        more, so releasing its instance loses nothing; should the provider fail to
        release it, reconciliation releases it as an instance no open record knows."""
        provider = self._template_provider(template)
        chosen = cancel_candidates(hosts, self.inventory.open.get(provider, []), template,
                                   self._session_time)[:count]
        if not chosen:
            return "nothing to cancel: no host of it is in flight"
        cancelled: list[str] = []
        kept: list[str] = []
        for name in chosen:
            try:
                await self._call("POST", f"/hosts/{quote(name)}/remove", provider=provider)
            except ControllerRefused as err:
                log.info("CancelHosts %s: %s not cancelled: %s", template, name, err)
                try:
                    state = await self._host_state(name)
                except (ControllerRefused, aiohttp.ClientError) as again:
                    kept.append(f"{name} ({err}; then {again})")
                    break
                if state is None:
                    kept.append(f"{name} (gone already)")
                    continue
                if state not in (HostState.EXPECTED, HostState.FAILED):
                    kept.append(f"{name} (joined meanwhile: kept)")
                    continue
                kept.append(f"{name} ({err})")  # not ours now (lease lost?): no more
                break
            cancelled.append(name)
            self.inventory.watch.pop(name, None)
        outcome = f"cancelled {', '.join(cancelled)}" if cancelled else "none cancelled"
        if cancelled:
            try:
                released = await asyncio.to_thread(self._release_hosts, provider, cancelled)
                outcome += f" (released {', '.join(released) or 'no running instance'})"
            except ProviderError as err:
                log.warning("CancelHosts %s: releasing %s failed: %s", template,
                            ", ".join(cancelled), err)
                outcome += (f" (release failed: {err}; reconciliation releases them once "
                            "past the orphan grace)")
        if kept:
            outcome += f"; not cancelled: {', '.join(kept)}"
        return outcome

    async def _host_state(self, name: str) -> str | None:
        """A host's state at the controller now (expected hosts too); None: no such
        host."""
        for host in (await self._call("GET", "/hosts"))["hosts"]:
            if host["name"] == name:
                return str(host["state"])
        return None

    def _release_hosts(self, provider: str, hosts: Sequence[str]) -> list[str]:
        """Release the running instances behind `hosts`; their ids, in the order of
        `hosts`."""
        source = self.providers[provider]
        order = {host: n for n, host in enumerate(hosts)}
        running = [i for i in source.instances() if i.host in order and i.state == "running"]
        ids = [i.id for i in sorted(running, key=lambda i: order[i.host])]
        if ids:
            source.release(ids)
        return ids

    # ------------------------------------------------------------------ life
    async def run(self, interval: float, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            self.client.session = session
            while not stop.is_set():
                try:
                    await self.round()
                except (aiohttp.ClientError, ControllerRefused, ProviderError, OSError) as err:
                    log.warning("round failed: %s", err)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
            self.client.session = None


def _template_of(action: Action) -> str | None:
    if isinstance(action, RequestHosts | CancelHosts | SetAllowance):
        return action.template
    return None


def cancel_candidates(hosts: Sequence[Mapping[str, Any]],
                      requests: Sequence[Mapping[str, Any]], template: str,
                      session_time: float | None) -> list[str]:
    """The expected hosts of `template` a CancelHosts may cancel, the latest requested
    first (by their request's time, then the newest host: names are numbered in
    request order): those of an open request (`requests`, the controller's answer)
    made at or before `session_time`, when the demand that found them surplus was
    worked out (None: no session, nothing is surplus)."""
    if session_time is None:
        return []
    made = {str(r["request"]): float(r["created"]) for r in requests}
    found: list[tuple[float, int, str]] = []
    for host in hosts:
        if host.get("template") != template or host.get("state") != HostState.EXPECTED:
            continue
        created = made.get(str(host.get("request", "")))
        if created is None or created > session_time:
            continue
        name = str(host["name"])
        number = name.rsplit("-", 1)[-1]
        found.append((created, int(number) if number.isdigit() else 0, name))
    return [name for _, _, name in sorted(found, reverse=True)]


def _template_of_host(hosts: list[dict[str, Any]], name: str) -> str:
    for host in hosts:
        if host["name"] == name and host.get("template"):
            return str(host["template"])
    raise KeyError(f"host {name} has no template")


def _detail(action: Action) -> str:
    match action:
        case RequestHosts(template=template, count=count) | CancelHosts(template=template,
                                                                         count=count):
            return f"{count} x {template}"
        case DrainHost(host=host) | DecommissionHost(host=host):
            return host
        case SetAllowance(template=template, allowance=allowance):
            return f"{template} -> {allowance}"
        case RequestTokens(resource=pool, amount=amount) | ReturnTokens(resource=pool,
                                                                        amount=amount):
            return f"{amount:g} {pool}"
    return ""
