"""The `local` provider with real processes: it describes the cluster's local templates,
starts one `xce agent` per expected host that joins a real controller as that host and
runs jobs, keeps its instances across a restart of the provisioner (a new object on the
same work directory), refuses beyond a template's `max`, releases by stopping the agent,
and lends tokens of local pools.

Jobs that need a local host ask for `select[local]`: the static host n1 never has it.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from live import LiveCluster, live_cluster, pid_alive, skip_unless_linux, wait_for

from xce.config import load_config_text
from xce.provisioner.provider import (
    HostGrant,
    Instance,
    PoolOffer,
    Provider,
    ProviderError,
    TemplateOffer,
)
from xce.provisioner.providers.local import LocalProvider, local_config
from xce.provisioner.providers.local_files import LocalFiles
from xce.provisioner.providers.processes import Process, spawn, stop_groups

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  local: {type: boolean}
  scratch: {type: numeric}
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: loc, provider: local, slots: 2, max: 2, resources: {local: true, scratch: 500}}
    - {name: aws.c5, provider: aws, slots: 16, max: 5}
"""
LOCAL = "select[local]"
POOLS = {"vcs": 3.0}


def provider(root: Path, controller: str = "http://127.0.0.1:1") -> LocalProvider:
    """A local provider of CONFIG's cluster, working in root/local."""
    return LocalProvider(local_config(load_config_text(CONFIG), controller, root / "local",
                                      POOLS))


def expect(cluster: LiveCluster, request: str) -> HostGrant:
    """An expected host of `loc`, as the provisioner gets it from the controller."""
    made = cluster.ok("POST", "/hosts/expected",
                      {"template": "loc", "request": request, "deadline": 60})
    return HostGrant(made["name"], made["join_token"])


def refusal(call: Callable[..., object], *args: object) -> tuple[str, str]:
    """The kind and message of the ProviderError that `call(*args)` raises."""
    with pytest.raises(ProviderError) as caught:
        call(*args)
    return caught.value.kind, str(caught.value)


def agent_pid(root: Path, instance: Instance) -> int:
    return LocalFiles(root / "local", "t").records()[instance.id].pid


# ---------------------------------------------------------------- describing
def test_describe_lists_the_local_templates_and_pools(tmp_path: Path) -> None:
    local: Provider = provider(tmp_path)  # mypy: LocalProvider is a Provider
    described = local.describe()
    assert described.provider == "local"
    assert described.templates == (
        TemplateOffer(name="loc", slots=2, type="X86_64", model="",
                      resources={"local": True, "scratch": 500.0}, max=2, lead_time=5.0,
                      cost_per_hour=0.0),
    ), "only templates whose provider is local, with their shape and max"
    assert described.pools == (PoolOffer("vcs", 3.0),)
    assert local.instances() == [], "nothing started yet"


def test_a_work_directory_serves_one_cluster(tmp_path: Path) -> None:
    provider(tmp_path)
    other = load_config_text(CONFIG.replace("cluster: t", "cluster: u"))
    kind, message = refusal(LocalProvider, local_config(other, "http://x", tmp_path / "local"))
    assert (kind, message) == ("request", f"{tmp_path / 'local'} holds the instances of "
                               "cluster t, not u")


def test_bad_requests_start_nothing(tmp_path: Path) -> None:
    local = provider(tmp_path)
    grant = HostGrant("loc-1", "xcej_x")
    assert refusal(local.request_hosts, "r", "aws.c5", [grant]) == (
        "request", "template aws.c5: not a local template (local templates: loc)")
    assert refusal(local.request_hosts, "r", "loc", [HostGrant("../x", "t")]) == (
        "request", "host name '../x' is not a plain name")
    assert refusal(local.request_hosts, "r", "loc", [grant, grant]) == (
        "request", "a host is named twice in loc-1, loc-1")
    assert refusal(local.release, ["local-nope"]) == ("request", "no such instance: local-nope")
    assert local.instances() == []


