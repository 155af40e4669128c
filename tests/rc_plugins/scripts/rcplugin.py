"""A test plugin speaking the LSF resource connector protocol, for XCE's `script`
provider (docs/providers/script.md). Its "machines" are `xce agent` processes on this
machine, each joining as the expected host XCE passed in `xce.hosts` of requestMachines.

Run by the five `*.sh` next to it as `rcplugin.py SCRIPT -f INPUT.json`; standard
library only (the wrappers run it with `python3 -S`, or `$RC_PYTHON -S`).

Configuration, in PRO_CONF_DIR (LSF's layout: `<confPath>/conf/<prov>_templates.json`):

    conf/rcplugin_templates.json  {"templates": [...]}: templateId, maxNumber, attributes
                                  (ncpus is the agent's --slots), and per template
                                  "rcTest" (LSF ignores unknown keys):
                                    failMachines: [N] the template's Nth machine (1 is
                                                      its first ever) fails: its request
                                                      completes with error
                                    bootSeconds: S    machines stay `executing` S seconds
                                                      before their agent starts
                                    hiddenSeconds: S  getRequestStatus lists no machine of
                                                      a request for S seconds
                                    anonymous: true   machines named vm-<id>, not after
                                                      their XCE host
                                    requestError: M   requestMachines fails with M
    conf/rcplugin_config.json     {"xceCommand": [".../xce"], "stopGrace": 5}
    faults.json                   {"<script>": "garbage" | "exit" | "hang" | "bad"}
    reclaim                       lines "NAME-or-machineId [GRACE]": getReturnRequests
                                  reports those machines taken back (GRACE s from now,
                                  default 0); the "cloud" kills them when it passes

State in PRO_DATA_DIR (rcplugin.json, locked by rcplugin.lock; machines/<id>/ holds each
machine's join.token, agent.log and agent state dir); one JSON line per call in
PRO_LSF_LOGDIR/rcplugin.log (the input with its tokens hidden, the input file's mode,
the LSF variables it saw).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

State = dict[str, Any]
ENV_SEEN = ("PROVIDER_NAME", "PRO_CONF_DIR", "PRO_DATA_DIR", "PRO_LSF_LOGDIR",
            "XCE_CONTROLLER", "XCE_CLUSTER", "XCE_REQUEST", "XCE_TEMPLATE", "SCRIPT_OPTIONS")


class Failure(Exception):
    """The call fails: exit 1 with {"error": ...} on stdout (LSF's convention)."""


class Plugin:
    def __init__(self) -> None:
        try:
            self.conf = Path(os.environ["PRO_CONF_DIR"])
            self.data = Path(os.environ["PRO_DATA_DIR"])
            self.logs = Path(os.environ["PRO_LSF_LOGDIR"])
        except KeyError as err:
            raise Failure(f"{err.args[0]} is not set") from None
        self.now = time.time()
        self.settings: dict[str, Any] = read_json(self.conf / "conf" / "rcplugin_config.json",
                                                  {})
        self.templates: list[dict[str, Any]] = read_json(
            self.conf / "conf" / "rcplugin_templates.json", {"templates": []})["templates"]

    # ------------------------------------------------------------ the five scripts
    def get_available_templates(self, _input: dict[str, Any], _state: State) -> dict[str, Any]:
        return {"templates": self.templates, "message": "", "extra": "ignored by XCE"}

    def request_machines(self, given: dict[str, Any], state: State) -> dict[str, Any]:
        template_id = given["template"]["templateId"]
        count = int(given["template"]["machineCount"])
        template = next((t for t in self.templates if t["templateId"] == template_id), None)
        if template is None:
            raise Failure(f"unknown template {template_id}")
        test: dict[str, Any] = template.get("rcTest", {})
        if test.get("requestError"):
            raise Failure(str(test["requestError"]))
        xce = given.get("xce")
        if not xce or len(xce["hosts"]) != count:
            raise Failure("requestMachines needs one host per machine in xce.hosts")
        alive = [m for m in state["machines"].values()
                 if m["template"] == template_id and not m["failed"] and not m["returned"]
                 and not m["reclaimedAt"]]
        maximum = int(template.get("maxNumber", 0))
        if maximum and len(alive) + count > maximum:
            raise Failure(f"template {template_id}: maxNumber {maximum} reached "
                          f"({len(alive)} machines)")
        request = f"req-{uuid.uuid4().hex[:12]}"
        boot = float(test.get("bootSeconds", 0))
        fail_at = {int(n) for n in test.get("failMachines", [])}
        before = sum(1 for m in state["machines"].values() if m["template"] == template_id)
        slots = template["attributes"].get("ncpus", ["Numeric", "1"])[1]
        made = []
        for index, host in enumerate(xce["hosts"]):
            machine_id = f"m-{uuid.uuid4().hex[:10]}"
            machine = {
                "machineId": machine_id, "host": host["name"], "template": template_id,
                "name": f"vm-{machine_id}" if test.get("anonymous") else host["name"],
                "request": request, "launchtime": int(self.now), "readyAt": self.now + boot,
                "failed": before + index + 1 in fail_at, "returned": False, "reclaimedAt": 0,
                "reclaimNoticed": 0, "pid": 0, "start": 0,
            }
            if not machine["failed"]:
                self._boot(machine, xce["controller"], host["joinToken"], str(slots), boot)
            state["machines"][machine_id] = machine
            made.append(machine_id)
        state["requests"][request] = {
            "kind": "create", "machines": made, "created": self.now,
            "hiddenUntil": self.now + float(test.get("hiddenSeconds", 0)),
        }
        return {"requestId": request, "message": f"{count} machine(s) of {template_id}"}

    def request_return_machines(self, given: dict[str, Any], state: State) -> dict[str, Any]:
        request = f"ret-{uuid.uuid4().hex[:12]}"
        returned = []
        for entry in given["machines"]:
            machine = state["machines"].get(entry["machineId"])
            if machine is not None:
                machine["returned"] = True
                signal_machine(machine, signal.SIGTERM)
            returned.append(entry["machineId"])
        state["requests"][request] = {
            "kind": "return", "machines": returned, "created": self.now,
            "killAt": self.now + float(self.settings.get("stopGrace", 5)),
        }
        return {"requestId": request, "message": f"returning {len(returned)} machine(s)"}

    def get_request_status(self, given: dict[str, Any], state: State) -> dict[str, Any]:
        answers = []
        for asked in given["requests"]:
            request = state["requests"].get(asked["requestId"])
            if request is None:
                answers.append({"requestId": asked["requestId"], "status": "complete_with_error",
                                "message": "no such request", "machines": []})
                continue
            if request["kind"] == "create":
                hidden = self.now < request["hiddenUntil"]
                machines = [] if hidden else [self._made(state["machines"][m])
                                              for m in request["machines"]]
            else:
                machines = [self._returned(state["machines"].get(m), m, request)
                            for m in request["machines"]]
            results = {m["result"] for m in machines}
            status = ("running" if "executing" in results or (request["kind"] == "create"
                                                               and not machines)
                      else "complete_with_error" if "fail" in results else "complete")
            answers.append({"requestId": asked["requestId"], "status": status,
                            "message": "", "machines": machines})
        return {"requests": answers}

    def get_return_requests(self, given: dict[str, Any], state: State) -> dict[str, Any]:
        triggers: dict[str, float] = {}
        with contextlib.suppress(FileNotFoundError):
            for line in (self.conf / "reclaim").read_text().splitlines():
                if line.split():
                    name, *rest = line.split()
                    triggers[name] = float(rest[0]) if rest else 0.0
        taken = []
        for entry in given.get("machines", []):
            machine = state["machines"].get(entry.get("machineId"))
            if machine is None:
                continue
            grace = triggers.get(machine["name"], triggers.get(machine["machineId"]))
            if grace is None or machine["returned"]:
                continue
            if not machine["reclaimNoticed"]:  # the cloud will take it at notice + grace
                machine["reclaimNoticed"] = self.now
                machine["reclaimedAt"] = self.now + grace
                kill_later(machine, grace)
            left = max(0.0, machine["reclaimedAt"] - self.now)
            taken.append({"machine": machine["name"], "machineId": machine["machineId"],
                          "gracePeriod": math.ceil(left)})
        return {"status": "complete", "message": "", "requests": taken}

    # ------------------------------------------------------------ machines
    def _boot(self, machine: dict[str, Any], controller: str, token: str, slots: str,
              boot: float) -> None:
        """The machine boots for `boot` seconds, then runs its agent (in a session of
        its own, so it outlives this script)."""
        home = self.data / "machines" / machine["machineId"]
        home.mkdir(mode=0o700, parents=True)
        token_file = home / "join.token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(token + "\n")
        command = [*self.settings["xceCommand"], "agent", "--controller", controller,
                   "--name", machine["host"], "--token-file", str(token_file),
                   "--slots", slots, "--state-dir", str(home / "agent"), "--kill-grace", "2"]
        with open(home / "agent.log", "ab") as log:
            child = subprocess.Popen(
                ["/bin/sh", "-c", 'sleep "$0" && exec "$@"', f"{boot:g}", *command],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=home,
                start_new_session=True,
            )
        machine["pid"], machine["start"] = child.pid, start_time(child.pid)

    def _made(self, machine: dict[str, Any]) -> dict[str, Any]:
        """A machine of a create request, as getRequestStatus shows it."""
        view = {"machineId": machine["machineId"], "name": machine["name"],
                "privateIpAddress": "127.0.0.1", "launchtime": machine["launchtime"],
                "rcAccount": "default", "message": ""}
        if machine["failed"]:
            return {**view, "result": "fail", "status": "terminated",
                    "message": "simulated failure (rcTest failMachines)"}
        taken = machine["reclaimedAt"] and self.now >= machine["reclaimedAt"]
        if machine["returned"] or taken:
            return {**view, "result": "fail", "status": "terminated"}
        if self.now < machine["readyAt"]:
            return {**view, "result": "executing", "status": "pending"}
        if alive(machine):
            return {**view, "result": "succeed", "status": "running"}
        return {**view, "result": "fail", "status": "terminated",
                "message": "its agent is not running"}

    def _returned(self, machine: dict[str, Any] | None, machine_id: str,
                  request: dict[str, Any]) -> dict[str, Any]:
        """A machine of a return request: executing until its agent has ended (SIGKILL
        once the request's stop grace has passed)."""
        if machine is None:
            return {"machineId": machine_id, "name": "", "result": "fail", "status": "unknown",
                    "message": "no such machine"}
        view = {"machineId": machine_id, "name": machine["name"],
                "privateIpAddress": "127.0.0.1", "message": ""}
        if alive(machine):
            if self.now >= request["killAt"]:
                signal_machine(machine, signal.SIGKILL)
            return {**view, "result": "executing", "status": "shutting-down"}
        return {**view, "result": "succeed", "status": "terminated"}


# ---------------------------------------------------------------- processes
def start_time(pid: int) -> int:
    """Field 22 of /proc/PID/stat (0 when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def alive(machine: dict[str, Any]) -> bool:
    """The machine's agent (or its boot shell) still runs: same pid and start time, not
    a zombie."""
    pid = machine["pid"]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return pid > 0 and fields[0] != "Z" and int(fields[19]) == machine["start"]


def signal_machine(machine: dict[str, Any], sig: int) -> None:
    if alive(machine):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(machine["pid"], sig)


def kill_later(machine: dict[str, Any], grace: float) -> None:
    """The cloud takes the machine back `grace` seconds from now."""
    if grace <= 0:
        signal_machine(machine, signal.SIGKILL)
    elif alive(machine):
        subprocess.Popen(["/bin/sh", "-c", 'sleep "$0"; kill -KILL -"$1"', f"{grace:g}",
                          str(machine["pid"])], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)


# ---------------------------------------------------------------- files
def read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


@contextlib.contextmanager
def locked_state(data: Path) -> Iterator[State]:
    data.mkdir(parents=True, exist_ok=True)
    fd = os.open(data / "rcplugin.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = data / "rcplugin.json"
        state: State = read_json(path, {"machines": {}, "requests": {}})
        yield state
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, path)
    finally:
        os.close(fd)


def log_call(plugin: Plugin, script: str, argv: list[str], given: Any, mode: int) -> None:
    hidden = json.loads(json.dumps(given))
    xce = hidden.get("xce") if isinstance(hidden, dict) else None
    for host in (xce or {}).get("hosts", []):
        host["joinToken"] = "***"
    line = {"time": plugin.now, "script": script, "argv": argv, "input": hidden,
            "inputMode": oct(mode), "env": {k: os.environ[k] for k in ENV_SEEN
                                            if k in os.environ}}
    plugin.logs.mkdir(parents=True, exist_ok=True)
    with open(plugin.logs / "rcplugin.log", "a") as log:
        log.write(json.dumps(line) + "\n")


def main(argv: list[str]) -> int:
    script, args = argv[1], argv[2:]
    try:
        if len(args) != 2 or args[0] != "-f":
            raise Failure(f"usage: {script}.sh -f INPUT.json")
        plugin = Plugin()
        given = read_json(Path(args[1]), None)
        log_call(plugin, script, args, given, os.stat(args[1]).st_mode & 0o777)
        fault = read_json(plugin.conf / "faults.json", {}).get(script)
        if fault == "garbage":
            print("Traceback (most recent call last): this is not JSON")
            return 0
        if fault == "bad":  # JSON, but not what the protocol says
            print(json.dumps({"requests": [{"requestId": 7, "status": "done"}],
                              "templates": [{"templateId": "x", "attributes": {"ncpus": 4}}]}))
            return 0
        if fault == "exit":
            raise Failure(f"{script}: the cloud said no (simulated)")
        if fault == "hang":
            time.sleep(60)
        handlers: dict[str, Callable[[dict[str, Any], State], dict[str, Any]]] = {
            "getAvailableTemplates": plugin.get_available_templates,
            "requestMachines": plugin.request_machines,
            "requestReturnMachines": plugin.request_return_machines,
            "getRequestStatus": plugin.get_request_status,
            "getReturnRequests": plugin.get_return_requests,
        }
        with locked_state(plugin.data) as state:
            answer = handlers[script](given, state)
        print(json.dumps(answer))
        return 0
    except Failure as err:
        print(json.dumps({"error": str(err)}))
        print(f"rcplugin {script}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
