"""Latency from a job becoming pending with provisionable demand to the provider
request (issue: the resource provisioner). Target: at most one session interval plus
the persistence threshold plus 1 s.

A real controller (session_interval 1 s) and a real provisioner (policy persistence
2 s, rounds every 0.5 s, the local provider) on loopback; a job that only a template
can hold is submitted and the time until the local provider has started the instance
(its record appears in the work directory) is measured. Median of several runs.

Run: python bench/bench_provision_latency.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import machine

XCE = [str(Path(sys.executable).with_name("xce"))]
INTERVAL, PERSISTENCE = 1.0, 2.0
CONFIG = f"""\
cluster: latency
session_interval: {INTERVAL}
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  templates:
    - {{name: loc, provider: local, slots: 4, max: 2}}
policy:
  persistence: {PERSISTENCE}
"""


def wait(probe, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for {what}")


def one_run(root: Path) -> float:
    state, work = root / "state", root / "work"
    (root / "cluster.yaml").write_text(CONFIG)
    subprocess.run([*XCE, "init", "--state", str(state)], check=True, capture_output=True)
    subprocess.run([*XCE, "token", "add", "--state", str(state), "--role", "provisioner",
                    "--name", "prov", "--out", str(root / "prov.token")], check=True,
                   capture_output=True)
    procs = [subprocess.Popen(
        [*XCE, "controller", "--config", str(root / "cluster.yaml"), "--state", str(state),
         "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)]
    try:
        url = wait(lambda: (state / "controller.url").exists()
                   and (state / "controller.url").read_text().strip(), 20, "the controller")
        procs.append(subprocess.Popen(
            [*XCE, "provisioner", "run", "--controller", url, "--token-file",
             str(root / "prov.token"), "--config", str(root / "cluster.yaml"), "--work",
             str(work), "--interval", "0.5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        token = (state / "admin.token").read_text().strip()
        time.sleep(1.5)  # the provisioner is up and has its lease
        request = urllib.request.Request(
            f"{url}/jobs", method="POST", headers={"Authorization": f"Bearer {token}"},
            data=json.dumps({"command": ["true"], "n": 4}).encode())
        started = time.monotonic()
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 201
        instances = work / "instances"
        wait(lambda: instances.exists() and any(instances.iterdir()), 30, "the provider request")
        return time.monotonic() - started
    finally:
        for proc in reversed(procs):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        for pid in Path("/proc").iterdir():  # the agent the local provider started
            try:
                if str(work).encode() in (pid / "cmdline").read_bytes():
                    os.kill(int(pid.name), signal.SIGKILL)
            except (OSError, ValueError):
                continue


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    bound = INTERVAL + PERSISTENCE + 1.0
    times = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
            times.append(one_run(Path(tmp)))
    median = statistics.median(times)
    print(f"session_interval {INTERVAL:g} s, persistence {PERSISTENCE:g} s, rounds every 0.5 s")
    print(f"  pending -> provider request: median {median:.2f} s "
          f"({', '.join(f'{t:.2f}' for t in times)}); target <= {bound:g} s: "
          f"{'met' if median <= bound else 'MISSED'}")


if __name__ == "__main__":
    main()
