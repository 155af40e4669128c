"""The same demand, idle supply and host states give the same policy decisions in the
simulator and live: every round a simulated run made is replayed through the live
provisioner's path (the controller's JSON for /demand, /idle and /hosts, converted by
`xce.provisioner.round.policy_input`) and `decide` must return the same actions."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from xce.config.loader import load_config_text
from xce.model.result import demand_json, idle_json
from xce.policy import PolicyInput, PolicyMemory, decide
from xce.provisioner.round import policy_input
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

CLUSTER = """\
cluster: twin
session_interval: 10
hosts:
  - {name: s1, slots: 4}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 300
  templates:
    - {name: small, provider: cloud, slots: 4, max: 6, rank: 1}
    - {name: big, provider: cloud, slots: 16, max: 2, rank: 2}
policy:
  persistence: 30
  max_requests_per_round: 3
  max_lifetime: 7200
simulation:
  seed: 3
  providers:
    cloud: {lead_time: {mean: 90}}
"""
JOBS = """\
jobs:
  - {ids: "1-20", submit: 0, run: 600, n: 2}
  - {ids: "21-24", submit: 100, run: 1200, n: 8}
  - {ids: "25-40", submit: 3000, run: 300, n: 4}
"""


def controller_hosts(inp: PolicyInput) -> list[dict[str, Any]]:
    """/hosts as the controller would publish it for this round: the hosts the round
    may act on, the other present hosts (busy, so no candidates), expected hosts."""
    shown = [{"name": h.name, "template": h.template, "state": h.state, "joined": h.joined,
              "jobs": list(range(h.running))} for h in inp.hosts]
    for template, alive in inp.alive.items():
        listed = sum(1 for h in inp.hosts if h.template == template)
        shown += [{"name": f"{template}-busy{i}", "template": template, "state": "ok",
                   "joined": inp.now, "jobs": [0]} for i in range(alive - listed)]
    for template, count in inp.in_flight.items():
        shown += [{"name": f"{template}-exp{i}", "template": template, "state": "expected"}
                  for i in range(count)]
    return shown


def test_sim_rounds_replayed_through_the_live_path(tmp_path: Path) -> None:
    rounds: list[tuple[PolicyInput, PolicyMemory, list[Any]]] = []
    real = decide

    def recording(inp: PolicyInput, memory: PolicyMemory, *args: Any) -> Any:
        actions, after = real(inp, memory, *args)
        rounds.append((inp, memory, actions))
        return actions, after

    config = load_config_text(textwrap.dedent(CLUSTER), "cluster.yaml")
    (tmp_path / "jobs.yaml").write_text(JOBS)
    sim = Simulator(config, load_workload(tmp_path / "jobs.yaml"))
    sim.decide = recording
    sim.run()
    acted = [r for r in rounds if r[2]]
    assert len(acted) >= 5, "the run should request, drain and decommission hosts"
    kinds = {type(a).__name__ for _, _, actions in acted for a in actions}
    assert {"RequestHosts", "DrainHost", "DecommissionHost"} <= kinds, kinds
    templates = {t.name for t in config.catalog.templates}
    for inp, memory, actions in rounds:
        live = policy_input(inp.now, demand_json(inp.demand), idle_json(inp.idle),
                            controller_hosts(inp), templates, list(inp.failures),
                            list(inp.joined))
        again, _ = decide(live, memory, config.policy, config.catalog)
        assert again == actions, (inp.now, actions, again)
