"""The controller's HTTP API from the command line: a small synchronous client, where
the controller is and who the caller is (the click options that say so: cli/connection.py).

Where: `--controller URL`, else `$XCE_CONTROLLER`, else `http://127.0.0.1:6820`; several
URLs, comma-separated, name a leader and its standbys (docs/ha.md): the client calls the
leader (a standby's answer names it) and tries the next when one does not answer.
Who: `--token-file FILE`, else `$XCE_TOKEN`, else `$XCE_TOKEN_FILE`, else `~/.xce/token`.
"""

from __future__ import annotations

import functools
import http.client
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

import click
import msgspec

from xce import __version__
from xce.cli.connection import (
    DEFAULT_CONTROLLER,
    DEFAULT_TOKEN_FILE,
    connection_options,
    remembered_connection,
)
from xce.model.api import (
    FENCING_HEADER,
    AcctSummary,
    ApiError,
    CatalogInfo,
    CatalogRequest,
    Expected,
    ExpectRequest,
    FairshareList,
    HistoryList,
    HostInfo,
    HostList,
    JobHistory,
    JobInfo,
    JobList,
    JobOutput,
    JobsChanged,
    JobSelection,
    KillResult,
    Modified,
    ModifyRequest,
    PoolInfo,
    QueueList,
    RequestList,
    ResourceList,
    SessionOutput,
    SubmitRequest,
    Submitted,
    SwitchRequest,
    TokensRequest,
)
from xce.model.controllers import ControllerAddresses
from xce.model.result import Demand, Idle, demand_from_json, idle_from_json

TIMEOUT = 30.0  # seconds to connect and to wait for an answer
RETRY_PAUSE = 0.5  # seconds between tries while no controller leads (a takeover)

T = TypeVar("T")
R = TypeVar("R")