# ---------------------------------------------------------------- hosts, live
def test_local_hosts_join_run_jobs_survive_a_restart_and_are_released(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.start_controller()
        local = provider(tmp_path, cluster.url)
        job = cluster.submit(["sh", "-c", "while [ ! -e go ]; do sleep 0.05; done"], n=2,
                             res=LOCAL)
        first = expect(cluster, "r-1")

        [instance] = local.request_hosts("r-1", "loc", [first])
        assert (instance.id, instance.cluster, instance.template, instance.request,
                instance.host, instance.state) == (
            f"local-{first.name}", "t", "loc", "r-1", first.name, "running")
        token = tmp_path / "local" / "hosts" / first.name / "join.token"
        assert token.read_text() == first.join_token + "\n"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600, "a secret: the owner's only"

        # The agent joins as the expected host and takes the template's shape.
        joined = wait_for(lambda: cluster.host(first.name)["state"] == "ok"
                          and cluster.host(first.name), 20, "the local agent to join")
        assert {k: joined[k] for k in ("template", "provider", "slots", "resources")} == {
            "template": "loc", "provider": "local", "slots": 2,
            "resources": {"local": True, "scratch": 500.0}}
        assert cluster.wait_state(job, "RUN")["exec_hosts"] == {first.name: 2}
        (tmp_path / "go").touch()
        assert cluster.wait_state(job, "DONE")["exec_hosts"] == {first.name: 2}

        # A retried request starts nothing twice.
        pid = agent_pid(tmp_path, instance)
        assert local.request_hosts("r-1", "loc", [first]) == [instance]
        assert agent_pid(tmp_path, instance) == pid
        # The provisioner restarts: a new object on the same directory knows the instance.
        restarted = provider(tmp_path, cluster.url)
        assert restarted.instances() == [instance]

        # max 2: one runs, two more would be three; nothing starts.
        second = expect(cluster, "r-2")
        assert refusal(restarted.request_hosts, "r-2", "loc",
                       [second, HostGrant("loc-99", "xcej_y")]) == (
            "capacity", "template loc: 1 of at most 2 instances run, 2 more cannot start")
        assert restarted.instances() == [instance]
        [other] = restarted.request_hosts("r-2", "loc", [second])
        assert other.state == "running"
        wait_for(lambda: cluster.host(second.name)["state"] == "ok", 20,
                 "the second local agent to join")
        assert refusal(restarted.request_hosts, "r-3", "loc", [HostGrant("loc-99", "t")])[0] == (
            "capacity")

        # Release: the agents stop, their tokens go, the instances are listed gone.
        other_pid = agent_pid(tmp_path, other)
        restarted.release([instance.id, other.id])
        assert not pid_alive(pid) and not pid_alive(other_pid)
        assert not Path(f"/proc/{other_pid}").exists(), "its starter reaped it"
        assert [(i.id, i.state) for i in restarted.instances()] == [
            (instance.id, "gone"), (other.id, "gone")]
        assert [(i.id, i.state) for i in local.instances()] == [
            (instance.id, "gone"), (other.id, "gone")]
        assert not Path(f"/proc/{pid}").exists(), "the first object reaped its own child"
        assert not token.exists(), "a released host's token is deleted"
        wait_for(lambda: cluster.host(first.name)["state"] == "unreach", 10,
                 "the controller to miss the released host")
        restarted.release([instance.id])  # releasing again changes nothing


def test_release_kills_what_ignores_sigterm_after_the_grace(tmp_path: Path) -> None:
    script = tmp_path / "ignores.sh"
    script.write_text("trap '' TERM\ntouch ready\nwhile :; do sleep 0.1; done\n")
    process, child = spawn(["sh", str(script)], tmp_path, tmp_path / "log", dict(os.environ))
    try:
        wait_for(lambda: (tmp_path / "ready").exists(), 5, "the shell to ignore SIGTERM")
        stop_groups([process], grace=0.3)
        assert child.wait(5) == -signal.SIGKILL
        assert not process.alive()
        assert not Process(os.getpid(), process.start).alive(), "another start time: not it"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# ---------------------------------------------------------------- tokens
def test_local_pool_lends_what_is_left_and_takes_it_back(tmp_path: Path) -> None:
    local = provider(tmp_path)
    assert local.borrow("vcs", 2) == 2
    assert local.borrow("vcs", 2) == 1, "only 1 of the 3 is left"
    assert local.borrow("vcs", 1) == 0, "nothing left: granted 0, not an error"
    assert provider(tmp_path).borrow("vcs", 1) == 0, "what is lent survives a restart"
    local.give_back("vcs", 1.5)
    assert provider(tmp_path).borrow("vcs", 5) == 1.5
    assert refusal(local.give_back, "vcs", 4) == (
        "request", "cannot give back 4 tokens of vcs: 3 borrowed")
    assert refusal(local.borrow, "hspice/cloud", 1) == (
        "request", "pool hspice/cloud: not a local pool (local pools: vcs)")
    assert refusal(local.borrow, "vcs", 0) == (
        "request", "the amount must be a number above 0, not 0")
    local.give_back("vcs", 3)
    assert local.borrow("vcs", 3) == 3


def test_the_agent_command_line(tmp_path: Path) -> None:
    """What a local host runs, as `ps` shows it."""
    local = provider(tmp_path)
    [instance] = local.request_hosts("r-9", "loc", [HostGrant("loc-7", "xcej_z")])
    host = tmp_path / "local" / "hosts" / "loc-7"
    pid = agent_pid(tmp_path, instance)
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        assert args[args.index("agent"):] == [
            "agent", "--controller", "http://127.0.0.1:1", "--name", "loc-7",
            "--token-file", str(host / "join.token"), "--slots", "2",
            "--state-dir", str(host / "agent"), "--resource", "local=true",
            "--resource", "scratch=500.0"]
        assert os.getsid(pid) == pid, "a session of its own"
    finally:
        local.release([instance.id])
    assert local.instances()[0].state == "gone"
    assert (host / "agent.log").exists()
