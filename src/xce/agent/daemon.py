"""The agent's loop: register with the controller, then heartbeat (docs/agent.md).

Each heartbeat says which jobs run and which ended (again until acknowledged), and
EC2's spot interruption notice once the agent has read it (`--spot-metadata`); the
reply says which to start, which to kill, which reports to forget, and whose output a
user waits for (`xce peek`: sent in a heartbeat at once). The controller
being down changes nothing for the jobs: the agent retries with backoff and kills a job
on its own only at its run limit (from the launch). Stopping the agent (SIGTERM) leaves
its jobs running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import time
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

import aiohttp
import msgspec

from xce.agent.jobs import JobStore
from xce.agent.spot import MetadataError, SpotWatch
from xce.agent.suspend import hold_stopped
from xce.model.api import (
    PEEK_BYTES,
    ApiError,
    Heartbeat,
    HeartbeatReply,
    JobOutput,
    Registered,
    RegisterRequest,
)
from xce.model.controllers import ControllerAddresses

log = logging.getLogger(__name__)

T = TypeVar("T")
# The controller answers a heartbeat with these when it does not know the agent (any
# more, e.g. after its own restart): register again.
REREGISTER = (404, 409)
MIN_INTERVAL = 0.01  # never a busy loop, whatever the controller says
METADATA_TIMEOUT = 2.0  # s per request to the instance metadata service (it is local)
# Characters of job output one heartbeat carries at most (beyond its first job's): the
# controller takes heartbeats of up to 4 MiB, and JSON may escape a character in six.
OUTPUT_BUDGET = 2 * PEEK_BYTES


@dataclass(frozen=True)
class AgentSettings:
    """How the agent reaches the controller and what it registers."""

    controller: str  # base URL, e.g. http://ctl:6820 (several, comma-separated: docs/ha.md)
    name: str
    token: str
    host: RegisterRequest
    retry_min: float = 1.0  # backoff while the controller cannot be reached
    retry_max: float = 30.0
    request_timeout: float = 10.0
    kill_check: float = 0.5  # how often run limits and kill graces are checked
    # The instance metadata service to read EC2's spot interruption notice from
    # (http://169.254.169.254 on EC2; "": none is read) and how often to ask.
    spot_metadata: str = ""
    spot_poll: float = 5.0


class ControllerError(Exception):
    """A request that failed: no answer, an error answer (`status`), or a bad reply."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Controller:
    """The controller's agent endpoints."""

    def __init__(self, http: aiohttp.ClientSession, settings: AgentSettings) -> None:
        self.http = http
        self.controllers = ControllerAddresses(settings.controller)
        self.path = f"/agents/{quote(settings.name, safe='')}"

    async def register(self, request: RegisterRequest) -> Registered:
        return await self._post("register", request, Registered)

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReply:
        return await self._post("heartbeat", beat, HeartbeatReply)

    async def _post(self, action: str, body: object, reply: type[T]) -> T:
        """One call to the leader: a standby's answer is followed (once) to the leader
        it names; a controller that does not answer makes the next one current."""
        controllers = self.controllers
        for _ in range(2):
            url = f"{controllers.current}{self.path}/{action}"
            try:
                async with self.http.post(url, data=msgspec.json.encode(body)) as response:
                    payload = await response.read()
            except (aiohttp.ClientError, TimeoutError) as err:
                controllers.unreachable()
                raise ControllerError(f"{url}: {str(err) or type(err).__name__}") from err
            if not controllers.redirected(response.status, payload):
                break
        if controllers.standby(response.status, payload):
            controllers.unreachable()  # (no leader yet: another may know)
        if response.status >= 400:
            raise ControllerError(
                f"{url}: HTTP {response.status}: {error_message(payload)}", response.status
            )
        try:
            return msgspec.json.decode(payload, type=reply)
        except msgspec.DecodeError as err:
            raise ControllerError(f"{url}: unexpected reply: {err}") from err


def error_message(payload: bytes) -> str:
    """The `error` of an ApiError body, else the start of the body."""
    try:
        return msgspec.json.decode(payload, type=ApiError).error
    except msgspec.DecodeError:
        return payload[:200].decode(errors="replace") or "(no body)"