class ClientError(Exception):
    """A request that could not be made or that the controller refused. `status` is the
    HTTP status of the controller's answer; None when there was no usable answer
    (unreachable, not the XCE API, no token)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Client:
    """One method per endpoint of the controller's API; each returns the decoded answer
    or raises ClientError."""

    def __init__(self, url: str, token: str, timeout: float = TIMEOUT) -> None:
        self.controllers = ControllerAddresses(url)
        self.token = token
        self.timeout = timeout
        # The controller is a cluster-internal service: never send it (and the token)
        # through the http_proxy a user may have set for the internet.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def submit(self, request: SubmitRequest) -> Submitted:
        return self._post("/jobs", Submitted, request)

    def jobs(self, user: str | None = None, state: str | None = None,
             array: int | None = None) -> JobList:
        """`user`: a name or `all` (default: the caller); `state`: pend, run, done, exit
        or all (default: unfinished and recently finished jobs); `array`: only the
        elements of that job array."""
        query = {key: value for key, value in (("user", user), ("state", state)) if value}
        if array is not None:
            query["array"] = str(array)
        return self._get("/jobs", JobList, query)

    def job(self, job: int) -> JobInfo:
        return self._get(f"/jobs/{job}", JobInfo)

    def kill(self, job: int) -> KillResult:
        return self._post(f"/jobs/{job}/kill", KillResult)

    def stop(self, job: int) -> JobInfo:
        return self._post(f"/jobs/{job}/stop", JobInfo)

    def resume(self, job: int) -> JobInfo:
        return self._post(f"/jobs/{job}/resume", JobInfo)

    def modify(self, job: int, request: ModifyRequest) -> Modified:
        return self._post(f"/jobs/{job}/modify", Modified, request)

    def switch(self, job: int, queue: str) -> Modified:
        return self._post(f"/jobs/{job}/switch", Modified, SwitchRequest(queue))

    def move(self, job: int, top: bool) -> Modified:
        """`xce top` (top) / `xce bottom`."""
        return self._post(f"/jobs/{job}/{'top' if top else 'bottom'}", Modified)

    def requeue(self, job: int) -> JobInfo:
        return self._post(f"/jobs/{job}/requeue", JobInfo)

    def act_on_jobs(self, action: str, user: str = "", queue: str = "") -> JobsChanged:
        """kill, stop or resume every unfinished job of `user` ("": yours; "all") in
        `queue` ("": any): `xce kill 0 -u USER -q QUEUE`."""
        return self._post(f"/jobs/{action}", JobsChanged, JobSelection(user, queue))

    def peek(self, job: int) -> JobOutput:
        """The output so far of a running job (its host is asked: may take seconds)."""
        return self._get(f"/jobs/{job}/peek", JobOutput)

    def job_history(self, job: int) -> JobHistory:
        return self._get(f"/jobs/{job}/history", JobHistory)

    def acct(self, user: str | None = None, queue: str | None = None,
             since: float | None = None, until: float | None = None) -> AcctSummary:
        """Accounting of the jobs that ended in [since, until), per user and queue."""
        query = {key: str(value) for key, value in (
            ("user", user), ("queue", queue), ("since", since), ("until", until))
            if value is not None}
        return self._get("/acct", AcctSummary, query)

    def hosts(self) -> HostList:
        return self._get("/hosts", HostList)

    def close_host(self, name: str, reason: str = "admin") -> HostInfo:
        return self._post(f"/hosts/{_segment(name)}/close?reason={reason}", HostInfo)

    def open_host(self, name: str) -> HostInfo:
        return self._post(f"/hosts/{_segment(name)}/open", HostInfo)

    def decommission_host(self, name: str) -> HostInfo:
        return self._post(f"/hosts/{_segment(name)}/decommission", HostInfo)

    def remove_host(self, name: str) -> HostList:
        return self._post(f"/hosts/{_segment(name)}/remove", HostList)

    def expect_host(self, request: ExpectRequest) -> Expected:
        return self._post("/hosts/expected", Expected, request)

    def queues(self) -> QueueList:
        return self._get("/queues", QueueList)

    def fairshare(self, queue: str | None = None) -> FairshareList:
        return self._get("/fairshare", FairshareList, {"queue": queue} if queue else None)

    def demand(self) -> SessionOutput:
        """The last session's demand (`demand` filled; read it with `session_demand`)."""
        return self._get("/demand", SessionOutput)

    def idle(self) -> SessionOutput:
        """The last session's idle supply (`idle` filled; read it with `session_idle`)."""
        return self._get("/idle", SessionOutput)

    def resources(self) -> ResourceList:
        return self._get("/resources", ResourceList)

    def tokens(self, pool: str, step: str, amount: float) -> PoolInfo:
        """`step`: borrow, grant, refuse or return `amount` tokens of `pool`."""
        return self._post(f"/resources/{_segment(pool)}/{step}", PoolInfo,
                          TokensRequest(amount=amount))

    def requests(self, every: bool = False, provider: str | None = None) -> RequestList:
        """Provisioning requests: open ones, or `every` one the controller keeps."""
        query = {"all": "1"} if every else {}
        if provider:
            query["provider"] = provider
        return self._get("/requests", RequestList, query)

    def history(self, limit: int, after: int | None = None,
                renewals: bool = False) -> HistoryList:
        """Supply facts of the controller's durable log (lease renewals with
        `renewals`)."""
        query = {"limit": str(limit)}
        if after is not None:
            query["after"] = str(after)
        if renewals:
            query["all"] = "1"
        return self._get("/history", HistoryList, query)

    def catalog(self) -> CatalogInfo:
        return self._get("/catalog", CatalogInfo)

    def set_catalog(self, request: CatalogRequest) -> CatalogInfo:
        return self._post("/catalog", CatalogInfo, request)

    @property
    def url(self) -> str:
        """The controller called now (the leader, once known)."""
        return self.controllers.current

    def _get(self, path: str, answer: type[T], query: Mapping[str, str] | None = None) -> T:
        path += f"?{urllib.parse.urlencode(query)}" if query else ""
        return self._call("GET", path, None, answer)

    def _post(self, path: str, answer: type[T], body: msgspec.Struct | None = None) -> T:
        return self._call("POST", path, b"" if body is None else msgspec.json.encode(body),
                          answer)

    def _call(self, method: str, path: str, data: bytes | None, answer: type[T]) -> T:
        """One call, to the leader: a standby's answer is followed to the leader it
        names; with several controllers, one that does not answer (or a takeover under
        way) is retried on the next for up to `timeout` seconds. A request that may
        have reached a controller is never sent twice (only a refused connection is
        retried)."""
        give_up = time.monotonic() + self.timeout
        redirected = False
        while True:
            try:
                return self._once(method, path, data, answer)
            except _Retry as retry:
                if time.monotonic() > give_up:
                    raise retry.error from None
                if retry.pause or redirected:  # (two standbys naming each other: slowly)
                    time.sleep(RETRY_PAUSE)
                redirected = not retry.pause

    def _once(self, method: str, path: str, data: bytes | None, answer: type[T]) -> T:
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {self.token}")
        fence = os.environ.get("XCE_FENCING_TOKEN", "").strip()
        if fence:  # a provisioner-role caller acting under a provider lease
            request.add_header(FENCING_HEADER, fence)
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", f"xce/{__version__}")
        controllers = self.controllers
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as err:
            body = err.read()
            if controllers.redirected(err.code, body):
                raise _Retry(ClientError(f"{self.url}: redirected"), pause=False) from None
            refusal = _refusal(err.code, err.reason, body)
            if controllers.several and controllers.standby(err.code, body):
                controllers.unreachable()  # (no leader yet: another may know)
                raise _Retry(refusal, pause=True) from None
            raise refusal from None
        except (OSError, http.client.HTTPException) as err:
            reason = err.reason if isinstance(err, urllib.error.URLError) else err
            error = ClientError(f"cannot reach the controller at {self.url}: {reason}")
            if controllers.several and (method == "GET" or _refused(err)):
                controllers.unreachable()
                raise _Retry(error, pause=True) from None
            raise error from None
        try:
            return msgspec.json.decode(payload, type=answer)
        except msgspec.DecodeError as err:
            raise ClientError(
                f"unexpected answer from the controller at {self.url}: {err}"
            ) from None


