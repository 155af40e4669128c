"""The runaway of issue 18: wall time and peak memory of `xce sim run` on LLNL-Atlas with
an elastic cluster whose burst template could hold the whole machine.

With it, a scheduler that gives joined hosts back before the rest of a wide job's
hosts arrive livelocks: demand for 1,006 burst hosts, 50 requested per round, those
that joined reclaimed as idle, for ever. Each case runs `xce sim run CLUSTER
--workload LLNL-Atlas --first N --json` in its own process under an address-space
limit (RLIMIT_AS) and a wall timeout, so that a runaway shows as `MemoryError` or
`timeout` instead of hanging the machine. Peak RSS is the child's ru_maxrss.

Run: python bench/bench_runaway.py [CASE ...] [--memory-gb G] [--timeout S]
CASE is a number of jobs (`--first N`) or `all` (the whole trace); default: 2000 4000
8000 all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import machine

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
TRACE = TRACES / "LLNL-Atlas-2006-2.1-cln.swf.gz"
CASES = ("2000", "4000", "8000", "all")
GB = 1024**3

CLUSTER = Path(__file__).resolve().parents[1] / "examples" / "llnl-atlas-elastic.yaml"

# The child: limits its own address space, then runs the command line (sys.argv[2:]).
LIMITED = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
"""
CLI = LIMITED + """
sys.argv = ["xce", *sys.argv[2:]]
from xce.cli.main import main
main()
"""


@dataclass
class Outcome:
    """How a limited child process ended."""

    status: str  # "ok", "MemoryError", "timeout" or "failed (exit N): last line"
    wall: float  # s
    peak_rss_mb: float
    stdout: str

    def result(self) -> dict[str, Any]:
        """The JSON object the child printed last (a summary), or {} when it did not
        end well."""
        lines = self.stdout.strip().splitlines()
        return json.loads(lines[-1]) if self.status == "ok" and lines else {}


def run_limited(code: str, args: list[str], memory: int, timeout: float) -> Outcome:
    """Run `python -c code memory *args` with an address-space limit of `memory`
    bytes (the code sets it: see LIMITED) and a wall `timeout` (s): killed then."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(memory), *args], stdout=out, stderr=err
        )
        timed_out = False
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                child.kill()
                pid, status, usage = os.wait4(child.pid, 0)
                timed_out = True
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)  # (reaped here, not by Popen)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    return Outcome(_status(child.returncode, timed_out, stderr), wall,
                   usage.ru_maxrss / 1024, stdout)


def _status(code: int, timed_out: bool, stderr: str) -> str:
    if timed_out:
        return "timeout"
    if code == 0:
        return "ok"
    last = (stderr.strip().splitlines() or [""])[-1]
    if "MemoryError" in last:
        return "MemoryError"
    return f"failed (exit {code}): {last[:200]}"


def sim_args(cluster: Path, case: str) -> list[str]:
    """`xce sim run` arguments of one case."""
    args = ["sim", "run", str(cluster), "--workload", str(TRACE), "--json"]
    return args if case == "all" else [*args, "--first", case]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", default=list(CASES),
                        help="numbers of jobs (--first N) or `all`")
    parser.add_argument("--memory-gb", type=float, default=6.0,
                        help="address-space limit of each run (RLIMIT_AS), GB")
    parser.add_argument("--timeout", type=float, default=300.0, help="wall limit, s")
    args = parser.parse_args()
    for case in args.cases:
        if case != "all" and not case.isdigit():
            parser.error(f"case: expected a number of jobs or 'all', got {case!r}")
    print(f"machine: {machine()}")
    print(f"limits: {args.memory_gb:g} GB address space, {args.timeout:g} s wall")
    print("| jobs | outcome | finished | hosts requested | sessions | wall s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Path(tmp) / "cluster.yaml"
        cluster.write_text(CLUSTER.read_text())
        for case in args.cases:
            outcome = run_limited(CLI, sim_args(cluster, case),
                                  int(args.memory_gb * GB), args.timeout)
            s = outcome.result()
            print(f"| {case} | {outcome.status} | {s.get('finished', '-')}/{s.get('jobs', '-')} "
                  f"| {s.get('hosts_requested', '-')} | {s.get('sessions', '-')} "
                  f"| {outcome.wall:.1f} | {outcome.peak_rss_mb:.0f} |", flush=True)


if __name__ == "__main__":
    main()