class Backoff:
    """Exponential delays between retries, from `low` to `high`, with jitter so that
    the agents of a cluster do not all come back at the same moment."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high
        self.next_delay = low

    def reset(self) -> None:
        self.next_delay = self.low

    def delay(self) -> float:
        delay = self.next_delay
        self.next_delay = min(self.high, delay * 2)
        return delay * random.uniform(0.5, 1.0)


class Agent:
    """One host's agent: the job store driven by the controller."""

    def __init__(self, settings: AgentSettings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        self.reclaim_at: float | None = None  # EC2's notice: it takes the host back then
        self._outputs: list[JobOutput] = []  # asked for by the controller, not yet sent
        self._wake = asyncio.Event()  # send the next heartbeat now, not at its interval

    async def run(self, stop: asyncio.Event) -> None:
        """Serve the controller until `stop` is set (jobs keep running) or the loop
        fails (the error is raised)."""
        headers = {
            "Authorization": f"Bearer {self.settings.token}",
            "Content-Type": "application/json",
        }
        timeout = aiohttp.ClientTimeout(total=self.settings.request_timeout)
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as http:
            stopped = asyncio.create_task(stop.wait())
            tasks = {
                asyncio.create_task(self._serve(Controller(http, self.settings))),
                asyncio.create_task(self._enforce_kills()),
                stopped,
            }
            if self.settings.spot_metadata:
                tasks.add(asyncio.create_task(self._watch_spot()))
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            for task in done - {stopped}:
                task.result()  # the loops never end but by an error: raise it
        log.info("agent %s stopped; its jobs keep running", self.settings.name)

    async def _serve(self, controller: Controller) -> None:
        backoff = Backoff(self.settings.retry_min, self.settings.retry_max)
        registered = False
        interval = self.settings.retry_max  # the heartbeat interval, once registered
        while True:
            try:
                if registered:
                    wait = await self._heartbeat(controller)
                else:
                    wait = await self._register(controller)
                    registered = True
                backoff.reset()
                interval = wait
            except ControllerError as err:
                if registered and err.status in REREGISTER:
                    log.warning("%s: registering again", err)
                    registered, wait = False, 0.0
                else:
                    # Never slower than the heartbeats: a controller back from a restart
                    # hears from every agent within its grace period.
                    wait = min(backoff.delay(), interval)
                    log.warning("%s; retrying in %.1f s", err, wait)
            await self._pause(wait)

    async def _pause(self, seconds: float) -> None:
        """Wait for the next request to the controller: `seconds`, or less when there
        is news that cannot wait (a spot notice)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def _register(self, controller: Controller) -> float:
        """Register, naming the jobs that still run here (after an agent restart): the
        controller keeps them, or lists those it no longer runs here to be killed."""
        running = self.store.running()
        reply = await controller.register(
            msgspec.structs.replace(self.settings.host, running=running)
        )
        log.info(
            "registered with %s as %s (%d running job(s))",
            self.settings.controller,
            self.settings.name,
            len(running),
        )
        for job in reply.kill:
            self.store.kill(job)
        return max(reply.heartbeat_interval, MIN_INTERVAL)

    async def _heartbeat(self, controller: Controller) -> float:
        # Running first: a job that ends in between is then in both lists, never in none.
        running = self.store.running()
        beat = Heartbeat(running=running, finished=self.store.finished(),
                         reclaim_at=self.reclaim_at, output=self._outputs)
        reply = await controller.heartbeat(beat)
        self._outputs = []
        # Acks first: a job requeued with the same id may be started again in this reply.
        self.store.ack(reply.ack)
        # Kills before starts: a start may need the GPUs of a job killed in this reply
        # (it waits for them to be freed: JobStore.start).
        for job in reply.kill:
            self.store.kill(job)
        # Stopped while listed (xce stop, a suspended preemption victim), continued once
        # not (an older controller lists none); stops before starts: a preemptor starts
        # in the slot of a victim stopped in this reply.
        hold_stopped(self.store, set(reply.suspended))
        for launch in reply.start:
            self.store.start(launch)
        for job, limit in reply.limits.items():  # (xce modify -W on a running job)
            self.store.set_limit(job, limit)
        if reply.peek:  # someone waits for it (`xce peek`): sent at once
            self._outputs = self._read_outputs(reply.peek)
            self._wake.set()
        return max(reply.heartbeat_interval, MIN_INTERVAL)

    def _read_outputs(self, jobs: list[int]) -> list[JobOutput]:
        """The outputs of the first of `jobs` that fit one heartbeat (OUTPUT_BUDGET
        bytes of text, at least one job): the controller asks for the others again."""
        outputs: list[JobOutput] = []
        budget = OUTPUT_BUDGET
        for job in jobs:
            output = self.store.output(job, self.settings.name)
            size = sum(len(part.text) for part in (output.stdout, output.stderr) if part)
            if outputs and size > budget:
                break
            outputs.append(output)
            budget -= size
        return outputs

    async def _watch_spot(self) -> None:
        """Ask the metadata service for EC2's interruption notice until there is one;
        then heartbeat at once (every heartbeat carries it from then on: the controller
        closes the host and requeues its jobs). Never ends by itself."""
        watch = SpotWatch(self.settings.spot_metadata)
        failing = False
        timeout = aiohttp.ClientTimeout(total=METADATA_TIMEOUT)
        # A session of its own: the agent's token is for the controller only.
        async with aiohttp.ClientSession(timeout=timeout) as http:
            while True:
                try:
                    when = await watch.reclaim_at(http)
                except MetadataError as err:
                    if not failing:  # once, not every few seconds
                        log.warning("spot notice: %s; asking again every %g s", err,
                                    self.settings.spot_poll)
                    failing = True
                else:
                    if failing:
                        log.info("spot notice: the metadata service answers again")
                    failing = False
                    if when is not None:
                        break
                await asyncio.sleep(self.settings.spot_poll)
        log.warning("spot interruption notice: EC2 takes this host back at %s; telling "
                    "the controller", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)))
        self.reclaim_at = when
        self._wake.set()
        await asyncio.Event().wait()  # the notice stands until the machine goes

    async def _enforce_kills(self) -> None:
        while True:
            self.store.enforce_limits()
            self.store.escalate()
            await asyncio.sleep(self.settings.kill_check)


async def run_agent(settings: AgentSettings, store: JobStore) -> None:
    """The agent until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("agent %s: state in %s", settings.name, store.root.parent)
    await Agent(settings, store).run(stop)