def _segment(name: str) -> str:
    """A host name as one URL path segment."""
    return urllib.parse.quote(name, safe="")


def _refusal(status: int, reason: str, body: bytes) -> ClientError:
    """The controller's own message (`ApiError`), else the HTTP status line."""
    try:
        message = msgspec.json.decode(body, type=ApiError).error
    except msgspec.DecodeError:
        message = f"the controller answered {status} {reason}"
    return ClientError(message, status)


class _Retry(Exception):
    """Call again (on the controller now current), after a pause when `pause`; `error`
    is what the caller gets if the time is up."""

    def __init__(self, error: ClientError, pause: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.pause = pause


def _refused(err: BaseException) -> bool:
    """The connection was refused: the request never reached a controller."""
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    return isinstance(reason, ConnectionRefusedError)


# ---------------------------------------------------------------- demand and idle supply
def session_demand(output: SessionOutput) -> Demand:
    """The typed demand of a `GET /demand` answer (empty when there is none)."""
    return _convert(output.demand, demand_from_json, "demand")


def session_idle(output: SessionOutput) -> Idle:
    """The typed idle supply of a `GET /idle` answer (empty when there is none)."""
    return _convert(output.idle, idle_from_json, "idle supply")


def _convert(shape: dict[str, Any] | None, read: Callable[[dict[str, Any] | None], T],
             what: str) -> T:
    try:
        return read(shape)
    except msgspec.ValidationError as err:
        raise ClientError(f"unexpected {what} from the controller: {err}") from None


# ---------------------------------------------------------------- where and who
def controller_url(option: str | None) -> str:
    """`--controller`, else $XCE_CONTROLLER, else the default; `host:port` means http;
    several, comma-separated: a leader and its standbys."""
    spec = option or os.environ.get("XCE_CONTROLLER") or DEFAULT_CONTROLLER
    urls = []
    for part in spec.split(","):
        url = part.strip()
        if "://" not in url:
            url = f"http://{url}"
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ClientError(f"the controller URL must start with http:// or https://: {url}")
        urls.append(url.rstrip("/"))
    return ",".join(urls)


def read_token(token_file: str | None) -> str:
    """`--token-file`, else $XCE_TOKEN, else $XCE_TOKEN_FILE, else ~/.xce/token."""
    if token_file is None:
        token = os.environ.get("XCE_TOKEN", "").strip()
        if token:
            return token
        token_file = os.environ.get("XCE_TOKEN_FILE") or DEFAULT_TOKEN_FILE
    path = Path(token_file).expanduser()
    try:
        token = path.read_text().strip()
    except OSError as err:
        raise ClientError(
            f"cannot read the token file {path}: {err.strerror} "
            "(give --token-file FILE, or set XCE_TOKEN or XCE_TOKEN_FILE)"
        ) from None
    if not token:
        raise ClientError(f"the token file {path} is empty")
    return token


class Failure(click.ClickException):
    """A command that failed: `xce: <message>` on stderr, exit status 1."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"xce: {self.format_message()}", file=file, err=True)


def with_client(command: Callable[..., R]) -> Callable[..., R]:
    """Give a click command `--controller` and `--token-file` (else those given before
    the command); it receives a connected `Client` as its first argument. A ClientError
    ends it with `xce: <message>`."""

    @connection_options
    @functools.wraps(command)
    def run(*args: Any, controller: str | None, token_file: str | None, **kwargs: Any) -> R:
        before = remembered_connection()
        try:
            client = Client(controller_url(controller or before[0]),
                            read_token(token_file or before[1]))
            return command(client, *args, **kwargs)
        except ClientError as err:
            raise Failure(err.message) from err

    return run
