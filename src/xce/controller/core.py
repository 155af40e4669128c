"""The controller: the single source of truth for jobs and hosts, the object the HTTP
app holds.

It is the fact kernel (kernel.py: every change a fact, applied in memory and made
durable; recovery; snapshots) with one desk per concern beside it: scheduling sessions
(sessions.py), jobs (jobs.py), hosts and their agents (hosts.py), provider leases and
fencing (fencing.py), provisioning requests (requests.py). Its methods are the
operations the API, the background rounds, the CLI and the tests drive; what a desk
only reports (the last session's result, pend reasons and reservations, a job's run
limit, a lease check) is read from the desk itself.
"""

from __future__ import annotations

import time as wallclock
from collections.abc import Sequence

import msgspec

from xce.controller.auth import Identity
from xce.controller.fencing import Fencing
from xce.controller.hosts import HostDesk, in_flight_drift
from xce.controller.job_changes import JobChanges
from xce.controller.job_control import JobControl
from xce.controller.jobs import JobDesk
from xce.controller.kernel import Clock, FactKernel, Settings
from xce.controller.leases import Lease
from xce.controller.peek import PeekDesk
from xce.controller.records import InstanceRecord, RequestRecord
from xce.controller.requests import RequestDesk
from xce.controller.sessions import SessionRunner
from xce.controller.store import Store
from xce.controller.view import ExpectedHost, JobRecord
from xce.model.api import (
    Heartbeat,
    HeartbeatReply,
    JobOutput,
    Registered,
    RegisterRequest,
    SubmitRequest,
)
from xce.model.cluster import ClusterConfig
from xce.model.events import ConfigLoaded, HostStateChanged
from xce.model.recording import Recorder
from xce.model.result import SessionResult

__all__ = ["Controller", "Settings"]


class Controller(FactKernel):
    """The fact kernel, its desks, and the operations they serve."""

    def __init__(
        self,
        config: ClusterConfig,
        store: Store,
        settings: Settings | None = None,
        clock: Clock = wallclock.time,
        recorder: Recorder | None = None,
    ) -> None:
        super().__init__(config, store, settings or Settings(), clock, recorder)
        self.fencing = Fencing(self)
        self.jobs = JobDesk(self)
        self.changes = JobChanges(self, self.jobs)  # xce modify, top, bottom, switch
        self.hosts = HostDesk(self, self.fencing, self.jobs)
        self.requests = RequestDesk(self, self.hosts, self.fencing)
        self.sessions = SessionRunner(self, self.hosts)
        self.peeks = PeekDesk(self, self.jobs)
        self.control = JobControl(self, self.jobs, self.hosts, self.suspends)

    async def start(self) -> None:
        """Recover from the log, then `begin`."""
        await self.begin(self.open())

    async def begin(self, last: int) -> None:
        """With the journal open after fact `last`: log the configuration if it is new
        or changed, and the in-flight hosts' request times if the scheduler state lacks
        them."""
        now = self.up_since
        self.hosts.restarted(now)
        if last == 0:
            static = [HostStateChanged(h.name, "unavail", now) for h in self.config.hosts]
            await self.commit(now, [ConfigLoaded(self.config), *static])
        elif self.state.config != self.config:
            added = [
                HostStateChanged(h.name, "unavail", now)
                for h in self.config.hosts
                if h.name not in self.view.hosts
            ]
            await self.commit(now, [ConfigLoaded(self.config), *added])
        drift = in_flight_drift(self.state, self.view, now)
        if drift:
            await self.commit(now, drift)

    # ------------------------------------------------------------------ sessions
    async def run_session(self) -> SessionResult | None:
        return await self.sessions.run()

    def session_delay(self) -> float:
        return self.sessions.delay()

    # ------------------------------------------------------------------ jobs
    async def submit(self, who: Identity, request: SubmitRequest) -> tuple[int, str]:
        return await self.jobs.submit(who, request)

    def job(self, job_id: int) -> JobRecord:
        return self.jobs.job(job_id)

    async def kill(self, who: Identity, job_id: int) -> JobRecord:
        return await self.jobs.kill(who, job_id)

    async def hold(self, who: Identity, job_id: int, held: bool) -> JobRecord:
        return await self.jobs.hold(who, job_id, held)

    async def watch_limits(self) -> None:
        await self.jobs.watch_limits()

    # ------------------------------------------------------------------ hosts and agents
    async def set_host_open(self, who: Identity, name: str, open_: bool,
                            reason: str = "") -> None:
        await self.hosts.set_host_open(who, name, open_, reason)

    async def decommission(self, who: Identity, name: str) -> None:
        await self.hosts.decommission(who, name)

    async def reclaimed(self, who: Identity, name: str) -> None:
        await self.hosts.reclaimed(who, name)

    async def remove(self, who: Identity, name: str) -> None:
        await self.hosts.remove(who, name)

    async def watch_hosts(self) -> None:
        await self.hosts.watch_hosts()

    def join_identity(self, token: str) -> Identity | None:
        return self.hosts.join_identity(token)

    async def register(self, name: str, request: RegisterRequest) -> Registered:
        return await self.hosts.register(name, request)

    async def heartbeat(self, name: str, beat: Heartbeat) -> HeartbeatReply:
        """The host's heartbeat; the reply also asks for the output of its jobs that
        someone waits to peek at (after taking the outputs it sent), and names its
        jobs that must be stopped (`xce stop`)."""
        reply = await self.hosts.heartbeat(name, beat)
        self.peeks.answered(name, beat.output)
        wanted = self.peeks.wanted(name)
        host = self.view.hosts.get(name)
        stopped = self.suspends.on_host(host.jobs) if host is not None else []
        if wanted or stopped:
            reply = msgspec.structs.replace(reply, peek=wanted, suspended=stopped)
        if self.view.relimited:  # (run limits changed since launch: xce modify -W)
            reply = msgspec.structs.replace(reply, limits=self.changes.limits(name))
        return reply

    async def peek(self, who: Identity, job_id: int) -> JobOutput:
        return await self.peeks.peek(who, job_id)

    # ------------------------------------------------------------------ leases
    async def lease(self, who: Identity, provider: str, ttl: float) -> Lease:
        return await self.fencing.lease(who, provider, ttl)

    async def release_lease(self, who: Identity, provider: str, token: int) -> None:
        await self.fencing.release(who, provider, token)

    # ------------------------------------------------------------------ provisioning requests
    async def request_hosts(self, who: Identity, template: str, provider: str,
                            request: str, count: int, deadline_in: float,
                            jobs: Sequence[int] = ()) -> list[tuple[ExpectedHost, str]]:
        return await self.requests.request_hosts(who, template, provider, request, count,
                                                 deadline_in, jobs)

    async def accept_request(self, who: Identity, request: str,
                             instances: dict[str, str]) -> RequestRecord:
        return await self.requests.accept_request(who, request, instances)

    async def refuse_request(self, who: Identity, request: str, reason: str) -> RequestRecord:
        return await self.requests.refuse_request(who, request, reason)

    async def vanished(self, who: Identity, host: str, reason: str) -> InstanceRecord:
        return await self.requests.vanished(who, host, reason)
