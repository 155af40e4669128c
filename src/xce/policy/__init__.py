"""The provisioning policy: pure decisions from demand, idle supply and the state of
requests, and when they fall due (`next_due`). The simulator and the live provisioner
run this same code."""

from xce.policy.actions import (
    Action,
    CancelHosts,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)
from xce.policy.decide import PolicyInput, PolicyMemory, ProvisionedHost, decide, quiet_memory
from xce.policy.timers import next_due

__all__ = [
    "Action",
    "CancelHosts",
    "DecommissionHost",
    "DrainHost",
    "PolicyInput",
    "PolicyMemory",
    "ProvisionedHost",
    "RequestHosts",
    "RequestTokens",
    "ReturnTokens",
    "SetAllowance",
    "decide",
    "next_due",
    "quiet_memory",
]
