"""Durable provisioning records: requests and their instances, one transition table
each, a reason for every edge (docs/requests.md).

A request (a number of hosts of one template from one provider):

    requested -> in flight -> fulfilled | partially fulfilled | failed
    fulfilled | partially fulfilled -> returning -> returned

An instance (one machine, keyed by the expected host it joins as):

    requested -> running -> joined <-> draining -> releasing -> released
    requested | running -> released (refused, cancelled); any live state -> lost

Instances follow their hosts: the controller derives their changes from the host
facts it records (a host joins, is closed for idle or lifetime, decommissioned,
removed, reclaimed; an expected host fails its deadline or is cancelled), in the same
commit, so records and hosts never disagree. A request's state follows from its
instances. The provisioner adds what only it knows: the provider accepted or refused
a request, an instance vanished from the provider's inventory.
"""

from __future__ import annotations

import msgspec

from xce.controller.lifecycle import RECLAIMED
from xce.model.events import (
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    InstanceChanged,
    InstanceRecorded,
    RequestChanged,
    RequestRecorded,
)

CANCELLED = "cancelled before it joined"  # an instance's expected host was removed
# (from, to) -> the reason recorded when none more specific is given
REQUEST_TRANSITIONS: dict[tuple[str, str], str] = {
    ("requested", "in flight"): "accepted by the provider",
    ("requested", "failed"): "refused by the provider",
    ("in flight", "fulfilled"): "every host joined",
    ("in flight", "partially fulfilled"): "some hosts joined, the others failed",
    ("in flight", "failed"): "no host joined",
    ("fulfilled", "returning"): "hosts are being given back",
    ("partially fulfilled", "returning"): "hosts are being given back",
    ("returning", "returned"): "every host given back",
}
INSTANCE_TRANSITIONS: dict[tuple[str, str], str] = {
    ("requested", "running"): "started by the provider",
    ("requested", "released"): "the request was refused",
    ("running", "joined"): "joined the cluster",
    ("running", "releasing"): "join deadline passed",
    ("running", "released"): CANCELLED,
    ("running", "lost"): "vanished from the provider",
    ("joined", "draining"): "idle",
    ("draining", "joined"): "opened again",
    ("joined", "releasing"): "decommissioned",
    ("draining", "releasing"): "decommissioned",
    ("releasing", "released"): "released by the provider",
    ("joined", "lost"): RECLAIMED,
    ("draining", "lost"): RECLAIMED,
    ("releasing", "lost"): "vanished from the provider",
    ("lost", "released"): "cleared",
}
# A request whose hosts that did not join were all cancelled (CancelHosts: no pending
# job needed them any more) says so, rather than the defaults above.
ALL_CANCELLED = "every host was cancelled before it joined"
OTHERS_CANCELLED = "some hosts joined, the others were cancelled before they joined"
REQUEST_FINAL = ("failed", "returned")
INSTANCE_FINAL = ("released", "lost")
# host close reasons that start giving a host back (reclaim: its provider announced it)
DRAIN_REASONS = ("idle", "lifetime", "reclaim")


class RecordError(ValueError):
    """A change the tables do not allow."""


class InstanceRecord(msgspec.Struct):
    host: str  # the expected host it joins as: its key
    request: str
    provider: str
    template: str
    state: str
    reason: str
    since: float
    instance_id: str = ""  # the provider's id, once it started the instance
    joined: bool = False  # it did join at some point


class RequestRecord(msgspec.Struct):
    request: str
    provider: str
    template: str
    count: int
    holder: str
    state: str
    reason: str
    since: float
    created: float
    hosts: list[str] = []
    jobs: list[int] = []  # the jobs it was made for, in scheduling order


def instance_reason(host: str, current: str, target: str, reason: str = "") -> str:
    default = INSTANCE_TRANSITIONS.get((current, target))
    if default is None:
        raise RecordError(_refusal(f"instance of host {host}", current, target,
                                   INSTANCE_TRANSITIONS))
    return reason or default


def request_reason(request: str, current: str, target: str, reason: str = "") -> str:
    default = REQUEST_TRANSITIONS.get((current, target))
    if default is None:
        raise RecordError(_refusal(f"request {request}", current, target,
                                   REQUEST_TRANSITIONS))
    return reason or default


def _refusal(what: str, current: str, target: str,
             table: dict[tuple[str, str], str]) -> str:
    allowed = sorted(t for (f, t) in table if f == current)
    return (f"{what} is {current}: it cannot become {target} "
            f"(from {current}: {', '.join(allowed) or 'nothing'})")


