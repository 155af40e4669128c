"""Durable provisioning records: requests and their instances, each following its
transition table (`REQUEST_LIFE`, `INSTANCE_LIFE` of xce.model.lifecycle, a reason for
every edge; docs/requests.md).

Instances follow their hosts: the controller derives their changes from the host
facts it records (a host joins, is closed for idle, lifetime or reclaim, decommissioned,
removed, reclaimed; an expected host fails its deadline, is cancelled or refused), in
the same commit, so records and hosts never disagree; each change carries the host
change's cause. A request's state follows from its instances. The provisioner adds what
only it knows: the provider accepted or refused a request, an instance vanished from the
provider's inventory.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from xce.model.causes import Cause
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
from xce.model.lifecycle import (
    CANCELLED,
    HOST_LIFE,
    INSTANCE_LIFE,
    REQUEST_LIFE,
    HostState,
    InstanceState,
    RequestState,
)

# A request whose hosts that did not join were all cancelled (CancelHosts: no pending
# job needed them any more) says so, rather than its table's reasons.
ALL_CANCELLED = "every host was cancelled before it joined"
OTHERS_CANCELLED = "some hosts joined, the others were cancelled before they joined"
REQUEST_FINAL = REQUEST_LIFE.final
INSTANCE_FINAL = INSTANCE_LIFE.final
# host close causes that start giving a host back (reclaim: its provider announced it)
DRAIN_CAUSES = (Cause.IDLE, Cause.LIFETIME, Cause.RECLAIM)
# A target of an instance: (host, state, reason: "" for the table's, cause)
Target = tuple[str, InstanceState, str, Cause | None]


class InstanceRecord(msgspec.Struct):
    host: str  # the expected host it joins as: its key
    request: str
    provider: str
    template: str
    state: InstanceState
    reason: str
    since: float
    instance_id: str = ""  # the provider's id, once it started the instance
    joined: bool = False  # it did join at some point
    # the cause of its last change (snapshots of release 0.1 have none: restore
    # derives it from the reason, INSTANCE_LIFE.cause_of)
    cause: Cause | None = None


class RequestRecord(msgspec.Struct):
    request: str
    provider: str
    template: str
    count: int
    holder: str
    state: RequestState
    reason: str
    since: float
    created: float
    hosts: list[str] = []
    jobs: list[int] = []  # the jobs it was made for, in scheduling order


class RecordBook:
    """Requests and instances, rebuilt from the record facts."""

    # The facts `apply` follows (the kernel hands it no other: controller/kernel.py)
    FOLLOWS: tuple[type[Event], ...] = (
        RequestRecorded, RequestChanged, InstanceRecorded, InstanceChanged,
    )

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
                    RequestState.REQUESTED, "recorded", time, time, jobs=list(event.jobs))
            case RequestChanged(request=rid, state=state, reason=reason, time=time):
                record = self.requests[rid]
                record.state, record.reason, record.since = RequestState(state), reason, time
            case InstanceRecorded(host=host, request=rid, time=time) if (
                host not in self.instances
            ):
                self.instances[host] = InstanceRecord(
                    host, rid, event.provider, event.template, InstanceState.REQUESTED,
                    "recorded", time)
                self.requests[rid].hosts.append(host)
            case InstanceChanged(host=host, state=state, reason=reason, time=time):
                instance = self.instances[host]
                instance.state, instance.reason, instance.since = (
                    InstanceState(state), reason, time)
                instance.cause = INSTANCE_LIFE.cause_of(state, reason, event.cause)
                instance.instance_id = event.instance_id or instance.instance_id
                instance.joined = instance.joined or state == InstanceState.JOINED
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
        host, state, reason, cause = target
        instance = self.instances.get(host)
        if instance is None or instance.state in INSTANCE_FINAL:
            return []
        if not INSTANCE_LIFE.allows(instance.state, state):
            if state == InstanceState.JOINED and instance.state == InstanceState.REQUESTED:
                # it joined before the provisioner said the provider accepted it
                return [*self.change_instance(host, InstanceState.RUNNING, now),
                        *self.change_instance(host, state, now, reason)]
            return []
        return self.change_instance(host, state, now, reason, cause=cause)

    def accept_instances(self, instances: Mapping[str, str], now: float) -> list[Event]:
        """The provider started these instances (expected host -> the provider's id):
        each `requested` one becomes running. One whose host joined first (a fast
        provider's agent can join before the provisioner reports the answer) keeps its
        state. TransitionError, before any change, if another cannot become running."""
        for host in instances:
            if not self.instances[host].joined:
                self.check_instance(host, InstanceState.RUNNING)
        events: list[Event] = []
        for host, instance_id in instances.items():
            if self.instances[host].state == InstanceState.REQUESTED:
                events += self.change_instance(host, InstanceState.RUNNING, now,
                                               instance_id=instance_id)
        return events

    def check_instance(self, host: str, state: InstanceState) -> None:
        """TransitionError unless the instance may become `state` (or already is)."""
        instance = self.instances[host]
        if instance.state != state:
            INSTANCE_LIFE.reason_for(host, instance.state, state)

    def change_instance(self, host: str, state: InstanceState, now: float, reason: str = "",
                        instance_id: str = "", cause: Cause | None = None) -> list[Event]:
        """An instance's change (TransitionError if the table forbids it) and the
        request change that follows. The facts are applied here, so that several
        changes in one commit see each other."""
        instance = self.instances[host]
        why = INSTANCE_LIFE.reason_for(host, instance.state, state, reason)
        facts: list[Event] = [InstanceChanged(host, state, why, now, instance_id, cause)]
        self.apply(facts[0])
        facts.extend(self._request_follows(instance.request, now))
        return facts

    def change_request(self, rid: str, state: RequestState, now: float,
                       reason: str = "") -> list[Event]:
        record = self.requests[rid]
        fact = RequestChanged(rid, state, REQUEST_LIFE.reason_for(rid, record.state, state,
                                                                  reason), now)
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
        for instance in instances:  # (a snapshot of release 0.1 kept no causes)
            instance.cause = INSTANCE_LIFE.cause_of(instance.state, instance.reason,
                                                    instance.cause)


def _instance_target(event: Event) -> Target | None:
    """What a host fact moves its instance to, if anything: a drain for the causes
    that give a host back, a loss when its provider reclaimed it; an expected host
    removed releases it as cancelled, or refused (with the provider's words), or, a
    failed one cleared, with the table's reason."""
    match event:
        case HostAdded(name=name, template=template) if template is not None:
            return name, InstanceState.JOINED, "", None
        case HostStateChanged(name=name, state=state, reason=reason):
            cause = HOST_LIFE.cause_of(state, reason, event.cause)
            if state == HostState.CLOSED and cause in DRAIN_CAUSES:
                return name, InstanceState.DRAINING, reason, cause
            if state == HostState.OK:
                return name, InstanceState.JOINED, "", None
            if state == HostState.DECOMMISSIONED:
                return name, InstanceState.RELEASING, "", None
            if state == HostState.LOST and cause is Cause.RECLAIM:
                return name, InstanceState.LOST, "", cause
        case HostRemoved(name=name):
            return name, InstanceState.RELEASED, "", None
        case ExpectedHostEnded(name=name, state=HostState.FAILED, reason=reason):
            return name, InstanceState.RELEASING, reason, event.cause
        case ExpectedHostEnded(name=name, state=HostState.REMOVED, reason=reason, cause=cause):
            if cause is not Cause.REFUSED:  # (refused: the provider's words)
                reason = CANCELLED if cause is Cause.CANCELLED else ""
            return name, InstanceState.RELEASED, reason, cause
    return None


def _request_path(record: RequestRecord,
                  instances: list[InstanceRecord]) -> list[tuple[RequestState, str]]:
    """The request states its instances now call for, in order (often none), each with
    its reason ("": the table's)."""
    if record.state in REQUEST_FINAL:
        return []
    states = [i.state for i in instances]
    if all(s == InstanceState.REQUESTED for s in states):
        return []
    path: list[tuple[RequestState, str]] = []
    current = record.state
    if current == RequestState.REQUESTED:
        path.append((current := RequestState.IN_FLIGHT, ""))
    if any(s in (InstanceState.REQUESTED, InstanceState.RUNNING) for s in states):
        return path  # some still on their way
    joined = sum(i.joined for i in instances)
    if current == RequestState.IN_FLIGHT:
        unjoined = [i for i in instances if not i.joined]
        cancelled = bool(unjoined) and all(
            i.state == InstanceState.RELEASED and i.cause is Cause.CANCELLED
            for i in unjoined)
        if joined == 0:
            return [*path, (RequestState.FAILED, ALL_CANCELLED if cancelled else "")]
        current = (RequestState.FULFILLED if joined == record.count
                   else RequestState.PARTIALLY_FULFILLED)
        path.append((current, OTHERS_CANCELLED if cancelled else ""))
    given_back = [i for i in instances if i.joined
                  and i.state not in (InstanceState.JOINED, InstanceState.DRAINING)]
    if given_back and current in (RequestState.FULFILLED, RequestState.PARTIALLY_FULFILLED):
        path.append((current := RequestState.RETURNING, ""))
    if current == RequestState.RETURNING and all(s in INSTANCE_FINAL for s in states):
        path.append((RequestState.RETURNED, ""))
    return path
