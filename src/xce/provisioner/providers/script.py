"""The `script` provider: hosts from an admin's executables that speak the protocol of
LSF resource connector provider plugins (docs/providers/script.md).

Five scripts in `<scriptPath>/scripts/` (or `<scriptPath>/`), each run as
`SCRIPT -f INPUT.json` with JSON on stdout: `getAvailableTemplates.sh`,
`requestMachines.sh`, `requestReturnMachines.sh`, `getRequestStatus.sh` and, optionally,
`getReturnRequests.sh`. Requests are asynchronous: `request_hosts` returns once
`requestMachines` answered a request id, and every `instances()` asks
`getRequestStatus` about the open requests (machines `executing`, `succeed`, `fail`) and
`getReturnRequests` about the running machines (those the provider takes back).

XCE's part of the bargain: each machine must join as the expected host the controller
made, with its join token. requestMachines gets them in an extra key the LSF plugins
ignore, `"xce": {"controller", "cluster", "provider", "template", "request", "hosts":
[{"name", "joinToken"}]}`; a machine is matched to its host by the name the plugin
reports, else in order. The request ids and that mapping are kept in
`WORK/<provider>/state.json`, replaced atomically under a lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn

import msgspec

from xce.atomic_json import write_atomic
from xce.config.providers.file import ProviderSpec
from xce.config.providers.script import (
    ScriptConf,
    find_scripts,
    load_script_conf,
)
from xce.model.cluster import ResourceValue
from xce.model.lifecycle import MACHINE_LIFE, MachineState
from xce.provisioner.provider import (
    Description,
    HostGrant,
    Instance,
    ProviderError,
    TemplateOffer,
    grant_names,
    offered_template,
)
from xce.provisioner.providers.local import PRIVATE_ENV
from xce.provisioner.providers.local_files import LockedDirectory
from xce.provisioner.registry import ProviderContext

log = logging.getLogger("xce.provisioner.script")

# What XCE knows of one machine (one expected host): a MachineState, changed only as
# its table allows (MACHINE_LIFE, xce.model.lifecycle: `_move`).
ALIVE = (MachineState.EXECUTING, MachineState.RUNNING)
REQUEST_STATUSES = ("running", "complete", "complete_with_error")
RESULTS = ("executing", "succeed", "fail")
TAIL = 500  # characters of a script's output quoted in an error
KEEP_GONE = 86400.0  # seconds a gone instance stays in the state file (and instances())


class MachineRecord(msgspec.Struct):
    """One instance: the expected host it joins as, and the plugin's machine for it."""

    id: str
    host: str
    template: str
    request: str  # the provisioner's request id
    started: float  # epoch seconds of the request
    state: MachineState = MachineState.REQUESTING
    plugin_request: str = ""  # requestMachines' requestId
    machine_id: str = ""
    machine_name: str = ""
    result: str = ""  # the last `result` getRequestStatus gave
    status: str = ""  # the last machine `status` (the plugin's words)
    address: str = ""  # privateIpAddress
    message: str = ""
    return_request: str = ""  # requestReturnMachines' requestId
    reclaim_at: float = 0.0  # when the provider takes it back (0: it does not)
    ended: float = 0.0  # when it was last seen alive (gone records)


class RequestRecord(msgspec.Struct):
    """An open request of the plugin: polled with getRequestStatus until it ends."""

    id: str  # the plugin's requestId
    kind: Literal["create", "return"]
    instances: list[str]  # create: the instances in host order; return: those returned
    machines: list[str] = []  # create: surplus machines returned; return: all returned
    template: str = ""
    created: float = 0.0
    message: str = ""


class ScriptState(msgspec.Struct):
    """The provider's state file."""

    cluster: str
    instances: dict[str, MachineRecord] = {}
    requests: dict[str, RequestRecord] = {}


class Machine(msgspec.Struct, frozen=True):
    """One machine as getRequestStatus reports it."""

    machine_id: str
    name: str
    result: str
    status: str
    address: str
    message: str