class RecordBook:
    """Requests and instances, rebuilt from the record facts."""

    def __init__(self) -> None:
        self.requests: dict[str, RequestRecord] = {}
        self.instances: dict[str, InstanceRecord] = {}  # by host

    # ------------------------------------------------------------------ facts
    def apply(self, event: Event) -> None:
        """Apply a record fact (others are ignored). Applying one twice changes nothing:
        the book applies the facts it derives as it makes them, and the controller
        applies every fact it commits."""
        match event:
            case RequestRecorded(request=rid, time=time) if rid not in self.requests:
                self.requests[rid] = RequestRecord(
                    rid, event.provider, event.template, event.count, event.holder,
                    "requested", "recorded", time, time, jobs=list(event.jobs))
            case RequestChanged(request=rid, state=state, reason=reason, time=time):
                record = self.requests[rid]
                record.state, record.reason, record.since = state, reason, time
            case InstanceRecorded(host=host, request=rid, time=time) if (
                host not in self.instances
            ):
                self.instances[host] = InstanceRecord(
                    host, rid, event.provider, event.template, "requested", "recorded", time)
                self.requests[rid].hosts.append(host)
            case InstanceChanged(host=host, state=state, reason=reason, time=time):
                instance = self.instances[host]
                instance.state, instance.reason, instance.since = state, reason, time
                instance.instance_id = event.instance_id or instance.instance_id
                instance.joined = instance.joined or state == "joined"
            case _:
                pass

    # ------------------------------------------------------------------ derived facts
    def follow(self, event: Event, now: float) -> list[Event]:
        """The record facts that follow from a host fact (none for other facts): the
        instance's change, then its request's. Raises nothing: a host fact is never
        refused for its record's sake."""
        target = _instance_target(event)
        if target is None:
            return []
        host, state, reason = target
        instance = self.instances.get(host)
        if instance is None or instance.state in INSTANCE_FINAL:
            return []
        if (instance.state, state) not in INSTANCE_TRANSITIONS:
            if state == "joined" and instance.state == "requested":
                # it joined before the provisioner said the provider accepted it
                return [*self.change_instance(host, "running", now),
                        *self.change_instance(host, "joined", now, reason)]
            return []
        return self.change_instance(host, state, now, reason)

    def check_instance(self, host: str, state: str) -> None:
        """RecordError unless the instance may become `state` (or already is)."""
        instance = self.instances[host]
        if instance.state != state:
            instance_reason(host, instance.state, state)

    def change_instance(self, host: str, state: str, now: float, reason: str = "",
                        instance_id: str = "") -> list[Event]:
        """An instance's change (RecordError if the table forbids it) and the request
        change that follows. The facts are applied here, so that several changes in
        one commit see each other."""
        instance = self.instances[host]
        why = instance_reason(host, instance.state, state, reason)
        facts: list[Event] = [InstanceChanged(host, state, why, now, instance_id)]
        self.apply(facts[0])
        facts.extend(self._request_follows(instance.request, now))
        return facts

    def change_request(self, rid: str, state: str, now: float, reason: str = "") -> list[Event]:
        record = self.requests[rid]
        fact = RequestChanged(rid, state, request_reason(rid, record.state, state, reason), now)
        self.apply(fact)
        return [fact]

    def _request_follows(self, rid: str, now: float) -> list[Event]:
        record = self.requests[rid]
        facts: list[Event] = []
        for state, reason in _request_path(record, [self.instances[h] for h in record.hosts]):
            facts.extend(self.change_request(rid, state, now, reason))
        return facts

    # ------------------------------------------------------------------ queries
    def snapshot(self) -> tuple[list[RequestRecord], list[InstanceRecord]]:
        return list(self.requests.values()), list(self.instances.values())

    def forget(self, before: float) -> None:
        """Drop requests that ended before `before`, with their instances."""
        for rid, record in list(self.requests.items()):
            ended = [self.instances[h] for h in record.hosts]
            if record.state in REQUEST_FINAL and record.since < before and all(
                i.state in INSTANCE_FINAL and i.since < before for i in ended
            ):
                del self.requests[rid]
                for instance in ended:
                    del self.instances[instance.host]

    def restore(self, requests: list[RequestRecord], instances: list[InstanceRecord]) -> None:
        self.requests = {r.request: r for r in requests}
        self.instances = {i.host: i for i in instances}


def _instance_target(event: Event) -> tuple[str, str, str] | None:
    """(host, instance state, reason) a host fact moves its instance to, if any."""
    match event:
        case HostAdded(name=name, template=template) if template is not None:
            return name, "joined", ""
        case HostStateChanged(name=name, state="closed", reason=reason) if (
            reason in DRAIN_REASONS
        ):
            return name, "draining", reason
        case HostStateChanged(name=name, state="ok"):
            return name, "joined", ""
        case HostStateChanged(name=name, state="decommissioned"):
            return name, "releasing", ""
        case HostStateChanged(name=name, state="lost", reason=reason) if reason == RECLAIMED:
            return name, "lost", ""
        case HostRemoved(name=name):
            return name, "released", ""
        case ExpectedHostEnded(name=name, state="failed", reason=reason):
            return name, "releasing", reason
        case ExpectedHostEnded(name=name, state="removed", reason=reason):
            return name, "released", "" if reason in ("cancelled", "cleared") else reason
    return None


def _request_path(record: RequestRecord,
                  instances: list[InstanceRecord]) -> list[tuple[str, str]]:
    """The request states its instances now call for, in order (often none), each with
    its reason ("": the table's)."""
    if record.state in REQUEST_FINAL:
        return []
    states = [i.state for i in instances]
    if all(s == "requested" for s in states):
        return []
    path: list[tuple[str, str]] = []
    current = record.state
    if current == "requested":
        path.append((current := "in flight", ""))
    if any(s in ("requested", "running") for s in states):  # some still on their way
        return path
    joined = sum(i.joined for i in instances)
    if current == "in flight":
        unjoined = [i for i in instances if not i.joined]
        cancelled = bool(unjoined) and all(
            i.state == "released" and i.reason == CANCELLED for i in unjoined)
        if joined == 0:
            return [*path, ("failed", ALL_CANCELLED if cancelled else "")]
        current = "fulfilled" if joined == record.count else "partially fulfilled"
        path.append((current, OTHERS_CANCELLED if cancelled else ""))
    given_back = [i for i in instances if i.joined and i.state != "joined"
                  and i.state != "draining"]
    if given_back and current in ("fulfilled", "partially fulfilled"):
        path.append((current := "returning", ""))
    if current == "returning" and all(s in INSTANCE_FINAL for s in states):
        path.append(("returned", ""))
    return path
