"""One lifecycle model (docs/layers.md, "Lifecycles"): the states of hosts, provider
requests, instances, leases, borrowed tokens and a script provider's machines as
`StrEnum`s whose values are the strings facts, snapshots and the API store; one
transition table each (`Lifecycle`: a reason per edge, `reason_for`, `TransitionError`
naming the allowed targets). The controller, the simulator and the providers change
states through them; what they do follows from a change's cause (`xce.model.causes`),
never from its reason's words.
"""

from __future__ import annotations

from typing import Any

from xce.model.lifecycle.hosts import (
    CLOSE_REASONS,
    HOST_LIFE,
    RECLAIMED,
    HostState,
    host_change,
    status_label,
)
from xce.model.lifecycle.leases import LEASE_LIFE, LeaseState, lease_state
from xce.model.lifecycle.machines import MACHINE_LIFE, MachineState
from xce.model.lifecycle.provisioning import (
    CANCELLED,
    INSTANCE_LIFE,
    REQUEST_LIFE,
    InstanceState,
    RequestState,
)
from xce.model.lifecycle.table import Lifecycle, TransitionError
from xce.model.lifecycle.tokens import TOKEN_LIFE, TOKEN_STEPS, TokenState, TokenStep

# Every lifecycle, by what it is of.
LIFECYCLES: dict[str, Lifecycle[Any]] = {
    "host": HOST_LIFE,
    "request": REQUEST_LIFE,
    "instance": INSTANCE_LIFE,
    "lease": LEASE_LIFE,
    "tokens": TOKEN_LIFE,
    "machine": MACHINE_LIFE,
}

__all__ = [
    "CANCELLED",
    "CLOSE_REASONS",
    "HOST_LIFE",
    "INSTANCE_LIFE",
    "LEASE_LIFE",
    "LIFECYCLES",
    "MACHINE_LIFE",
    "RECLAIMED",
    "REQUEST_LIFE",
    "TOKEN_LIFE",
    "TOKEN_STEPS",
    "HostState",
    "InstanceState",
    "LeaseState",
    "Lifecycle",
    "MachineState",
    "RequestState",
    "TokenState",
    "TokenStep",
    "TransitionError",
    "host_change",
    "lease_state",
    "status_label",
]
