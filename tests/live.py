"""Shared helpers of the live tests: a real controller, real agents and real jobs, as
subprocesses of the test, in the test's own temporary directory.

`LiveCluster(tmp_path, config_yaml)` makes the state directory and the tokens;
`start_controller()` and `start_agent(name, slots)` start the daemons (each in its own
process group, logging to a file under tmp_path); `api()` calls the HTTP API with
urllib; `xce()` runs the CLI; `wait_for()` polls. `close()` kills every process of the
test: the daemons' process groups, then anything whose command line or environment
mentions tmp_path (the agents' shims run in sessions of their own, and their jobs in
process groups of their own, so they outlive the agents by design; every job gets
the marker variable in its environment).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from xce.controller.auth import TokenStore
from xce.model.api import FENCING_HEADER

T = TypeVar("T")

ME = getpass.getuser()  # the admin: jobs it submits run as this user
MARK = "XCE_LIVE_TEST"  # environment variable naming the test's directory
_SCRIPT = Path(sys.executable).with_name("xce")
# The `xce` console script of this interpreter, else the same entry point through -c.
XCE: list[str] = (
    [str(_SCRIPT)]
    if _SCRIPT.exists()
    else [sys.executable, "-c", "from xce.cli.main import main; main()"]
)
# Fast timings, so that unreach/requeue happen within seconds.
FAST = ("--heartbeat-interval", "0.3", "--unreach-after", "1.5", "--requeue-after", "1.5")

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Timeout(AssertionError):
    pass


def wait_for(probe: Callable[[], T | None], timeout: float = 10.0, what: str = "",
             interval: float = 0.05) -> T:
    """The first truthy value of `probe()`, polled every `interval` until `timeout`
    (then an AssertionError that says what was awaited and the last value)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise Timeout(f"timed out after {timeout} s waiting for {what or probe}: last {last!r}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Answer:
    """An HTTP answer: status and decoded JSON body (None when not JSON)."""

    def __init__(self, status: int, raw: bytes, content_type: str) -> None:
        self.status = status
        self.raw = raw
        self.content_type = content_type
        try:
            self.json: Any = json.loads(raw) if raw else None
        except ValueError:
            self.json = None

    def __repr__(self) -> str:
        return f"Answer({self.status}, {self.raw[:300]!r})"


class LiveCluster:
    """One test's cluster: state directory, tokens, daemons, and clients."""

    def __init__(self, root: Path, config: str, *, users: Sequence[str] = (),
                 agents: Sequence[str] = ("n1", "n2")) -> None:
        self.root = root
        self.state = root / "state"
        self.config_path = root / "cluster.yaml"
        self.config_path.write_text(config)
        self.env = {
            k: v for k, v in os.environ.items()
            if k not in ("XCE_TOKEN", "XCE_TOKEN_FILE", "XCE_CONTROLLER")
        }
        self.mark = f"{root}{os.sep}"  # in every command line or environment of the test
        self.env[MARK] = self.mark
        self.env["PYTHONUNBUFFERED"] = "1"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        self.url = ""
        self.run("init", "--state", str(self.state), "--admin", ME)
        self.tokens: dict[str, Path] = {"admin": self.state / "admin.token"}
        self.fences: dict[str, int] = {}  # who -> the fencing token its requests carry
        for name in agents:
            self.add_token("agent", name)
        for name in users:
            self.add_token("user", name)

    # ------------------------------------------------------------ tokens, CLI
    def lease(self, who: str, provider: str, ttl: float = 3600) -> int:
        """Take `provider`'s lease for `who`; its later requests carry the token."""
        token = int(self.ok("POST", f"/leases/{provider}", {"ttl": ttl}, who)["token"])
        self.fences[who] = token
        return token

    def add_token(self, role: str, name: str, key: str | None = None) -> Path:
        """A token made as `xce token add --out FILE` makes it (in this process: the
        CLI's start-up costs a second, and `xce init` has shown the CLI works)."""
        out = self.root / f"{role}-{name}.token"
        out.write_text(TokenStore(self.state).add(name, role) + "\n")
        out.chmod(0o600)
        self.tokens[key or (name if role != "admin" else f"admin-{name}")] = out
        return out

    def token(self, who: str) -> str:
        return self.tokens[who].read_text().strip()

    def run(self, *args: str, check: bool = True, timeout: float = 60.0,
            cwd: Path | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        """`xce ARGS` to its end (stdout and stderr captured)."""
        done = subprocess.run(
            [*XCE, *args], capture_output=True, text=True, timeout=timeout,
            cwd=cwd or self.root, env=env or self.env,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"xce {' '.join(args)}: status {done.returncode}\n"
                f"stdout: {done.stdout}\nstderr: {done.stderr}"
            )
        return done

    def xce(self, *args: str, who: str = "admin", check: bool = False,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """A client command against this cluster's controller as `who`."""
        env = dict(self.env, XCE_CONTROLLER=self.url, XCE_TOKEN_FILE=str(self.tokens[who]))
        if who in self.fences:
            env["XCE_FENCING_TOKEN"] = str(self.fences[who])
        return self.run(*args, check=check, cwd=cwd, env=env)

    # ------------------------------------------------------------ daemons
    def _spawn(self, key: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        log = self.root / f"{key}.log"
        self.logs[key] = log
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*XCE, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                cwd=self.root, env=self.env, start_new_session=True,
            )
        self.procs[key] = proc
        return proc

    def start_controller(self, listen: str = "127.0.0.1:0", record: Path | None = None,
                         extra: Sequence[str] = FAST, timeout: float = 20.0,
                         key: str = "controller") -> str:
        """Start a controller (`key`: its name among the daemons; another than
        `controller` gets a state directory of its own, `state-KEY`, sharing the
        tokens); its URL, once it listens (a standby of a shared log: it answers 503)."""
        state = self.state
        if key != "controller":
            state = self.root / f"state-{key}"
            state.mkdir(exist_ok=True)
            with contextlib.suppress(FileExistsError):
                (state / "tokens.json").symlink_to(self.state / "tokens.json")
        url_file = state / "controller.url"
        url_file.unlink(missing_ok=True)  # left behind by a controller killed -9
        args = ["controller", "--config", str(self.config_path), "--state", str(state),
                "--listen", listen, *extra]
        if record is not None:
            args += ["--record", str(record)]
        proc = self._spawn(key, args)

        def up() -> str:
            if proc.poll() is not None:
                raise AssertionError(f"the controller exited with {proc.returncode}:\n"
                                     + self.log_tail(key))
            if not url_file.exists():
                return ""
            url = url_file.read_text().strip()
            if not url:
                return ""
            with contextlib.suppress(OSError):  # listening, and serving (recovered)
                if self.api("GET", "/openapi.json", url=url).status == 200:
                    return url
            return ""

        url = wait_for(up, timeout, f"the controller {key} to listen")
        if key == "controller":
            self.url = url
        return url

    def stop_controller(self, sig: int = signal.SIGKILL) -> None:
        self.stop("controller", sig)

    def start_agent(self, name: str, slots: int = 2, wait: bool = True,
                    extra: Sequence[str] = (), controller: str = "") -> None:
        """`controller`: the URLs it is given (default: the controller's)."""
        self._spawn(name, [
            "agent", "--controller", controller or self.url, "--name", name,
            "--slots", str(slots),
            "--token-file", str(self.tokens[name]), "--state-dir",
            str(self.root / f"agent-{name}"), "--kill-grace", "2", *extra,
        ])
        if wait:
            wait_for(lambda: self.host(name)["state"] == "ok", 20, f"agent {name} to register")

    def stop(self, key: str, sig: int = signal.SIGKILL, timeout: float = 10.0) -> None:
        """Signal a daemon's process group and reap it."""
        proc = self.procs.get(key)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)

    def log_tail(self, key: str, lines: int = 40) -> str:
        log = self.logs.get(key)
        if log is None or not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        """Kill every process of this test: daemons first, then shims and jobs."""
        for key in list(self.procs):
            self.stop(key)
        kill_marked(self.mark)

    # ------------------------------------------------------------ API
    def api(self, method: str, path: str, body: Any = None, who: str | None = "admin",
            raw: bytes | None = None, headers: dict[str, str] | None = None,
            url: str | None = None, timeout: float = 15.0) -> Answer:
        """One HTTP request; `who` None sends no token; `raw` is sent as the body as is."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(f"{url or self.url}{path}", data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if who is not None:
            request.add_header("Authorization", f"Bearer {self.token(who)}")
        if who in self.fences and FENCING_HEADER not in (headers or {}):
            request.add_header(FENCING_HEADER, str(self.fences[who]))
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with _opener.open(request, timeout=timeout) as response:
                return Answer(response.status, response.read(),
                              response.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as err:
            return Answer(err.code, err.read(), err.headers.get("Content-Type", ""))

    def ok(self, method: str, path: str, body: Any = None, who: str = "admin") -> Any:
        answer = self.api(method, path, body, who)
        assert 200 <= answer.status < 300, f"{method} {path}: {answer!r}"
        return answer.json

    def submit(self, command: Sequence[str], who: str = "admin", **fields: Any) -> int:
        """Submit through the API (cwd: the test directory; the marker in the job's
        environment); the job id."""
        body = {"command": list(command), "cwd": str(self.root),
                "env": {MARK: self.mark, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                **fields}
        return int(self.ok("POST", "/jobs", body, who)["job"])

    def job(self, job_id: int) -> dict[str, Any]:
        return self.ok("GET", f"/jobs/{job_id}")

    def jobs(self) -> list[dict[str, Any]]:
        return list(self.ok("GET", "/jobs?user=all&state=all")["jobs"])

    def hosts(self) -> dict[str, dict[str, Any]]:
        return {h["name"]: h for h in self.ok("GET", "/hosts")["hosts"]}

    def host(self, name: str) -> dict[str, Any]:
        return self.hosts()[name]

    def wait_state(self, job_id: int, states: str | Sequence[str], timeout: float = 15.0
                   ) -> dict[str, Any]:
        """Wait until the job is in one of `states`; its JobInfo."""
        wanted = (states,) if isinstance(states, str) else tuple(states)
        last: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            nonlocal last
            last = self.job(job_id)
            return last if last["state"] in wanted else None

        try:
            return wait_for(probe, timeout, f"job {job_id} to be {'/'.join(wanted)}")
        except Timeout as err:
            raise AssertionError(f"{err}\ncontroller log:\n{self.log_tail('controller')}"
                                 ) from None


# ---------------------------------------------------------------- processes
def marked_pids(mark: str) -> list[int]:
    """Live processes (not this one, not zombies) whose command line or environment
    contains `mark`."""
    needle = mark.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except (OSError, IndexError):
            continue
        if needle in cmdline or needle in environ:
            found.append(int(entry))
    return found


def kill_marked(mark: str, timeout: float = 5.0) -> None:
    """SIGKILL every process that mentions `mark`, until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = marked_pids(mark)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise AssertionError(f"processes of {mark} survive SIGKILL: {pids}")
        time.sleep(0.05)


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


@contextlib.contextmanager
def live_cluster(root: Path, config: str, **kwargs: Any) -> Iterator[LiveCluster]:
    cluster = LiveCluster(root, config, **kwargs)
    try:
        yield cluster
    finally:
        cluster.close()
        assert not marked_pids(cluster.mark), "processes of the test survived"


skip_unless_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the agent runs on Linux only (/proc, flock)"
)
