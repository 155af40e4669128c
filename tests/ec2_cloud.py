"""Shared helpers of the ec2 provider's tests: EC2 played by moto's server on loopback.

* `moto_server(log)`: `python -m moto.server` as a subprocess on a free loopback port;
  boto3 talks to it with `endpoint_url` and dummy credentials (`AWS_ENV`).
* `CapacityProxy(moto_url)`: a loopback HTTP proxy in front of moto that forwards every
  request as is, except RunInstances of a chosen instance type beyond a chosen number
  of launches, which it answers as EC2 does when it has no room: HTTP 500 with the EC2
  Query API's error document, code `InsufficientInstanceCapacity` (moto never runs out
  of capacity by itself).
* `network(ec2)`: a VPC, a subnet and a security group to launch into.
* `MetadataService()`: the instance metadata service's spot notice (IMDSv2) on
  loopback, for agents started with `--spot-metadata URL`.
* `Cloud`: the part of EC2 moto does not play: booting. Every new instance of the
  cluster that has an `xce:host` tag is "booted" by running its user data (read back
  with DescribeInstanceAttribute) with bash on this machine; an instance terminated
  at EC2 has its machine killed (the processes its boot started, and theirs).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3  # type: ignore[import-untyped]
from aiohttp import web
from live import free_port, wait_for

REGION = "us-east-1"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/xce-test-aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/xce-test-aws-credentials",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
IMAGE = "ami-03cf127a"  # one of moto's images
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def ec2_client(url: str) -> Any:
    """A boto3 EC2 client of the test itself (not the provider's) at `url`."""
    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing",
        region_name=REGION).client("ec2", endpoint_url=url)


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """moto's server on a free loopback port, for the block; its URL."""
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            env={**os.environ, **AWS_ENV},
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"moto's server exited with {proc.returncode}: "
                                 f"{log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), _direct.open(f"{url}/moto-api/",
                                                        timeout=1) as answer:
            return bool(answer.status == 200)
        return False

    try:
        wait_for(up, 30, "moto's server to listen")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def network(ec2: Any) -> tuple[str, str]:
    """A new VPC's subnet and security group: (subnet id, group id)."""
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"xce-{uuid.uuid4().hex[:6]}",
                                      Description="xce agents", VpcId=vpc)["GroupId"]
    return subnet, group


