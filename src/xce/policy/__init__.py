"""The provisioning policy: pure decisions from demand, idle supply and the state of
requests. The simulator and the live provisioner run this same code."""

from xce.policy.actions import (
    Action,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)
from xce.policy.decide import PolicyInput, PolicyMemory, ProvisionedHost, decide

__all__ = [
    "Action",
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
]
