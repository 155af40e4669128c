"""Provisioning requests in the live controller: a provisioner (or an admin) asks a
provider for hosts of a template, then reports the instances the provider started,
its refusal, or an instance that vanished. Each step is checked against the request
and instance records (records.py) and logged whole, with the expected hosts and the
in-flight count it changes."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

from xce.controller.auth import Identity
from xce.controller.fencing import Fencing
from xce.controller.hosts import HostDesk
from xce.controller.kernel import FactKernel
from xce.controller.problems import ApiProblem, refuse
from xce.controller.records import InstanceRecord, RequestRecord
from xce.controller.view import ExpectedHost
from xce.model.causes import Cause
from xce.model.events import (
    Event,
    ExpectedHostEnded,
    HostExpected,
    InstanceRecorded,
    RequestRecorded,
)
from xce.model.lifecycle import HostState, InstanceState, RequestState, TransitionError
from xce.sched.room import template_room


class RequestDesk:
    """Makes provisioning requests and follows what their provider reports."""

    def __init__(self, facts: FactKernel, hosts: HostDesk, fencing: Fencing) -> None:
        self.facts = facts
        self.hosts = hosts
        self.fencing = fencing

    async def request_hosts(self, who: Identity, template: str, provider: str,
                            request: str, count: int, deadline_in: float,
                            jobs: Sequence[int] = ()) -> list[tuple[ExpectedHost, str]]:
        """A request of `count` hosts of `template` from its provider for `jobs` (the
        demand's, in scheduling order), recorded with one instance record and one
        expected host per host, all in one commit. Each host counts as in flight at
        once (requested now); an agent may join as it with its single-use token until
        the deadline. Refused whole if the template's max would be passed."""
        facts = self.facts
        found = facts.state.templates.get(template)
        if found is None:
            raise ApiProblem(404, f"template {template}: no such template in the catalog")
        if who.role not in ("admin", "provisioner"):
            raise ApiProblem(403, f"role {who.role} may not add expected hosts")
        if provider and provider != found.provider:
            refuse(who, 403, f"template {template} belongs to provider {found.provider}, "
                             f"not {provider}")
        self.fencing.fenced(who, found.provider)
        now = facts.clock()
        request = request or f"{who.name}-{secrets.token_hex(4)}"
        if request in facts.records.requests:
            raise ApiProblem(409, f"request {request} exists already")
        alive = facts.state.template_alive(template) + facts.view.in_flight(template)
        if count > template_room(found.max, alive):
            raise ApiProblem(409, f"Template {template} allows no more hosts (max {found.max}, "
                                  f"{alive} alive or in flight, {count} asked)")
        events: list[Event] = [
            RequestRecorded(request, found.provider, template, count, who.name, now,
                            tuple(jobs))]
        tokens: list[tuple[str, str]] = []
        for number in range(facts.view.last_host_number + 1,
                            facts.view.last_host_number + 1 + count):
            name = f"{template}-{number}"
            token = "xcej_" + secrets.token_urlsafe(32)
            digest = hashlib.sha256(token.encode()).hexdigest()
            tokens.append((name, token))
            events += [
                HostExpected(name, template, found.provider, request, digest,
                             now + deadline_in, now),
                InstanceRecorded(name, request, found.provider, template, now),
            ]
        events.append(self.hosts.in_flight(template, added=[now] * count))
        await facts.commit(now, events)
        return [(facts.view.expected[name], token) for name, token in tokens]

    def _request(self, who: Identity, request: str) -> RequestRecord:
        record = self.facts.records.requests.get(request)
        if record is None:
            raise ApiProblem(404, f"request {request}: no such request")
        if who.role not in ("admin", "provisioner"):
            raise ApiProblem(403, f"role {who.role} may not change provisioning requests")
        self.fencing.fenced(who, record.provider)
        return record

    async def accept_request(self, who: Identity, request: str,
                             instances: dict[str, str]) -> RequestRecord:
        """The provider started instances of a request: `instances` maps each expected
        host to the provider's instance id."""
        facts = self.facts
        record = self._request(who, request)
        unknown = sorted(set(instances) - set(record.hosts))
        if unknown:
            raise ApiProblem(400, f"request {request} has no host {', '.join(unknown)}")
        now = facts.clock()
        try:
            events = facts.records.accept_instances(instances, now)
        except TransitionError as err:
            raise ApiProblem(409, str(err)) from err
        await facts.commit(now, events)
        return record

    async def refuse_request(self, who: Identity, request: str, reason: str) -> RequestRecord:
        """The provider refused a request: it failed; its expected hosts are cancelled
        (their instances released)."""
        facts = self.facts
        record = self._request(who, request)
        now = facts.clock()
        try:
            events: list[Event] = facts.records.change_request(request, RequestState.FAILED,
                                                               now, reason)
        except TransitionError as err:
            raise ApiProblem(409, str(err)) from err
        view = facts.view
        cancelled = [view.expected[h] for h in record.hosts
                     if h in view.expected and view.expected[h].state == HostState.EXPECTED]
        for expected in cancelled:
            events.append(ExpectedHostEnded(expected.name, HostState.REMOVED,
                                            f"refused: {reason}", now, Cause.REFUSED))
        if cancelled:
            events.append(self.hosts.in_flight(record.template, {e.name for e in cancelled}))
        await facts.commit(now, events)
        return record

    async def vanished(self, who: Identity, host: str, reason: str) -> InstanceRecord:
        """The provider no longer has an instance it made: the instance is lost; its
        expected host fails, or its joined host is lost as reclaimed (jobs requeued or
        exited per queue)."""
        facts = self.facts
        instance = facts.records.instances.get(host)
        if instance is None:
            raise ApiProblem(404, f"host {host}: no instance record")
        self._request(who, instance.request)
        now = facts.clock()
        why = reason or "vanished from the provider"
        expected = facts.view.expected.get(host)
        if host in facts.view.hosts and instance.state in (InstanceState.JOINED,
                                                           InstanceState.DRAINING):
            await self.hosts.reclaimed(who, host)
            return instance
        try:
            events: list[Event] = facts.records.change_instance(host, InstanceState.LOST, now,
                                                                why)
        except TransitionError as err:
            raise ApiProblem(409, str(err)) from err
        if expected is not None and expected.state == HostState.EXPECTED:
            events += [ExpectedHostEnded(host, HostState.FAILED, why, now),
                       self.hosts.in_flight(expected.template, {host})]
        await facts.commit(now, events)
        return instance
