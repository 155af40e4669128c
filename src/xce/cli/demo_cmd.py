"""`xce demo`: the whole elastic loop on this machine, on the embedded default.

In a temporary directory: a controller (SQLite state, loopback), two static agents,
two provisioner instances with the local provider (one holds the lease, the other
stands by); a burst of real jobs the static hosts cannot hold and some license-bound
jobs. The terminal shows demand appearing, hosts requested, joining and running
jobs, tokens borrowed, and idle hosts drained and going away; a summary at the end.
Every process it started is stopped before it returns.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from xce.cli.client import Client, session_demand
from xce.controller.auth import TokenStore
from xce.model.api import SubmitRequest

CONFIG = """\
cluster: demo
session_interval: 1
resources:
  vcs: {{type: numeric, consumable: true, shared: true}}
hosts:
  - {{name: static1, slots: 2}}
  - {{name: static2, slots: 2}}
shared:
  vcs: {{total: 0}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  idle_time: {idle}
  templates:
    - {{name: local.small, provider: local, slots: 4, max: 4, rank: 1}}
  countables:
    - {{resource: vcs, max_borrow: 2, idle_time: {idle}}}
policy:
  persistence: 1
  max_lifetime: 0
"""


class Demo:
    def __init__(self, root: Path, console: Console) -> None:
        self.root = root
        self.console = console
        self.state = root / "state"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.client: Client | None = None
        self.xce = [str(Path(sys.executable).with_name("xce"))]
        if not Path(self.xce[0]).exists():
            self.xce = [sys.executable, "-c", "from xce.cli.main import main; main()"]

    def spawn(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen([*self.xce, *args], stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, cwd=self.root,
                                start_new_session=True)
        log.close()
        self.procs.append(proc)

    def token(self, role: str, name: str) -> Path:
        path = self.root / f"{name}.token"
        path.write_text(TokenStore(self.state).add(name, role) + "\n")
        path.chmod(0o600)
        return path

    @property
    def api(self) -> Client:
        assert self.client is not None, "the controller is not started"
        return self.client

    def start(self, idle: float) -> None:
        (self.root / "cluster.yaml").write_text(CONFIG.format(idle=idle))
        subprocess.run([*self.xce, "init", "--state", str(self.state)],  # admin: you
                       check=True, capture_output=True)
        self.spawn("controller", "controller", "--config", "cluster.yaml", "--state",
                   str(self.state), "--listen", "127.0.0.1:0", "--heartbeat-interval", "0.5")
        deadline = time.monotonic() + 30
        url_file = self.state / "controller.url"
        while not url_file.exists():
            if time.monotonic() > deadline:
                raise click.ClickException("the controller did not start (see its log)")
            time.sleep(0.05)
        url = url_file.read_text().strip()
        self.client = Client(url, (self.state / "admin.token").read_text().strip())
        for host in ("static1", "static2"):
            self.spawn(host, "agent", "--controller", url, "--name", host, "--slots", "2",
                       "--token-file", str(self.token("agent", host)),
                       "--state-dir", str(self.root / host))
        for name in ("prov-a", "prov-b"):
            self.spawn(name, "provisioner", "run", "--controller", url, "--token-file",
                       str(self.token("provisioner", name)), "--config", "cluster.yaml",
                       "--work", str(self.root / "local"), "--pool", "vcs=2", "--name", name,
                       "--interval", "0.5", "--lease-ttl", "5")

    def submit(self, jobs: int, seconds: float) -> list[int]:
        requests = [
            SubmitRequest(["sleep", f"{seconds + (i % 3):g}"], n=2, cwd=str(self.root),
                          name=f"burst{i + 1}")
            for i in range(jobs)
        ] + [
            SubmitRequest(["sleep", f"{seconds:g}"], res="rusage[vcs=1]", cwd=str(self.root),
                          name=f"license{i + 1}")
            for i in range(2)
        ]
        return [self.api.submit(request).job for request in requests]

    def view(self, started: float, seen: dict[str, set[str]]) -> Group:
        jobs = self.api.jobs("all").jobs
        hosts = self.api.hosts().hosts
        demand = session_demand(self.api.demand())
        pools = self.api.resources().resources
        for host in hosts:
            if host.template:
                seen["provisioned"].add(host.name)
        counts = {s: sum(j.state == s for j in jobs) for s in ("PEND", "RUN", "DONE", "EXIT")}
        head = Table.grid(padding=(0, 2))
        head.add_row(f"[bold]t+{time.monotonic() - started:4.0f} s[/]",
                     *(f"{s} {n}" for s, n in counts.items()),
                     "demand: " + (", ".join(f"{h.count} x {h.template}"
                                             for h in demand.hosts) or "-"),
                     "vcs borrowed: " + ", ".join(f"{p.borrowed:g}" for p in pools))
        table = Table("HOST", "STATUS", "TEMPLATE", "SLOTS", "USED", "JOBS", box=None)
        for host in hosts:
            table.add_row(host.name, host.status or host.state, host.template or "-",
                          str(host.slots), str(host.used), " ".join(map(str, host.jobs)))
        return Group(head, table)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        # Whatever the demo started is gone: agents of provisioned hosts, job shims.
        marker = str(self.root).encode()
        for pid in Path("/proc").iterdir():
            if pid.name.isdigit() and int(pid.name) != os.getpid():
                try:
                    if marker in (pid / "cmdline").read_bytes():
                        os.kill(int(pid.name), signal.SIGKILL)
                except OSError:
                    continue


@click.command("demo")
@click.option("--jobs", default=8, show_default=True, help="Jobs in the burst (2 slots each).")
@click.option("--seconds", type=float, default=4.0, show_default=True,
              help="How long each job runs (a little more for some).")
@click.option("--idle", type=float, default=4.0, show_default=True,
              help="Seconds before idle hosts and tokens are given back.")
@click.option("--timeout", type=float, default=150.0, show_default=True)
@click.option("--keep", is_flag=True, help="Keep the temporary directory (logs, state).")
def demo(jobs: int, seconds: float, idle: float, timeout: float, keep: bool) -> None:
    """The elastic loop end to end on this machine (about 20 seconds; --seconds and
    --idle stretch it)."""
    console = Console()
    with ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="xce-demo-"))
        if not keep:
            stack.callback(lambda: subprocess.run(["rm", "-rf", str(root)], check=False))
        run = Demo(root, console)
        stack.callback(run.stop)
        run.start(idle)
        time.sleep(2)  # agents register, one provisioner takes the lease
        started = time.monotonic()
        ids = run.submit(jobs, seconds)
        console.print(f"Submitted {len(ids)} jobs ({jobs} x 2 slots, 2 needing a vcs token) "
                      "to 2 static hosts of 2 slots; the local provider may start up to 4 "
                      "hosts of 4 slots.")
        seen: dict[str, set[str]] = {"provisioned": set()}
        done = False
        with Live(run.view(started, seen), console=console, refresh_per_second=4) as live:
            while time.monotonic() - started < timeout:
                time.sleep(0.5)
                live.update(run.view(started, seen))
                jobs_now = run.api.jobs("all").jobs
                hosts = run.api.hosts().hosts
                pools = run.api.resources().resources
                finished = all(j.state in ("DONE", "EXIT") for j in jobs_now)
                gone = not any(h.template for h in hosts)
                returned = all(p.borrowed == 0 and p.in_flight == 0 for p in pools)
                if finished and gone and returned and seen["provisioned"]:
                    done = True
                    break
        if not console.is_terminal:  # (rich leaves its last frame unended there: a log)
            console.line()
        final = run.api.jobs("all").jobs
        waits = [j.start_time - j.submit_time for j in final if j.start_time is not None]
        on = {h for j in final for h in j.exec_hosts}
        console.print(
            f"[bold]Summary[/]: {sum(j.state == 'DONE' for j in final)} of {len(final)} "
            f"jobs done; {len(seen['provisioned'])} hosts provisioned and released "
            f"({', '.join(sorted(seen['provisioned']))}); jobs ran on {len(on)} hosts; "
            f"wait mean {sum(waits) / max(len(waits), 1):.1f} s, "
            f"max {max(waits, default=0):.1f} s; "
            f"{time.monotonic() - started:.0f} s in all."
        )
        if keep:
            console.print(f"Logs and state kept in {root}")
        if not done:
            raise click.ClickException("the demo did not settle in time (see --keep logs)")