class ScriptFiles(LockedDirectory):
    """`WORK/<provider>/`: state.json, its lock, and io/ (the scripts' input files)."""

    def __init__(self, root: Path, cluster: str) -> None:
        super().__init__(root)
        self.cluster = cluster
        self.io = root / "io"
        self.io.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._state = root / "state.json"
        with self.locked():
            if not self._state.exists():
                self.save(ScriptState(cluster))
            self.load()  # another cluster's directory is refused at once

    def load(self) -> ScriptState:
        try:
            state = msgspec.json.decode(self._state.read_bytes(), type=ScriptState)
        except (OSError, msgspec.DecodeError) as err:
            raise ProviderError("unavailable", f"cannot read {self._state}: {err}") from err
        if state.cluster != self.cluster:
            raise ProviderError("request", f"{self.root} holds the instances of cluster "
                                f"{state.cluster}, not {self.cluster}")
        return state

    def save(self, state: ScriptState) -> None:
        write_atomic(self._state, state)


class Scripts:
    """Runs the plugin's scripts: `SCRIPT -f INPUT.json`, JSON object on stdout."""

    def __init__(self, provider: str, paths: Mapping[str, Path], io_dir: Path,
                 env: Mapping[str, str], cwd: Path, timeout: float) -> None:
        self.provider = provider
        self.paths = dict(paths)
        self.io_dir = io_dir
        self.env = dict(env)
        self.cwd = cwd
        self.timeout = timeout

    def has(self, name: str) -> bool:
        return name in self.paths

    def call(self, name: str, payload: Mapping[str, Any],
             env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The script's answer. The input file (mode 0600: it may hold join tokens) is
        deleted afterwards. A failure to run, a timeout, a non-zero exit or an answer
        that is not a JSON object is ProviderError `unavailable`."""
        path = self.paths[name]
        where = f"provider {self.provider}: {path.name}"
        fd, input_file = tempfile.mkstemp(prefix=f"{name}.", suffix=".json", dir=self.io_dir)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(json.dumps(payload).encode())
            stdout, stderr, code = self._run(path, input_file, {**self.env, **(env or {})},
                                             where)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(input_file)
        if code != 0:
            how = f"exited with status {code}" if code > 0 else f"was killed by signal {-code}"
            raise ProviderError("unavailable", f"{where} {how}: {_failure(stdout, stderr)}")
        try:
            answer = json.loads(stdout)
        except ValueError:
            raise ProviderError("unavailable", f"{where}: the output is not JSON: "
                                f"{_shown(stdout, stderr)}") from None
        if not isinstance(answer, dict):
            raise ProviderError("unavailable", f"{where}: the output is not a JSON object: "
                                f"{_shown(stdout, stderr)}")
        return answer

    def _run(self, path: Path, input_file: str, env: dict[str, str], where: str
             ) -> tuple[bytes, bytes, int]:
        try:
            child = subprocess.Popen(
                [str(path), "-f", input_file], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.cwd, env=env,
                start_new_session=True,
            )
        except OSError as err:
            raise ProviderError("unavailable", f"{where}: cannot run {path}: "
                                f"{err.strerror}") from err
        try:
            stdout, stderr = child.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.communicate(timeout=5)
            if child.poll() is None:
                child.kill()
                child.wait()
            raise ProviderError("unavailable", f"{where} did not finish within "
                                f"{self.timeout:g} s (killed)") from None
        return stdout, stderr, child.returncode


class ScriptProvider:
    """Hosts of the templates a plugin offers, through its five scripts."""

    def __init__(self, name: str, cluster: str, templates: Sequence[str], controller: str,
                 conf_path: Path, scripts: Mapping[str, Path], root: Path,
                 conf: ScriptConf | None = None) -> None:
        self.name = name
        self.cluster = cluster
        self.conf = conf or ScriptConf()
        self.controller = self.conf.controller or controller
        self.template_ids = {t: self.conf.templates.get(t, t) for t in templates}
        self.files = ScriptFiles(root, cluster)
        self.data_dir = Path(self.conf.data_dir) if self.conf.data_dir else root / "data"
        self.log_dir = Path(self.conf.log_dir) if self.conf.log_dir else root / "log"
        for directory in (self.data_dir, self.log_dir):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        env.update(self.conf.env)
        env.update(PROVIDER_NAME=name, PRO_CONF_DIR=str(conf_path),
                   PRO_DATA_DIR=str(self.data_dir), PRO_LSF_LOGDIR=str(self.log_dir),
                   XCE_CONTROLLER=self.controller, XCE_CLUSTER=cluster)
        if self.conf.script_options:
            env["SCRIPT_OPTIONS"] = self.conf.script_options
        self.scripts = Scripts(name, scripts, self.files.io, env, self.data_dir,
                               self.conf.timeout)
        self._described: tuple[float, Description] | None = None
        self._polled = -math.inf  # time.monotonic() of the last complete poll

    # ------------------------------------------------------------ describing
    def describe(self) -> Description:
        """The plugin's templates (getAvailableTemplates), reused for `describe_ttl`
        seconds. A templateId that `templates:` of the scriptconf maps a catalog
        template to is offered under the catalog's name. When the script fails, the
        last good answer is reused (with a warning); without one, ProviderError."""
        now = time.monotonic()
        if self._described is not None and now - self._described[0] < self.conf.describe_ttl:
            return self._described[1]
        try:
            described = self._describe()
        except ProviderError as err:
            if self._described is None:
                raise
            log.warning("%s (the templates of %s ago are used)", err,
                        f"{now - self._described[0]:.0f} s")
            return self._described[1]
        self._described = (now, described)
        return described

    def _describe(self) -> Description:
        answer = self.scripts.call("getAvailableTemplates", {})
        at = self._at("getAvailableTemplates")
        names = {tid: name for name, tid in self.template_ids.items()}
        offers = tuple(_offer(entry, at.key("templates").index(index), names,
                              self.conf.lead_time)
                       for index, entry in enumerate(_items(answer, "templates", at)))
        return Description(provider=self.name, templates=offers)

    # ------------------------------------------------------------ hosts
    def request_hosts(self, request_id: str, template: str,
                      hosts: Sequence[HostGrant]) -> list[Instance]:
        """One requestMachines for the hosts that have no instance yet (a retried
        request asks for nothing twice); the instances, `running` while the plugin
        makes their machines."""
        template_id = self._template_id(template)
        names = grant_names(hosts)
        with self.files.locked():
            state = self.files.load()
            new = [grant for grant in hosts if self._id(grant.name) not in state.instances]
            if new:
                self._request(state, request_id, template, template_id, new)
            now = time.time()
            return [_instance(state.instances[self._id(name)], self.cluster, now)
                    for name in names]

    def _request(self, state: ScriptState, request_id: str, template: str, template_id: str,
                 grants: Sequence[HostGrant]) -> None:
        now = time.time()
        records = [MachineRecord(id=self._id(grant.name), host=grant.name, template=template,
                                 request=request_id, started=now) for grant in grants]
        for record in records:
            state.instances[record.id] = record
        self.files.save(state)  # before the call: a crash during it leaves them (gone)
        payload = {
            "template": {"templateId": template_id, "machineCount": len(grants)},
            "rc_account": self.cluster,
            "userData": {"xce_controller": self.controller, "xce_cluster": self.cluster,
                         "xce_template": template, "xce_request": request_id},
            "xce": {"controller": self.controller, "cluster": self.cluster,
                    "provider": self.name, "template": template, "request": request_id,
                    "hosts": [{"name": g.name, "joinToken": g.join_token} for g in grants]},
        }
        try:
            answer = self.scripts.call("requestMachines", payload,
                                       {"XCE_REQUEST": request_id, "XCE_TEMPLATE": template})
            at = self._at("requestMachines")
            plugin_request = _text(answer, "requestId", at)
            if plugin_request in state.requests:
                at.key("requestId").fail(f"{plugin_request!r} is the id of an open request")
        except ProviderError:
            for record in records:
                del state.instances[record.id]
            self.files.save(state)
            raise
        for record in records:
            record.plugin_request = plugin_request
            _move(record, MachineState.EXECUTING)
        state.requests[plugin_request] = RequestRecord(
            plugin_request, "create", [r.id for r in records], template=template, created=now,
            message=str(answer.get("message", "")))
        self.files.save(state)
        log.info("provider %s: requested %s of %s (%s): plugin request %s", self.name,
                 ", ".join(g.name for g in grants), template_id, request_id, plugin_request)

    def release(self, instance_ids: Sequence[str]) -> None:
        """requestReturnMachines for the machines of these instances; they are listed
        `gone` from then on. An instance whose machine the plugin has not reported yet is
        marked released: its machine is returned as soon as it is reported. Releasing a
        gone instance changes nothing; an unknown id is refused before anything."""
        with self.files.locked():
            state = self.files.load()
            unknown = [i for i in instance_ids if i not in state.instances]
            if unknown:
                raise ProviderError("request", f"no such instance: {', '.join(unknown)}")
            chosen = [state.instances[i] for i in dict.fromkeys(instance_ids)]
            unreported = {r.plugin_request for r in chosen if r.state in ALIVE
                          and not r.machine_id and r.plugin_request in state.requests}
            if unreported:  # learn their machines first
                self._poll_requests(state, unreported)
            returning = [r for r in chosen if r.state in ALIVE and r.machine_id]
            for record in chosen:
                if record.state in ALIVE and not record.machine_id:
                    _move(record, MachineState.RELEASED, time.time())
            if returning:
                self._return(state, returning, [])
            self.files.save(state)

    def instances(self) -> list[Instance]:
        """Every instance, oldest first: `running` while its machine is executing or
        succeeded, `gone` once it failed, was returned or taken back. Asks
        getRequestStatus about every open request and getReturnRequests about the running
        machines first, unless it did less than `query_interval` seconds ago."""
        with self.files.locked():
            state = self.files.load()
            before = msgspec.json.encode(state)
            if time.monotonic() - self._polled >= self.conf.query_interval:
                self._poll_requests(state, set(state.requests))
                self._poll_reclaims(state)
                self._polled = time.monotonic()
            now = time.time()
            self._expire(state, now)
            if msgspec.json.encode(state) != before:
                self.files.save(state)
            listed = [_instance(r, self.cluster, now) for r in state.instances.values()]
        return sorted(listed, key=lambda i: (i.started, i.id))

    # ------------------------------------------------------------ polling
    def _poll_requests(self, state: ScriptState, request_ids: set[str]) -> None:
        """getRequestStatus for these open requests; their machines' news applied."""
        if not request_ids:
            return
        asked = sorted(request_ids, key=lambda rid: (state.requests[rid].created, rid))
        answer = self.scripts.call("getRequestStatus",
                                   {"requests": [{"requestId": rid} for rid in asked]})
        at = self._at("getRequestStatus")
        late: list[MachineRecord] = []  # released before their machine was reported
        surplus: list[Machine] = []  # more machines than hosts
        for index, item in enumerate(_items(answer, "requests", at)):
            here = at.key("requests").index(index)
            entry = _object(item, here)
            rid = _text(entry, "requestId", here)
            status = _choice(entry, "status", REQUEST_STATUSES, here)
            machines = [_machine(m, here.key("machines").index(i))
                        for i, m in enumerate(_items(entry, "machines", here, required=False))]
            record = state.requests.get(rid)
            if record is None or rid not in request_ids:
                continue
            record.message = str(entry.get("message", "") or record.message)
            if record.kind == "create":
                self._apply_create(state, record, status, machines, late, surplus)
            else:
                self._apply_return(state, record, status, machines)
        if late or surplus:
            self._return(state, late, surplus)

    def _apply_create(self, state: ScriptState, request: RequestRecord, status: str,
                      machines: Sequence[Machine], late: list[MachineRecord],
                      surplus: list[Machine]) -> None:
        now = time.time()
        records = [state.instances[i] for i in request.instances if i in state.instances]
        by_machine = {r.machine_id: r for r in records if r.machine_id}
        unmatched = {r.host: r for r in records if not r.machine_id}
        executing = False
        for machine in machines:
            record = by_machine.get(machine.machine_id)
            if record is None:  # a new machine: its host by name, else the next in order
                record = unmatched.pop(machine.name, None)
                if record is None and unmatched:
                    record = unmatched.pop(next(iter(unmatched)))
                if record is None:
                    if machine.result != "fail" and machine.machine_id not in request.machines:
                        surplus.append(machine)
                        request.machines.append(machine.machine_id)
                    continue
                record.machine_id = machine.machine_id
                by_machine[machine.machine_id] = record
            record.machine_name = machine.name
            record.result, record.status = machine.result, machine.status
            record.address = machine.address or record.address
            record.message = machine.message or record.message
            executing = executing or machine.result == "executing"
            if record.state in ALIVE:
                if machine.result == "fail":
                    _move(record, MachineState.FAILED, now)
                    log.warning("provider %s: the machine %s of %s failed: %s", self.name,
                                machine.machine_id, record.host, machine.message or "-")
                else:
                    _move(record, MachineState.RUNNING if machine.result == "succeed"
                          else MachineState.EXECUTING)
            elif record.state == MachineState.RELEASED:
                if machine.result == "fail":
                    _move(record, MachineState.FAILED)
                elif not record.return_request and record not in late:
                    late.append(record)
        if status == "running" or executing:
            return
        for record in records:  # the request ended: hosts without a machine get none
            if record.machine_id:
                continue
            if record.state in ALIVE:
                _move(record, MachineState.FAILED, now)
                record.message = (f"request {request.id} ended {status} with no machine for "
                                  f"it" + (f": {request.message}" if request.message else ""))
                log.warning("provider %s: %s", self.name, record.message)
            elif record.state == MachineState.RELEASED:
                _move(record, MachineState.RETURNED, now)
        del state.requests[request.id]

    def _apply_return(self, state: ScriptState, request: RequestRecord, status: str,
                      machines: Sequence[Machine]) -> None:
        now = time.time()
        records = {state.instances[i].machine_id: state.instances[i]
                   for i in request.instances if i in state.instances}
        executing = False
        for machine in machines:
            record = records.get(machine.machine_id)
            if machine.result == "executing":
                executing = True
            elif record is not None and record.state == MachineState.RETURNING:
                if machine.result == "succeed":
                    _move(record, MachineState.RETURNED)
                else:
                    _move(record, MachineState.RETURN_FAILED)
                    record.message = machine.message or "the plugin could not return it"
                    log.warning("provider %s: the machine %s of %s was not returned: %s",
                                self.name, machine.machine_id, record.host, record.message)
                record.ended = now
        if status == "running" or executing:
            return
        for record in records.values():  # ended: those it did not list, as its status says
            if record.state == MachineState.RETURNING:
                _move(record, MachineState.RETURNED if status == "complete"
                      else MachineState.RETURN_FAILED, now)
        del state.requests[request.id]

    def _return(self, state: ScriptState, records: Sequence[MachineRecord],
                surplus: Sequence[Machine]) -> None:
        """One requestReturnMachines for these machines; saved at once (a return asked
        for must not be forgotten)."""
        machines = [{"name": r.machine_name or r.host, "machineId": r.machine_id}
                    for r in records]
        machines += [{"name": m.name, "machineId": m.machine_id} for m in surplus]
        answer = self.scripts.call("requestReturnMachines", {"machines": machines})
        rid = _text(answer, "requestId", self._at("requestReturnMachines"))
        now = time.time()
        state.requests[rid] = RequestRecord(
            rid, "return", [r.id for r in records], [m["machineId"] for m in machines],
            created=now, message=str(answer.get("message", "")))
        for record in records:
            _move(record, MachineState.RETURNING, record.ended or now)
            record.return_request = rid
        self.files.save(state)
        if surplus:
            log.warning("provider %s: returned machines no host asked for: %s", self.name,
                        ", ".join(m.machine_id for m in surplus))
        log.info("provider %s: returning %s: plugin request %s", self.name,
                 ", ".join(m["machineId"] for m in machines), rid)

    def _poll_reclaims(self, state: ScriptState) -> None:
        """getReturnRequests about the running machines: those it lists are taken back
        once their gracePeriod (seconds from now) has passed."""
        if not self.scripts.has("getReturnRequests"):
            return
        watched = [r for r in state.instances.values()
                   if r.state in ALIVE and r.machine_id and not r.reclaim_at]
        if not watched:
            return
        answer = self.scripts.call("getReturnRequests", {"machines": [
            {"name": r.machine_name or r.host, "machineId": r.machine_id} for r in watched]})
        at = self._at("getReturnRequests")
        by_id = {r.machine_id: r for r in watched}
        by_name = {r.machine_name or r.host: r for r in watched}
        now = time.time()
        for index, item in enumerate(_items(answer, "requests", at, required=False)):
            here = at.key("requests").index(index)
            entry = _object(item, here)
            machine_id = entry.get("machineId")
            record = by_id.get(machine_id) if isinstance(machine_id, str) else None
            if record is None:
                record = by_name.get(_text(entry, "machine", here))
            if record is None:
                continue
            grace = _number(entry.get("gracePeriod", 0), here.key("gracePeriod"))
            record.reclaim_at = now + max(0.0, grace)
            record.message = f"taken back by the provider (gracePeriod {grace:g} s)"
            log.warning("provider %s: the provider takes %s (machine %s) back in %g s",
                        self.name, record.host, record.machine_id, grace)

    def _expire(self, state: ScriptState, now: float) -> None:
        """Machines whose reclaim time passed are gone; gone records of more than
        KEEP_GONE seconds are forgotten."""
        for record in state.instances.values():
            if record.state in ALIVE and record.reclaim_at and now >= record.reclaim_at:
                _move(record, MachineState.RECLAIMED, record.reclaim_at)
        referenced = {i for r in state.requests.values() for i in r.instances}
        for key, record in list(state.instances.items()):
            if (record.state not in ALIVE and record.ended and now - record.ended > KEEP_GONE
                    and key not in referenced):
                del state.instances[key]

    # ------------------------------------------------------------ tokens
    def borrow(self, pool: str, amount: float) -> float:
        raise ProviderError("request", f"provider {self.name} lends no tokens (pool {pool})")

    def lent(self) -> dict[str, float]:
        """It lends no tokens."""
        return {}

    def give_back(self, pool: str, amount: float) -> None:
        raise ProviderError("request", f"provider {self.name} lends no tokens (pool {pool})")

    # ------------------------------------------------------------ helpers
    def _at(self, script: str) -> At:
        return At(f"provider {self.name}: {self.scripts.paths[script].name}")

    def _id(self, host: str) -> str:
        return f"{self.name}-{host}"

    def _template_id(self, template: str) -> str:
        return offered_template(self.template_ids, template, f"template {template}: not a "
                                f"template of provider {self.name}", "its templates")


def from_spec(spec: ProviderSpec, context: ProviderContext) -> ScriptProvider:
    """A script provider of the providers file: its scripts in scriptPath, its
    configuration (the plugin's PRO_CONF_DIR, and XCE's scriptconf) in confPath, its
    files in `WORK/<name>/`."""
    scripts = find_scripts(spec.script_path, spec.file, spec.line, spec.name)
    served = [t.name for t in context.cluster.catalog.templates if t.provider == spec.name]
    conf = load_script_conf(spec.conf_path, spec.file, spec.line, spec.name, served)
    return ScriptProvider(spec.name, context.cluster.cluster, served, context.controller,
                          Path(spec.conf_path), scripts, Path(context.work_dir) / spec.name,
                          conf)


# ---------------------------------------------------------------- what scripts answer
class At:
    """A place in a script's answer, for error messages:
    `provider rc: getRequestStatus.sh: requests[0].machines[1].result: ...`."""

    def __init__(self, script: str, path: str = "") -> None:
        self.script = script
        self.path = path

    def key(self, key: str) -> At:
        return At(self.script, f"{self.path}.{key}" if self.path else key)

    def index(self, index: int) -> At:
        return At(self.script, f"{self.path}[{index}]")

    def fail(self, message: str) -> NoReturn:
        where = f"{self.script}: {self.path}" if self.path else self.script
        raise ProviderError("unavailable", f"{where}: {message}")


def _move(record: MachineRecord, target: MachineState, ended: float | None = None) -> None:
    """`record`'s machine becomes `target` (if it is not already), as its table allows
    (TransitionError otherwise: a bug); `ended`: when it was last seen alive."""
    if record.state != target:
        why = MACHINE_LIFE.reason_for(record.host, record.state, target)
        log.debug("machine of host %s: %s -> %s (%s)", record.host, record.state, target, why)
        record.state = target
    if ended is not None:
        record.ended = ended


def _instance(record: MachineRecord, cluster: str, now: float) -> Instance:
    alive = record.state in ALIVE and not (record.reclaim_at and now >= record.reclaim_at)
    return Instance(id=record.id, cluster=cluster, template=record.template,
                    request=record.request, host=record.host,
                    state="running" if alive else "gone", started=record.started,
                    reclaim_at=record.reclaim_at or None)


def _offer(entry: object, at: At, names: Mapping[str, str], lead_time: float) -> TemplateOffer:
    """A template of getAvailableTemplates as XCE describes it: `ncpus` (else `ncores`)
    is the slots, `type` the type, other Numeric and Boolean attributes resources."""
    entry = _object(entry, at)
    template_id = _text(entry, "templateId", at)
    maximum = _number(entry.get("maxNumber", 0), at.key("maxNumber"))
    attributes = _object(entry.get("attributes", {}), at.key("attributes"))
    shape: dict[str, str] = {"type": "X86_64", "model": ""}
    numbers: dict[str, float] = {}
    resources: dict[str, ResourceValue] = {}
    for key, spec in attributes.items():
        here = at.key("attributes").key(key)
        if (not isinstance(spec, list) or len(spec) != 2 or not isinstance(spec[0], str)
                or not isinstance(spec[1], str | int | float)):
            here.fail(f'expected ["Type", "value"], got {spec!r}')
        kind, value = spec[0].lower(), str(spec[1])
        if kind == "string":
            if key in shape:
                shape[key] = value
        elif kind == "numeric":
            numbers[key] = _number(value, here)
            if key not in ("ncpus", "ncores"):
                resources[key] = numbers[key]
        elif kind == "boolean":
            if value.lower() not in ("0", "1", "true", "false"):
                here.fail(f"expected a Boolean of 1 or 0, got {value!r}")
            resources[key] = value.lower() in ("1", "true")
        else:
            here.fail(f"unknown attribute type {spec[0]!r} (String, Numeric, Boolean)")
    slots = numbers.get("ncpus", numbers.get("ncores", 1.0))
    if slots < 1 or slots != int(slots):
        at.key("attributes").key("ncpus").fail(
            f"expected a whole number of CPUs, got {slots:g}")
    return TemplateOffer(name=names.get(template_id, template_id), slots=int(slots),
                         type=shape["type"], model=shape["model"], resources=resources,
                         max=int(maximum), lead_time=lead_time)


def _machine(entry: object, at: At) -> Machine:
    entry = _object(entry, at)
    return Machine(
        machine_id=_text(entry, "machineId", at),
        name=str(entry.get("name") or ""),
        result=_choice(entry, "result", RESULTS, at),
        status=str(entry.get("status") or ""),
        address=str(entry.get("privateIpAddress") or ""),
        message=str(entry.get("message") or ""),
    )


def _object(value: object, at: At) -> dict[str, Any]:
    if not isinstance(value, dict):
        at.fail(f"expected an object, got {value!r}")
    return value


def _items(value: Mapping[str, Any], key: str, at: At, required: bool = True) -> list[object]:
    items = value.get(key)
    if items is None and not required:
        return []
    if not isinstance(items, list):
        at.key(key).fail(f"expected a list, got {items!r}")
    return items


def _text(value: Mapping[str, Any], key: str, at: At) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text:
        at.key(key).fail(f"expected a non-empty string, got {text!r}")
    return text


def _choice(value: Mapping[str, Any], key: str, choices: Sequence[str], at: At) -> str:
    text = value.get(key)
    if text not in choices:
        at.key(key).fail(f"expected one of {', '.join(choices)}, got {text!r}")
    return str(text)


def _number(value: object, at: At) -> float:
    """A number, also written as a string (LSF templates write "4")."""
    number = math.nan
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            number = float(value)
    if not math.isfinite(number):
        at.fail(f"expected a number, got {value!r}")
    return number


def _failure(stdout: bytes, stderr: bytes) -> str:
    """What a failed script said: the `error` or `message` of a JSON answer on stdout
    (LSF plugins write their error there), else stdout's tail; and stderr's tail."""
    said = stdout.decode(errors="replace").strip()
    with contextlib.suppress(ValueError):
        answer = json.loads(said)
        if isinstance(answer, dict):
            for key in ("error", "message"):
                if isinstance(answer.get(key), str) and answer[key]:
                    said = answer[key]
                    break
    parts = [_tail(said)] if said else []
    if stderr.strip():
        parts.append(f"stderr: {_tail(stderr.decode(errors='replace'))}")
    return "; ".join(parts) or "no output"


def _shown(stdout: bytes, stderr: bytes) -> str:
    shown = repr(_tail(stdout.decode(errors="replace"))) if stdout.strip() else "nothing"
    if stderr.strip():
        shown += f"; stderr: {_tail(stderr.decode(errors='replace'))}"
    return shown


def _tail(text: str) -> str:
    """The end of a script's output, on one line."""
    flat = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= TAIL else "..." + flat[-TAIL:]
