"""The lifecycle of a `script` provider's machine (provisioner/providers/script.py),
as its state file `WORK/<provider>/state.json` stores it: one transition table, a
reason for every edge (the plugin's scripts are those of docs/providers/script.md).

    requesting -> executing <-> running -> returning -> returned | return_failed
    executing -> released (not reported yet) -> returning | returned | failed
    executing | running -> failed | reclaimed
"""

from __future__ import annotations

from enum import StrEnum

from xce.model.lifecycle.table import Lifecycle


class MachineState(StrEnum):
    """What XCE knows of one machine (one expected host)."""

    REQUESTING = "requesting"  # recorded, requestMachines not answered yet (a crash: gone)
    EXECUTING = "executing"  # the plugin is making it (result executing, or not reported)
    RUNNING = "running"  # result succeed
    FAILED = "failed"  # result fail, or its request ended without a machine for it
    RELEASED = "released"  # released before the plugin reported it: returned when it is
    RETURNING = "returning"  # requestReturnMachines asked for it
    RETURNED = "returned"
    RETURN_FAILED = "return_failed"
    RECLAIMED = "reclaimed"  # the provider took it back (getReturnRequests, gracePeriod)


_RETURN = "requestReturnMachines asked for it"
_TAKEN = "taken back by the provider (getReturnRequests: its gracePeriod passed)"
MACHINE_LIFE: Lifecycle[MachineState] = Lifecycle(
    "machine of host",
    MachineState,
    {
        (MachineState.REQUESTING, MachineState.EXECUTING): "requestMachines answered",
        (MachineState.EXECUTING, MachineState.RUNNING): "getRequestStatus: succeed",
        (MachineState.RUNNING, MachineState.EXECUTING): "getRequestStatus: executing",
        (MachineState.EXECUTING, MachineState.FAILED):
            "getRequestStatus: fail, or its request ended without a machine for it",
        (MachineState.RUNNING, MachineState.FAILED): "getRequestStatus: fail",
        (MachineState.EXECUTING, MachineState.RELEASED):
            "released before the plugin reported its machine",
        (MachineState.RELEASED, MachineState.FAILED): "getRequestStatus: fail",
        (MachineState.RELEASED, MachineState.RETURNING): f"reported at last: {_RETURN}",
        (MachineState.RELEASED, MachineState.RETURNED):
            "its request ended without a machine for it",
        (MachineState.EXECUTING, MachineState.RETURNING): f"released: {_RETURN}",
        (MachineState.RUNNING, MachineState.RETURNING): f"released: {_RETURN}",
        (MachineState.RETURNING, MachineState.RETURNED): "the plugin returned it",
        (MachineState.RETURNING, MachineState.RETURN_FAILED):
            "the plugin could not return it",
        (MachineState.EXECUTING, MachineState.RECLAIMED): _TAKEN,
        (MachineState.RUNNING, MachineState.RECLAIMED): _TAKEN,
    },
    final=(MachineState.FAILED, MachineState.RETURNED, MachineState.RETURN_FAILED,
           MachineState.RECLAIMED),
)
