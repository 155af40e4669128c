"""One live policy round's input, built from what the controller publishes: the same
`xce.policy.decide` the simulator runs, fed from `GET /demand`, `GET /idle` and
`GET /hosts` instead of the simulator's state."""

from __future__ import annotations

from typing import Any

from xce.model.lifecycle import HostState
from xce.model.result import demand_from_json, idle_from_json
from xce.policy import PolicyInput, ProvisionedHost


def policy_input(
    now: float,
    demand: dict[str, Any] | None,
    idle: dict[str, Any] | None,
    hosts: list[dict[str, Any]],
    templates: set[str],
    failures: list[str],
    joined: list[str],
) -> PolicyInput:
    """What a round knows, for the templates this provisioner serves."""
    provisioned = [h for h in hosts if h.get("template") in templates]
    present = [h for h in provisioned
               if h["state"] not in (HostState.EXPECTED, HostState.FAILED)]
    alive: dict[str, int] = {}
    in_flight: dict[str, int] = {}
    for host in provisioned:
        if host["state"] == HostState.EXPECTED:
            in_flight[host["template"]] = in_flight.get(host["template"], 0) + 1
        elif host["state"] != HostState.FAILED:
            alive[host["template"]] = alive.get(host["template"], 0) + 1
    return PolicyInput(
        now=now,
        demand=demand_from_json(demand),
        idle=idle_from_json(idle),
        hosts=[
            ProvisionedHost(h["name"], h["template"], h["state"], h.get("joined") or now,
                            len(h.get("jobs", [])))
            for h in present
        ],
        in_flight=in_flight,
        alive=alive,
        failures=failures,
        joined=joined,
    )
