"""The lifecycles of provisioning records (docs/requests.md): a request and its
instances, one transition table each, a reason for every edge.

A request (a number of hosts of one template from one provider):

    requested -> in flight -> fulfilled | partially fulfilled | failed
    fulfilled | partially fulfilled -> returning -> returned

An instance (one machine, keyed by the expected host it joins as):

    requested -> running -> joined <-> draining -> releasing -> released
    requested | running -> released (refused, cancelled); any live state -> lost

An instance change carries the cause of the host change it follows
(`InstanceChanged.cause`): reclaim (lost because its provider took the host back),
cancelled or refused (released before it joined), idle, lifetime or reclaim (draining).
"""

from __future__ import annotations

from enum import StrEnum

from xce.model.causes import Cause
from xce.model.lifecycle.hosts import RECLAIMED
from xce.model.lifecycle.table import Lifecycle


class RequestState(StrEnum):
    """A provisioning request's state, as facts, snapshots and the API store it."""

    REQUESTED = "requested"
    IN_FLIGHT = "in flight"
    FULFILLED = "fulfilled"
    PARTIALLY_FULFILLED = "partially fulfilled"
    FAILED = "failed"
    RETURNING = "returning"
    RETURNED = "returned"


class InstanceState(StrEnum):
    """An instance record's state (the controller's record of one machine), as facts,
    snapshots and the API store it."""

    REQUESTED = "requested"
    RUNNING = "running"  # started by its provider, not joined yet
    JOINED = "joined"
    DRAINING = "draining"
    RELEASING = "releasing"
    RELEASED = "released"
    LOST = "lost"


CANCELLED = "cancelled before it joined"  # an instance's expected host was removed

REQUEST_LIFE: Lifecycle[RequestState] = Lifecycle(
    "request",
    RequestState,
    {
        (RequestState.REQUESTED, RequestState.IN_FLIGHT): "accepted by the provider",
        (RequestState.REQUESTED, RequestState.FAILED): "refused by the provider",
        (RequestState.IN_FLIGHT, RequestState.FULFILLED): "every host joined",
        (RequestState.IN_FLIGHT, RequestState.PARTIALLY_FULFILLED):
            "some hosts joined, the others failed",
        (RequestState.IN_FLIGHT, RequestState.FAILED): "no host joined",
        (RequestState.FULFILLED, RequestState.RETURNING): "hosts are being given back",
        (RequestState.PARTIALLY_FULFILLED, RequestState.RETURNING):
            "hosts are being given back",
        (RequestState.RETURNING, RequestState.RETURNED): "every host given back",
    },
    final=(RequestState.FAILED, RequestState.RETURNED),
)

INSTANCE_LIFE: Lifecycle[InstanceState] = Lifecycle(
    "instance of host",
    InstanceState,
    {
        (InstanceState.REQUESTED, InstanceState.RUNNING): "started by the provider",
        (InstanceState.REQUESTED, InstanceState.RELEASED): "the request was refused",
        (InstanceState.RUNNING, InstanceState.JOINED): "joined the cluster",
        (InstanceState.RUNNING, InstanceState.RELEASING): "join deadline passed",
        (InstanceState.RUNNING, InstanceState.RELEASED): CANCELLED,
        (InstanceState.RUNNING, InstanceState.LOST): "vanished from the provider",
        (InstanceState.JOINED, InstanceState.DRAINING): "idle",
        (InstanceState.DRAINING, InstanceState.JOINED): "opened again",
        (InstanceState.JOINED, InstanceState.RELEASING): "decommissioned",
        (InstanceState.DRAINING, InstanceState.RELEASING): "decommissioned",
        (InstanceState.RELEASING, InstanceState.RELEASED): "released by the provider",
        (InstanceState.JOINED, InstanceState.LOST): RECLAIMED,
        (InstanceState.DRAINING, InstanceState.LOST): RECLAIMED,
        (InstanceState.RELEASING, InstanceState.LOST): "vanished from the provider",
        (InstanceState.LOST, InstanceState.RELEASED): "cleared",
    },
    final=(InstanceState.RELEASED, InstanceState.LOST),
    # The cause of an instance change that carries none (every fact and snapshot of
    # release 0.1): released as CANCELLED, it was cancelled; lost as RECLAIMED, its
    # host was reclaimed.
    stored={
        (InstanceState.RELEASED, CANCELLED): Cause.CANCELLED,
        (InstanceState.LOST, RECLAIMED): Cause.RECLAIM,
    },
)
