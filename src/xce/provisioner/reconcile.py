"""Reconciliation: every round, the controller's records of a provider's requests
and instances are matched with what the provider has (provisioner/daemon.py runs it
for each leased provider before the policy)."""

from __future__ import annotations

import asyncio
import time as wallclock
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from xce.model.causes import Cause
from xce.model.lifecycle import INSTANCE_LIFE, InstanceState
from xce.provisioner.client import ControllerClient
from xce.provisioner.provider import Instance, Provider

Note = Callable[[str, str, str, str], None]  # (action, detail, reason, outcome)
IN_SERVICE = (InstanceState.JOINED, InstanceState.DRAINING)  # records of joined hosts


class Reconciler:
    """The provisioner's knowledge of its providers' instances between rounds."""

    def __init__(
        self,
        client: ControllerClient,
        providers: Mapping[str, Provider],
        clock: Callable[[], float],
        orphan_grace: float,
        note: Note,
    ) -> None:
        self._call = client.call
        self.providers = providers
        self.clock = clock
        self.orphan_grace = orphan_grace  # s before an unknown instance is released
        self._note = note
        self.watch: dict[str, str] = {}  # host -> template: instances on their way
        self.noticed: set[str] = set()  # hosts closed on a reclaim notice
        # provider -> its open requests as the controller answered this round (JSON)
        self.open: dict[str, list[dict[str, Any]]] = {}

    async def reconcile(self, provider: str) -> tuple[list[str], list[str]]:
        """Match the controller's records of a provider with its inventory, every round
        (so also at start and at takeover, when the previous owner may have died
        mid-request); the templates whose hosts joined, and those whose requests failed,
        since the last round (for the policy).

        * an instance of the provider that no open record knows is released once it is
          older than the orphan grace (nothing leaks);
        * a request still `requested` (its owner stopped before the provider answered):
          instances the provider has are accepted, the others cancelled;
        * a record whose instance vanished is lost: its expected host fails (a failed
          request), or its joined host is lost as reclaimed (its jobs requeued);
        * a `releasing` record (decommissioned, or past its join deadline) has its
          instance released and its host removed.
        """
        source = self.providers[provider]
        inventory = await asyncio.to_thread(source.instances)
        answer = await self._call("GET", f"/requests?provider={quote(provider)}")
        self.open[provider] = answer["requests"]
        records = [i for r in answer["requests"] for i in r["instances"]]
        live = {i.host: i for i in inventory if i.state == "running"}
        known = {i["host"] for i in records if i["state"] not in INSTANCE_LIFE.final}
        now = self.clock()
        for instance in inventory:
            if (instance.state == "running" and instance.host not in known
                    and now - instance.started >= self.orphan_grace):
                await asyncio.to_thread(source.release, [instance.id])
                self._note("Reconcile", instance.host or instance.id,
                           "an instance no record knows", "released")
        joined: list[str] = []
        failed: list[str] = []
        for request in answer["requests"]:
            await self._adopt(provider, request, live)
        for record in records:
            host, state, template = record["host"], record["state"], record["template"]
            if state == InstanceState.REQUESTED:  # settled by _adopt above
                continue
            was_running = self.watch.pop(host, None) is not None
            if state == InstanceState.RUNNING and host not in live:
                await self._call("POST", f"/instances/{quote(host)}/vanished",
                                 {"reason": "its instance is gone from the provider"},
                                 provider=provider)
                self._note("Reconcile", host, "its instance is gone before it joined", "lost")
                failed.append(template)
            elif state == InstanceState.RUNNING:
                self.watch[host] = template
            elif state in IN_SERVICE and host not in live:
                # lost as reclaimed (its jobs requeued), then gone from the cluster
                await self._call("POST", f"/instances/{quote(host)}/vanished",
                                 {"reason": "its instance is gone from the provider"},
                                 provider=provider)
                await self._call("POST", f"/hosts/{quote(host)}/decommission",
                                 provider=provider)
                await self._call("POST", f"/hosts/{quote(host)}/remove", provider=provider)
                self._note("Reconcile", host, "its instance is gone", "lost, removed")
            elif state in IN_SERVICE and was_running:
                joined.append(template)
            notice = live[host].reclaim_at if host in live else None
            if state == InstanceState.JOINED and notice is not None and host not in self.noticed:
                # taken back soon, the provider says: no new work (closed_Recl); its
                # jobs run on until the instance is gone, then are requeued
                await self._call("POST", f"/hosts/{quote(host)}/close?reason={Cause.RECLAIM}",
                                 provider=provider)
                self.noticed.add(host)
                when = wallclock.strftime("%H:%M:%S", wallclock.localtime(notice))
                self._note("Reconcile", host, f"the provider takes it back at {when}",
                           "closed")
            if state == InstanceState.RELEASING:
                if was_running:  # it was on its way: its join deadline passed
                    failed.append(template)
                if host in live:
                    await asyncio.to_thread(source.release, [live[host].id])
                await self._call("POST", f"/hosts/{quote(host)}/remove", provider=provider)
                self._note("Release", host, record["reason"], "released")
        return joined, failed

    async def _adopt(self, provider: str, request: dict[str, Any],
                     live: Mapping[str, Instance]) -> None:
        """Instances still `requested` at the start of a round belong to a request its
        owner did not see through (it died between recording and the provider's
        answer): those the provider started are accepted, the rest cancelled."""
        waiting = [i["host"] for i in request["instances"]
                   if i["state"] == InstanceState.REQUESTED]
        if not waiting:
            return
        rid = request["request"]
        started = {host: live[host].id for host in waiting if host in live}
        if started:
            await self._call("POST", f"/requests/{quote(rid)}/accepted",
                             {"instances": started}, provider=provider)
            self.watch.update({host: request["template"] for host in started})
        for host in waiting:
            if host not in started:
                await self._call("POST", f"/hosts/{quote(host)}/remove", provider=provider)
        self._note("Reconcile", rid, "a request its owner did not see through",
                   f"{len(started)} instance(s) adopted, "
                   f"{len(waiting) - len(started)} cancelled")