# ---------------------------------------------------------------- capacity errors
CAPACITY_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code><Message>We currently \
do not have sufficient {type} capacity in the Availability Zone you requested \
({zone}). Our system will be working on provisioning additional capacity. You can \
currently get {type} capacity by not specifying an Availability Zone in your request \
or choosing {others}.</Message></Error></Errors><RequestID>{request}</RequestID>\
</Response>"""
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate"}


class CapacityProxy:
    """Forwards to moto; RunInstances of an instance type in `room` fails with EC2's
    InsufficientInstanceCapacity once that type has had `room[type]` launches."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.room: dict[str, int] = {}
        self.launches: dict[str, int] = {}  # instance type -> RunInstances seen
        self.refused: list[str] = []  # instance types refused, one per refusal
        self.forms: list[dict[str, list[str]]] = []  # every RunInstances, as sent
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                proxy.handle(self)

            def do_GET(self) -> None:
                proxy.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        form = parse_qs(body.decode("utf-8", "replace"))
        if form.get("Action") == ["RunInstances"]:
            kind = form.get("InstanceType", ["m1.small"])[0]
            with self.lock:
                self.forms.append(form)
                self.launches[kind] = self.launches.get(kind, 0) + 1
                refuse = kind in self.room and self.launches[kind] > self.room[kind]
                if refuse:
                    self.refused.append(kind)
            if refuse:
                xml = CAPACITY_XML.format(type=kind, zone=f"{REGION}a",
                                          others=f"{REGION}b, {REGION}c",
                                          request=uuid.uuid4()).encode()
                request.send_response(500)
                request.send_header("Content-Type", "text/xml;charset=UTF-8")
                request.send_header("Content-Length", str(len(xml)))
                request.end_headers()
                request.wfile.write(xml)
                return
        connection = http.client.HTTPConnection(self.target.hostname or "127.0.0.1",
                                                self.target.port, timeout=30)
        try:
            headers = {k: v for k, v in request.headers.items()
                       if k.lower() not in _HOP_BY_HOP}
            connection.request(request.command, request.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        request.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                request.send_header(key, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)


# ---------------------------------------------------------------- instance metadata
class MetadataService:
    """EC2's instance metadata service as far as spot notices go, on loopback (aiohttp,
    in a thread of its own), as IMDSv2 answers: a session token for `PUT
    /latest/api/token` (with its TTL header), then `GET
    /latest/meta-data/spot/instance-action` with that token: 404 until `notice` is
    set, then the notice document; 401 without a valid token. It counts what it is
    asked and keeps every Authorization header it sees (an agent must never send its
    controller token here)."""

    def __init__(self) -> None:
        self.notice: dict[str, str] | None = None
        self.tokens: set[str] = set()
        self.reads = 0  # notice reads with a valid token
        self.refused = 0  # reads without one (401)
        self.authorization: list[str] = []
        self.url = f"http://127.0.0.1:{free_port()}"
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the metadata service did not start"

    def announce(self, seconds: float = 120.0, action: str = "terminate") -> float:
        """EC2's two-minute warning: the instance goes in `seconds`; that time."""
        when = time.time() + seconds
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        self.notice = {"action": action, "time": stamp}
        return float(int(when))

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_put("/latest/api/token", self._token)
        app.router.add_get("/latest/meta-data/spot/instance-action", self._action)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        port = int(urlsplit(self.url).port or 0)
        self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", port).start())
        self._ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _seen(self, request: web.Request) -> None:
        if "Authorization" in request.headers:
            self.authorization.append(request.headers["Authorization"])

    async def _token(self, request: web.Request) -> web.Response:
        self._seen(request)
        ttl = request.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return web.Response(status=400, text="Bad Request")
        token = uuid.uuid4().hex
        self.tokens.add(token)
        return web.Response(text=token)

    async def _action(self, request: web.Request) -> web.Response:
        self._seen(request)
        if request.headers.get("X-aws-ec2-metadata-token") not in self.tokens:
            self.refused += 1
            return web.Response(status=401, text="Unauthorized")
        self.reads += 1
        if self.notice is None:
            return web.Response(status=404, text="Not Found")
        return web.json_response(self.notice)


# ---------------------------------------------------------------- booting
@dataclass
class Machine:
    instance: str
    host: str
    script: Path
    booted: float
    killed: bool = False


class Cloud:
    """Boots the cluster's new instances (their user data, run with bash here) and
    kills the machines of terminated ones, every `interval` seconds in a thread."""

    def __init__(self, ec2: Any, cluster: str, root: Path, env: dict[str, str],
                 interval: float = 0.2) -> None:
        self.ec2 = ec2
        self.cluster = cluster
        self.root = root
        self.env = env
        self.interval = interval
        self.machines: dict[str, Machine] = {}  # instance id -> its machine
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        root.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> Cloud:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception as err:  # reported by the test (check())
                self.errors.append(repr(err))

    def step(self) -> None:
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "tag:xce:cluster", "Values": [self.cluster]}])
        for page in pages:
            for reservation in page["Reservations"]:
                for raw in reservation["Instances"]:
                    self._see(raw)

    def _see(self, raw: dict[str, Any]) -> None:
        instance = raw["InstanceId"]
        state = raw["State"]["Name"]
        tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
        machine = self.machines.get(instance)
        if machine is None and state == "running" and tags.get("xce:host"):
            self._boot(instance, tags["xce:host"])
        elif machine is not None and not machine.killed and state in ("shutting-down",
                                                                       "terminated"):
            self.kill(machine)

    def _boot(self, instance: str, host: str) -> None:
        answer = self.ec2.describe_instance_attribute(InstanceId=instance, Attribute="userData")
        script = self.root / f"{instance}.user-data"
        script.write_bytes(base64.b64decode(answer["UserData"]["Value"]))
        self.machines[instance] = Machine(instance, host, script, time.time())
        env = dict(self.env, XCE_TEST_MACHINE=instance)
        done = subprocess.run(["bash", str(script)], env=env, cwd=self.root,
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            self.errors.append(f"user data of {instance} ({host}) exited "
                               f"{done.returncode}: {done.stderr}")

    def kill(self, machine: Machine) -> None:
        """The machine is gone: its processes (those its boot started: they carry its
        instance id in their environment) and all their descendants die."""
        machine.killed = True
        for pid in machine_pids(machine.instance):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def check(self) -> None:
        assert not self.errors, self.errors


def machine_pids(instance: str) -> list[int]:
    """Processes whose environment names the instance, and their descendants."""
    needle = f"XCE_TEST_MACHINE={instance}\0".encode()
    parents: dict[int, int] = {}
    roots: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()
            if stat[0] == b"Z":
                continue
            parents[pid] = int(stat[1])
            if needle in Path(f"/proc/{pid}/environ").read_bytes():
                roots.add(pid)
        except (OSError, IndexError, ValueError):
            continue
    found = set(roots)
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def venv_path() -> str:
    """PATH with this interpreter's bin directory (the `xce` script) first."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
