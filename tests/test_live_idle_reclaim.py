"""An idle provisioned host is drained and decommissioned in one policy round, live
(docs/policy.md, "Reclaim"): a real controller, a real agent on the provisioned host
and a real `Provisioner` run round by round in process, with a provider the test
drives (tests/hand_provider.py).

The race the one-round reclaim opens: the round reads the idle report, then closes the
host; a job may start there in between. The controller then refuses the decommission
(409), the round's decision says the host is kept until its jobs end, the job runs to
its end there, and a later round gives the host back. Only that refusal keeps a host:
the controller's other 409s (a host the drain failed to close, a lease lost) are the
round's failures.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hand_provider import HAND, QUIET, HandProvider, hand_token, requested_by_hand, rounds
from live import live_cluster, skip_unless_linux, wait_for

from xce.config import load_config_text
from xce.model.causes import Cause
from xce.policy.actions import DecommissionHost, DrainHost
from xce.provisioner.client import ControllerRefused
from xce.provisioner.daemon import Provisioner

pytestmark = skip_unless_linux


def test_a_job_started_before_the_close_keeps_the_host_until_it_ends(tmp_path: Path) -> None:
    with live_cluster(tmp_path, HAND, agents=()) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=QUIET)
        first, hand, prov = requested_by_hand(cluster, ["sleep", "0.2"], 2)
        [host] = hand.grants
        hand_token(cluster, hand.grants[host])
        cluster.start_agent(host, slots=2)  # a real agent, with the host's join token
        assert cluster.wait_state(first, "DONE", timeout=20)["exec_hosts"] == {host: 2}
        wait_for(lambda: [h["host"] for h in cluster.ok("GET", "/idle")["idle"]["hosts"]]
                 == [host], 10, f"{host} to be reported idle")

        # Between the round's read of the idle report and its close, a job starts there.
        late: list[int] = []
        forward = prov._call

        async def interposed(method: str, path: str, body: Any = None,
                             provider: str | None = None) -> Any:
            if path.startswith(f"/hosts/{host}/close"):
                job = await asyncio.to_thread(cluster.submit, ["sleep", "3"],
                                              res="select[burst]")
                await asyncio.to_thread(cluster.wait_state, job, "RUN")
                late.append(job)
            return await forward(method, path, body, provider)

        prov._call = interposed
        actions = rounds(prov)
        prov._call = forward
        drain, decommission = actions  # (the idle time in the drain's reason varies)
        assert isinstance(drain, DrainHost) and drain.host == host and drain.cause is Cause.IDLE
        assert decommission == DecommissionHost(host, "drained and empty")
        [job] = late
        outcomes = {d.action: d.outcome for d in list(prov.decisions)[-2:]}
        assert outcomes == {
            "DrainHost": "closed",
            "DecommissionHost": f"kept until its jobs end: HTTP 409: host {host} still runs "
                                f"job(s) {job}: drain it first",
        }, outcomes
        assert cluster.host(host)["state"] == "closed" and hand.released == []

        # The job runs to its end there; then a round gives the host back.
        done = cluster.wait_state(job, "DONE", timeout=20)
        assert done["exec_hosts"] == {host: 1}

        def given_back() -> bool:
            rounds(prov)
            return host not in cluster.hosts()

        wait_for(given_back, 20, f"{host} to be given back", interval=0.3)
        assert hand.released == [f"hand-{host}"] and hand.made == {}
        decision = prov.decisions[-1]
        assert (decision.action, decision.outcome) == ("DecommissionHost", "released")


def test_only_the_refusal_for_running_jobs_keeps_the_host() -> None:
    """Other 409s of a decommission (a host the round's drain failed to close, a lease
    lost) are the round's failures, not a host kept for its jobs (a controller played
    by the test: what it answers is the point)."""
    prov = Provisioner("http://127.0.0.1:9", "x", "prov-a", load_config_text(HAND),
                       {"hand": HandProvider()})
    hosts = [{"name": "burst-1", "template": "burst", "state": "closed"}]
    answers = {
        "burst-1": "host burst-1 still runs job(s) 4, 7: drain it first",
        "burst-2": "host burst-2 is unreach: it cannot become decommissioned",
        "burst-3": "the lease on provider hand has expired",
    }

    async def controller(method: str, path: str, body: Any = None,
                         provider: str | None = None) -> Any:
        raise ControllerRefused(409, answers[path.split("/")[2]])

    prov._call = controller
    outcome = {name: asyncio.run(prov._act(DecommissionHost(name, "drained and empty"),
                                           [{**hosts[0], "name": name}]))
               for name in answers}
    assert outcome == {
        "burst-1": "kept until its jobs end: HTTP 409: host burst-1 still runs job(s) 4, 7: "
                   "drain it first",
        "burst-2": "failed: HTTP 409: host burst-2 is unreach: it cannot become decommissioned",
        "burst-3": "failed: HTTP 409: the lease on provider hand has expired",
    }
