"""The provisioner: leases its providers, runs the policy on live demand and idle
supply every round, and carries the actions out through the controller and the
providers.

A round: take or renew each provider's lease (a provider leased to another instance
is skipped); read `GET /demand`, `GET /idle` and `GET /hosts`; run `xce.policy.decide`
(the simulator's code) for the templates of the leased providers; then, for each
action, tell the controller first (expected hosts, drain, decommission, token steps,
allowance) with the lease's fencing token, and the provider after. Every decision is
logged with its reason and kept for `status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time as wallclock
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec

from xce.model.api import FENCING_HEADER
from xce.model.cluster import ClusterConfig
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
from xce.provisioner.provider import HostGrant, Provider, ProviderError
from xce.provisioner.round import policy_input

log = logging.getLogger("xce.provisioner")


class ControllerRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Decision(msgspec.Struct, frozen=True):
    time: float
    action: str
    detail: str
    reason: str
    outcome: str


class Status(msgspec.Struct, frozen=True):
    """A provisioner instance's status, rewritten after every round."""

    name: str
    time: float
    leases: dict[str, int]  # provider -> fencing token held
    expected: list[str]  # hosts requested, not joined yet
    decisions: list[Decision]


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
    ) -> None:
        self.status_file = status_file
        self.url = url.rstrip("/")
        self.token = token
        self.name = name
        self.config = config
        self.providers = dict(providers)
        self.lease_ttl = lease_ttl
        self.clock = clock
        self.memory = PolicyMemory()
        self.fences: dict[str, int] = {}  # provider -> fencing token of our lease
        self.expected: dict[str, tuple[str, str, str]] = {}  # host -> (provider, template, req)
        self.decisions: deque[Decision] = deque(maxlen=200)
        self._failures: list[str] = []
        self._headroom: dict[str, float] = {}  # what the runtime catalog was last told
        self._session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------------ controller
    async def _call(self, method: str, path: str, body: Any = None,
                    provider: str | None = None) -> Any:
        assert self._session is not None
        headers = {"Authorization": f"Bearer {self.token}"}
        if provider is not None and provider in self.fences:
            headers[FENCING_HEADER] = str(self.fences[provider])
        async with self._session.request(method, self.url + path, json=body,
                                         headers=headers) as answer:
            data = await answer.json(content_type=None)
            if answer.status >= 400:
                message = data.get("error", "") if isinstance(data, dict) else str(data)
                raise ControllerRefused(answer.status, message)
            return data

    def _template_provider(self, template: str) -> str:
        for t in self.config.catalog.templates:
            if t.name == template:
                return t.provider
        raise KeyError(template)

    def _pool_provider(self, pool: str) -> str | None:
        for name, provider in self.providers.items():
            if any(p.pool == pool for p in provider.describe().pools):
                return name
        return None

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
                await self._reconcile(provider)
            leased.add(provider)
        if not leased:
            return []
        await self._sync_headroom(leased)
        templates = {t.name for t in self.config.catalog.templates if t.provider in leased}
        demand = (await self._call("GET", "/demand")).get("demand")
        idle = (await self._call("GET", "/idle")).get("idle")
        hosts = (await self._call("GET", "/hosts"))["hosts"]
        joined = await self._settle_expected(hosts)
        now = self.clock()
        inp = policy_input(now, demand, idle, hosts, templates, self._failures, joined)
        self._failures = []
        actions, self.memory = decide(inp, self.memory, self.config.policy,
                                      self.config.catalog)
        for action in actions:
            if _template_of(action) not in templates and _template_of(action) is not None:
                continue
            outcome = await self._act(action, hosts)
            self._note(type(action).__name__, _detail(action), action.reason, outcome)
        self._write_status(now, sorted(leased))
        return actions

    def _write_status(self, now: float, leased: list[str]) -> None:
        """What `xce provisioner status` shows: leases held, the recent decisions."""
        if self.status_file is None:
            return
        status = Status(self.name, now, {p: self.fences[p] for p in leased},
                        sorted(self.expected), list(self.decisions))
        tmp = self.status_file.with_suffix(".tmp")
        tmp.write_bytes(msgspec.json.encode(status))
        os.replace(tmp, self.status_file)

    async def _sync_headroom(self, leased: set[str]) -> None:
        """Keep the runtime catalog current from the providers' descriptions: a pool's
        headroom is what its provider could still lend (its size less what is borrowed
        or asked for)."""
        sizes = {}
        for provider in sorted(leased):
            description = await asyncio.to_thread(self.providers[provider].describe)
            sizes.update({p.pool: p.size for p in description.pools})
        if not sizes:
            return
        pools = (await self._call("GET", "/resources"))["resources"]
        headroom = {
            p["pool"]: max(0.0, sizes[p["pool"]] - p["borrowed"] - p["in_flight"])
            for p in pools
            if p["pool"] in sizes and p.get("max_borrow") is not None
        }
        if headroom and headroom != self._headroom:
            await self._call("POST", "/catalog", {"headroom": headroom})
            self._headroom = headroom

    async def _reconcile(self, provider: str) -> None:
        """Match the controller's records of a provider's hosts with its inventory, at
        start and at takeover (the previous owner may have died mid-request): an
        instance no host record knows is released (nothing leaks); an expected host with
        no instance is cancelled (its join token died with the owner; the policy asks
        again if the demand remains); a joined host whose instance is gone is lost, its
        jobs requeued. Expected hosts with an instance are followed as our own."""
        source = self.providers[provider]
        instances = await asyncio.to_thread(source.instances)
        hosts = (await self._call("GET", "/hosts"))["hosts"]
        mine = {h["name"]: h for h in hosts if h.get("provider") == provider}
        running = {i.host: i for i in instances if i.state == "running"}
        for host, instance in running.items():
            if host not in mine:
                await asyncio.to_thread(source.release, [instance.id])
                self._note("Reconcile", host, "an instance no host record knows", "released")
        for name, host in mine.items():
            state = host["state"]
            if state == "expected" and name not in running:
                await self._call("POST", f"/hosts/{quote(name)}/remove", provider=provider)
                self._note("Reconcile", name, "expected, but no instance was started",
                           "cancelled")
            elif state == "expected":
                self.expected[name] = (provider, host["template"], host.get("request", ""))
            elif state == "decommissioned":  # the owner died between release and remove
                if name in running:
                    await asyncio.to_thread(source.release, [running[name].id])
                await self._call("POST", f"/hosts/{quote(name)}/remove", provider=provider)
                self._note("Reconcile", name, "decommissioned, not removed", "removed")
            elif state in ("ok", "closed", "unreach") and name not in running:
                await self._call("POST", f"/hosts/{quote(name)}/reclaimed", provider=provider)
                self._note("Reconcile", name, "its instance is gone", "lost")

    def _note(self, action: str, detail: str, reason: str, outcome: str) -> None:
        self.decisions.append(Decision(self.clock(), action, detail, reason, outcome))
        log.info("%s %s (%s): %s", action, detail, reason, outcome)

    async def _settle_expected(self, hosts: list[dict[str, Any]]) -> list[str]:
        """Our expected hosts that joined (templates, for the policy) or failed (their
        instances released, the record cleared, the template backed off)."""
        by_name = {h["name"]: h for h in hosts}
        joined: list[str] = []
        for name, (provider, template, _request) in list(self.expected.items()):
            state = by_name.get(name, {}).get("state")
            if state == "expected":
                continue
            del self.expected[name]
            if state == "failed":
                self._failures.append(template)
                await asyncio.to_thread(self._release, provider, name)
                await self._call("POST", f"/hosts/{quote(name)}/remove", provider=provider)
            elif state is not None:
                joined.append(template)
        return joined

    def _release(self, provider: str, host: str) -> None:
        source = self.providers[provider]
        ids = [i.id for i in source.instances() if i.host == host and i.state == "running"]
        if ids:
            source.release(ids)

    async def _act(self, action: Action, hosts: list[dict[str, Any]]) -> str:
        try:
            match action:
                case RequestHosts(template=template, count=count):
                    return await self._request_hosts(template, count)
                case DrainHost(host=host):
                    provider = self._template_provider(_template_of_host(hosts, host))
                    reason = "lifetime" if "lifetime" in action.reason else "idle"
                    await self._call("POST", f"/hosts/{quote(host)}/close?reason={reason}",
                                     provider=provider)
                    return "closed"
                case DecommissionHost(host=host):
                    provider = self._template_provider(_template_of_host(hosts, host))
                    await self._call("POST", f"/hosts/{quote(host)}/decommission",
                                     provider=provider)
                    await asyncio.to_thread(self._release, provider, host)
                    await self._call("POST", f"/hosts/{quote(host)}/remove", provider=provider)
                    return "released"
                case SetAllowance(template=template, allowance=allowance):
                    await self._call("POST", "/catalog", {"allowance": {template: allowance}})
                    return f"allowance {allowance}"
                case RequestTokens(resource=pool, amount=amount):
                    return await self._borrow(pool, amount)
                case ReturnTokens(resource=pool, amount=amount):
                    return await self._give_back(pool, amount)
        except (ControllerRefused, ProviderError, KeyError) as err:
            log.warning("%s %s failed: %s", type(action).__name__, _detail(action), err)
            return f"failed: {err}"
        return "ignored"

    async def _request_hosts(self, template: str, count: int) -> str:
        provider = self._template_provider(template)
        request = f"{self.name}-{uuid.uuid4().hex[:8]}"
        grants: list[HostGrant] = []
        for _ in range(count):
            made = await self._call("POST", "/hosts/expected",
                                    {"template": template, "provider": provider,
                                     "request": request}, provider=provider)
            grants.append(HostGrant(made["name"], made["join_token"]))
            self.expected[made["name"]] = (provider, template, request)
        try:
            await asyncio.to_thread(self.providers[provider].request_hosts, request, template,
                                    grants)
        except ProviderError as err:  # nothing will join: cancel, back off
            for grant in grants:
                self.expected.pop(grant.name, None)
                await self._call("POST", f"/hosts/{quote(grant.name)}/remove", provider=provider)
            self._failures.append(template)
            return f"failed ({err.kind}): {err}"
        return f"requested {', '.join(g.name for g in grants)} ({request})"

    async def _borrow(self, pool: str, amount: float) -> str:
        provider = self._pool_provider(pool)
        if provider is None:
            return f"no provider lends {pool}"
        path = f"/resources/{quote(pool, safe='')}"
        await self._call("POST", f"{path}/borrow", {"amount": amount})
        try:
            granted = await asyncio.to_thread(self.providers[provider].borrow, pool, amount)
        except ProviderError:
            granted = 0.0
        if granted > 0:
            await self._call("POST", f"{path}/grant", {"amount": granted})
        if granted < amount:
            await self._call("POST", f"{path}/refuse", {"amount": amount - granted})
        return f"granted {granted:g} of {amount:g}"

    async def _give_back(self, pool: str, amount: float) -> str:
        provider = self._pool_provider(pool)
        if provider is None:
            return f"no provider lends {pool}"
        await self._call("POST", f"/resources/{quote(pool, safe='')}/return", {"amount": amount})
        await asyncio.to_thread(self.providers[provider].give_back, pool, amount)
        return f"returned {amount:g}"

    # ------------------------------------------------------------------ life
    async def run(self, interval: float, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            self._session = session
            while not stop.is_set():
                try:
                    await self.round()
                except (aiohttp.ClientError, ControllerRefused, OSError) as err:
                    log.warning("round failed: %s", err)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
            self._session = None


def _template_of(action: Action) -> str | None:
    return action.template if isinstance(action, RequestHosts | SetAllowance) else None


def _template_of_host(hosts: list[dict[str, Any]], name: str) -> str:
    for host in hosts:
        if host["name"] == name and host.get("template"):
            return str(host["template"])
    raise KeyError(f"host {name} has no template")


def _detail(action: Action) -> str:
    match action:
        case RequestHosts(template=template, count=count):
            return f"{count} x {template}"
        case DrainHost(host=host) | DecommissionHost(host=host):
            return host
        case SetAllowance(template=template, allowance=allowance):
            return f"{template} -> {allowance}"
        case RequestTokens(resource=pool, amount=amount) | ReturnTokens(resource=pool,
                                                                        amount=amount):
            return f"{amount:g} {pool}"
    return ""
