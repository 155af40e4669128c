"""What a newcomer tries first, live: a second controller started on the state
directory of a running one (SQLite log) is refused at once with one clear line, and
the log stays the first one's; an agent given the controller as `host:port` (as every
client command takes it) registers; `xce hosts HOST` shows that host, as bhosts."""

from __future__ import annotations

import signal
from pathlib import Path

from live import live_cluster, skip_unless_linux

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 1}
"""


def test_a_second_controller_on_the_state_directory_is_refused(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        url = cluster.start_controller()
        pid = cluster.procs["controller"].pid
        second = cluster.run(
            "controller", "--config", str(cluster.config_path), "--state",
            str(cluster.state), "--listen", "127.0.0.1:0", check=False, timeout=30,
        )
        assert second.returncode == 1, second
        assert second.stderr.strip() == (
            f"Error: {cluster.state} is in use by another controller (pid {pid}): stop "
            "it first, or give this one its own --state"
        ), second.stderr
        assert (cluster.state / "controller.url").read_text().strip() == url, (
            "the running controller's address is left alone"
        )
        assert cluster.api("GET", "/jobs").status == 200, "the first one still serves"
        cluster.stop_controller(signal.SIGKILL)  # (the lock goes with the process)
        cluster.start_controller()


def test_an_agent_given_host_and_port_registers(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        url = cluster.start_controller()
        cluster.start_agent("n1", controller=url.removeprefix("http://"))
        assert cluster.host("n1")["state"] == "ok"
        shown = cluster.xce("hosts", "n1")
        assert shown.stdout.splitlines() == [
            "HOST_NAME  STATUS  MAX  NJOBS  RUN", "n1         ok        1      0    0"
        ], shown
        unknown = cluster.xce("hosts", "n1", "n9")
        assert (unknown.returncode, unknown.stderr.strip()) == (1, "xce: unknown host(s): n9")
        bad = cluster.run("agent", "--controller", "ftp://x:1", "--name", "n1",
                          "--token-file", str(cluster.tokens["n1"]), check=False)
        assert bad.returncode == 2, bad
        assert bad.stderr.strip().splitlines()[-1] == (
            "Error: Invalid value for --controller: the controller URL must start with "
            "http:// or https://: ftp://x:1"
        )


PROVISIONED = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 60
  templates:
    - {name: loc, provider: local, slots: 2, max: 1, rank: 1}
policy:
  persistence: 0
"""


def test_a_provisioner_given_a_relative_work_directory_starts_hosts_that_join(
    tmp_path: Path,
) -> None:
    # (The local provider's agents run in a directory of their own: a relative
    # --work once gave them a join token path they could not find.)
    with live_cluster(tmp_path, PROVISIONED, agents=()) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller()
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", "provider", "--name", "prov-a", "--interval", "0.3",
        ])
        job = cluster.submit(["true"], n=2)  # n1 has one slot: only a loc host fits
        done = cluster.wait_state(job, ("DONE", "EXIT"), timeout=60)
        assert done["state"] == "DONE", done
        assert list(done["exec_hosts"]) == ["loc-1"], done
