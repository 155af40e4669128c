"""A real `xce license-pool` for the tests: started as a subprocess on 127.0.0.1 (any
free port: it prints the URL it listens on), spoken to over HTTP with urllib.

`XCE_POOL` starts it as `xce license-pool`; `QUICK` as `python -m xce.license`, the
same command without loading the rest of `xce` (half the start-up time)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from live import XCE, Answer, wait_for

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
LISTENING = "xce license-pool listening on "
XCE_POOL = [*XCE, "license-pool"]
QUICK = [sys.executable, "-m", "xce.license"]


class PoolServer:
    """One pool server process; `url` once started."""

    def __init__(self, root: Path, features: dict[str, float], *, lease_ttl: float = 60.0,
                 token_file: Path | None = None, state: Path | None = None,
                 extra: Sequence[str] = (), name: str = "pool",
                 command: Sequence[str] = QUICK) -> None:
        self.root = root
        self.args = [*command, "--listen", "127.0.0.1:0", "--lease-ttl", str(lease_ttl)]
        for feature, total in features.items():
            self.args += ["--feature", f"{feature}={total:g}"]
        if token_file is not None:
            self.args += ["--token-file", str(token_file)]
        if state is not None:
            self.args += ["--state", str(state)]
        self.args += list(extra)
        self.token = token_file.read_text().strip() if token_file is not None else ""
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.starts = 0

    @property
    def out(self) -> Path:
        return self.root / f"{self.name}-{self.starts}.out"

    @property
    def log(self) -> Path:
        return self.root / f"{self.name}.log"

    def start(self, timeout: float = 20.0) -> str:
        self.starts += 1
        with open(self.out, "wb") as out, open(self.log, "ab") as err:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, cwd=self.root,
                                         start_new_session=True)
        proc = self.proc

        def listening() -> str:
            if proc.poll() is not None:
                raise AssertionError(f"the pool exited with {proc.returncode}:\n"
                                     + self.log.read_text(errors="replace"))
            for line in self.out.read_text().splitlines():
                if line.startswith(LISTENING):
                    return line[len(LISTENING):].strip()
            return ""

        self.url = wait_for(listening, timeout, "the pool to listen")
        return self.url

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        self.proc.wait(10)
        self.proc = None

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             token: str | None = None) -> Answer:
        """One request; `token` None sends the pool's own token (if it has one)."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        bearer = self.token if token is None else token
        if bearer:
            request.add_header("Authorization", f"Bearer {bearer}")
        try:
            with _opener.open(request, timeout=10) as answer:
                return Answer(answer.status, answer.read(), answer.headers["Content-Type"])
        except urllib.error.HTTPError as err:
            return Answer(err.code, err.read(), err.headers.get("Content-Type", ""))

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        answer = self.call(method, path, body)
        assert 200 <= answer.status < 300, f"{method} {path}: {answer!r}"
        return answer.json

    def features(self) -> dict[str, dict[str, Any]]:
        return {f["name"]: f for f in self.ok("GET", "/features")["features"]}

    def in_use(self, feature: str) -> float:
        return float(self.features()[feature]["in_use"])

    def leases(self, holder: str | None = None) -> list[dict[str, Any]]:
        query = "" if holder is None else f"?holder={holder}"
        return list(self.ok("GET", f"/leases{query}")["leases"])

    def borrow(self, feature: str, holder: str, amount: float, **more: Any) -> Answer:
        return self.call("POST", f"/features/{feature}/borrow",
                         {"holder": holder, "amount": amount, **more})


@contextlib.contextmanager
def pool_server(root: Path, features: dict[str, float], **kwargs: Any) -> Iterator[PoolServer]:
    server = PoolServer(root, features, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
