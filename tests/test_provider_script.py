"""The `script` provider against a real plugin: tests/rc_plugins holds executables that
speak the LSF resource connector protocol (`SCRIPT -f INPUT.json`, JSON on stdout) and
whose machines are real `xce agent` processes joining as the expected hosts XCE passes
them. Each template of the plugin behaves in its own way (rcplugin.py): `small` works,
`rc.flaky` fails its second machine ever (that request completes with errors),
`rc.slow` lists no machine for a second and boots them for 2.5 s, `rc.refused` fails
requestMachines; a `reclaim` file in the conf dir makes getReturnRequests report
machines taken back, and `faults.json` makes a script exit 1, hang, or answer garbage.

Provider-level tests drive ScriptProvider as the provisioner does; the last test runs a
real controller and a real `xce provisioner run --providers FILE` process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from live import (
    XCE,
    LiveCluster,
    kill_marked,
    live_cluster,
    pid_alive,
    skip_unless_linux,
    wait_for,
)

from xce.config import ConfigError, load_config_text
from xce.config.providers.file import load_providers
from xce.provisioner.provider import HostGrant, Provider, ProviderError, TemplateOffer
from xce.provisioner.providers.script import ScriptProvider, ScriptState
from xce.provisioner.registry import ProviderContext, build_providers

pytestmark = skip_unless_linux

PLUGIN = Path(__file__).resolve().parent / "rc_plugins"  # scriptPath: scripts/ inside
CONFIG = """\
cluster: rc
session_interval: 0.2
resources:
  rchost: {type: boolean}
  rcjob: {type: boolean}
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 2
  templates:
    - {name: rc.small, provider: rc, slots: 2, max: 4, rank: 1, resources: {rchost: true}}
    - {name: rc.flaky, provider: rc, slots: 2, max: 4, rank: 2, resources: {rcjob: true}}
    - {name: rc.slow, provider: rc, slots: 2, max: 4, rank: 3, resources: {rcjob: true}}
    - {name: rc.refused, provider: rc, slots: 2, max: 4, rank: 4}
policy:
  persistence: 0.5
  max_lifetime: 0
  backoff: {initial: 8, max: 16}  # longer than rc.slow takes to join
"""
TEMPLATES: dict[str, Any] = {"templates": [
    {"templateId": "small", "maxNumber": 4, "imageId": "ami-local", "userData": "zone=here",
     "attributes": {"type": ["String", "X86_64"], "ncpus": ["Numeric", "2"],
                    "mem": ["Numeric", "4096"], "rchost": ["Boolean", "1"]}},
    {"templateId": "rc.flaky", "maxNumber": "4",
     "attributes": {"ncpus": ["Numeric", 2], "ncores": ["Numeric", "1"]},
     "rcTest": {"failMachines": [2]}},
    {"templateId": "rc.slow", "maxNumber": 4, "attributes": {"ncpus": ["Numeric", "2"]},
     "rcTest": {"hiddenSeconds": 1, "bootSeconds": 2.5, "anonymous": True}},
    {"templateId": "rc.refused", "maxNumber": 4, "attributes": {"ncpus": ["Numeric", "2"]},
     "rcTest": {"requestError": "InsufficientInstanceCapacity: no room in zone here"}},
    {"templateId": "unlisted", "maxNumber": 1,
     "attributes": {"type": ["String", "ARM64"], "ncores": ["Numeric", "8"],
                    "ssd": ["Boolean", "0"], "zone": ["String", "here"]}},
]}
GATED = ["sh", "-c", "while [ ! -e go ]; do sleep 0.05; done"]


class Site:
    """A site's files for the script provider `rc`: the plugin's conf dir (its
    templates, XCE's scriptconf.yaml) and a providers file in hostProviders.json shape."""

    def __init__(self, root: Path, scriptconf: str = "") -> None:
        self.root = root
        self.conf = root / "rc-conf"
        (self.conf / "conf").mkdir(parents=True)
        (self.conf / "conf" / "rcplugin_templates.json").write_text(json.dumps(TEMPLATES))
        (self.conf / "conf" / "rcplugin_config.json").write_text(
            json.dumps({"xceCommand": XCE, "stopGrace": 3}))
        (self.conf / "scriptconf.yaml").write_text(
            f"timeout: 20\nquery_interval: 0\nenv: {{RC_PYTHON: {json.dumps(sys.executable)}}}\n"
            "templates: {rc.small: small}\n" + scriptconf)
        self.providers = root / "hostProviders.json"
        self.providers.write_text(json.dumps({"providers": [
            {"name": "rc", "type": "script", "confPath": "rc-conf", "scriptPath": str(PLUGIN)},
        ]}))
        self.work = root / "work"
        self.home = self.work / "rc"

    def provider(self, controller: str = "http://127.0.0.1:1") -> ScriptProvider:
        """The provider as `xce provisioner run --providers` builds it."""
        built = build_providers(load_providers(self.providers), ProviderContext(
            load_config_text(CONFIG), controller, str(self.work)))
        rc = built["rc"]
        assert isinstance(rc, ScriptProvider)
        return rc

    def calls(self, script: str) -> list[dict[str, Any]]:
        """What the plugin was called with (its log, tokens hidden)."""
        log = self.home / "log" / "rcplugin.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [c for c in map(json.loads, lines) if c["script"] == script]

    def machines(self) -> list[dict[str, Any]]:
        """The plugin's own records of the machines it made."""
        state = json.loads((self.home / "data" / "rcplugin.json").read_text())
        return list(state["machines"].values())

    def machine(self, host: str) -> dict[str, Any]:
        """The plugin's record of the machine it made for `host`."""
        [found] = [m for m in self.machines() if m["host"] == host]
        return found

    def state(self) -> ScriptState:
        """XCE's state file of the provider."""
        return msgspec.json.decode((self.home / "state.json").read_bytes(), type=ScriptState)

    def fault(self, **faults: str) -> None:
        (self.conf / "faults.json").write_text(json.dumps(faults))


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """A site whose agents (and anything else mentioning tmp_path) die with the test."""
    try:
        yield Site(tmp_path)
    finally:
        kill_marked(f"{tmp_path}{os.sep}")


def refusal(call: Callable[..., object], *args: object) -> tuple[str, str]:
    """The kind and message of the ProviderError that `call(*args)` raises."""
    with pytest.raises(ProviderError) as caught:
        call(*args)
    return caught.value.kind, str(caught.value)


def states(provider: Provider) -> list[tuple[str, str]]:
    return [(i.host, i.state) for i in provider.instances()]


def joined_host(cluster: LiveCluster, name: str) -> Callable[[], dict[str, Any] | None]:
    """A probe: the host's record once it has joined (state ok)."""
    def probe() -> dict[str, Any] | None:
        host: dict[str, Any] = cluster.host(name)
        return host if host["state"] == "ok" else None
    return probe


def expect(cluster: LiveCluster, template: str) -> HostGrant:
    """An expected host, as the provisioner gets it from the controller."""
    made = cluster.ok("POST", "/hosts/expected", {"template": template, "deadline": 60})
    return HostGrant(made["name"], made["join_token"])


# ---------------------------------------------------------------- describing
def test_describe_offers_the_plugin_templates(site: Site) -> None:
    rc: Provider = site.provider()  # mypy: a ScriptProvider is a Provider
    described = rc.describe()
    assert described.provider == "rc" and described.pools == ()
    assert described.templates == (
        TemplateOffer("rc.small", 2, "X86_64", "", {"mem": 4096.0, "rchost": True}, 4, 300.0),
        TemplateOffer("rc.flaky", 2, "X86_64", "", {}, 4, 300.0),
        TemplateOffer("rc.slow", 2, "X86_64", "", {}, 4, 300.0),
        TemplateOffer("rc.refused", 2, "X86_64", "", {}, 4, 300.0),
        TemplateOffer("unlisted", 8, "ARM64", "", {"ssd": False}, 1, 300.0),
    ), "templateId small is the catalog's rc.small (scriptconf templates:); ncpus, else " \
       "ncores, are the slots; Numeric and Boolean attributes resources; maxNumber max"
    assert rc.describe() == described
    [call] = site.calls("getAvailableTemplates")
    assert len(call["argv"]) == 2 and call["argv"][0] == "-f" and call["input"] == {}
    assert call["env"] == {
        "PROVIDER_NAME": "rc", "PRO_CONF_DIR": str(site.conf),
        "PRO_DATA_DIR": str(site.home / "data"), "PRO_LSF_LOGDIR": str(site.home / "log"),
        "XCE_CONTROLLER": "http://127.0.0.1:1", "XCE_CLUSTER": "rc",
    }, "the answer was reused for describe_ttl; the scripts get LSF's variables"
    assert list((site.home / "io").iterdir()) == [], "input files are deleted"
    assert refusal(rc.borrow, "vcs", 1) == ("request", "provider rc lends no tokens (pool vcs)")

    # Asked again after describe_ttl; a failure then reuses the last good answer.
    (site.conf / "scriptconf.yaml").write_text(
        f"describe_ttl: 0\nenv: {{RC_PYTHON: {json.dumps(sys.executable)}}}\n")
    fresh = site.provider()
    assert fresh.describe().templates[0].name == "small", "no templates: mapping now"
    site.fault(getAvailableTemplates="exit")
    assert fresh.describe().templates[0].name == "small"
    assert len(site.calls("getAvailableTemplates")) == 3
    assert refusal(site.provider().describe)[0] == "unavailable", "no earlier answer"


# ---------------------------------------------------------------- the whole lifecycle, live
def test_hosts_join_run_jobs_and_are_returned(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.start_controller()
        site = Site(tmp_path)
        rc = site.provider(cluster.url)
        job = cluster.submit(GATED, n=2, res="select[rchost]")
        grants = [expect(cluster, "rc.small") for _ in range(2)]

        started = time.monotonic()
        made = rc.request_hosts("r-1", "rc.small", grants)
        assert time.monotonic() - started < 5
        assert [(i.id, i.cluster, i.template, i.request, i.host, i.state) for i in made] == [
            (f"rc-{g.name}", "rc", "rc.small", "r-1", g.name, "running") for g in grants]
        [call] = site.calls("requestMachines")
        assert call["input"] == {
            "template": {"templateId": "small", "machineCount": 2}, "rc_account": "rc",
            "userData": {"xce_controller": cluster.url, "xce_cluster": "rc",
                         "xce_template": "rc.small", "xce_request": "r-1"},
            "xce": {"controller": cluster.url, "cluster": "rc", "provider": "rc",
                    "template": "rc.small", "request": "r-1",
                    "hosts": [{"name": g.name, "joinToken": "***"} for g in grants]}}
        assert call["inputMode"] == "0o600", "the input holds join tokens: owner only"
        assert call["env"]["XCE_REQUEST"] == "r-1" and call["env"]["XCE_TEMPLATE"] == "rc.small"
        assert list((site.home / "io").iterdir()) == []
        assert rc.request_hosts("r-1", "rc.small", grants) == made
        assert len(site.calls("requestMachines")) == 1, "a retried request asks for nothing"

        # The plugin's agents join as the expected hosts, with their tokens, and run jobs.
        for grant in grants:
            joined = wait_for(joined_host(cluster, grant.name), 20, f"{grant.name} to join")
            assert (joined["template"], joined["provider"]) == ("rc.small", "rc")
        assert sum(cluster.wait_state(job, "RUN")["exec_hosts"].values()) == 2
        (tmp_path / "go").touch()
        assert cluster.wait_state(job, "DONE")["state"] == "DONE"

        assert states(rc) == [(g.name, "running") for g in grants]
        known = site.state()
        assert known.requests == {}, "the request is complete: polled no more"
        assert [(r.machine_id, r.machine_name, r.result, r.address) for r in
                known.instances.values()] == [
            (site.machine(g.name)["machineId"], g.name, "succeed", "127.0.0.1") for g in grants]
        assert site.provider(cluster.url).instances() == rc.instances(), "a restart knows them"

        # Release: one requestReturnMachines; the agents stop; the return is polled to its end.
        pids = [site.machine(g.name)["pid"] for g in grants]
        rc.release([made[0].id, made[1].id])
        [returned] = site.calls("requestReturnMachines")
        assert returned["input"] == {"machines": [
            {"name": g.name, "machineId": site.machine(g.name)["machineId"]} for g in grants]}
        assert states(rc) == [(g.name, "gone") for g in grants]
        wait_for(lambda: not any(pid_alive(p) for p in pids), 10, "the returned agents to end")
        wait_for(lambda: rc.instances() and not site.state().requests, 10,
                 "the return request to complete")
        assert {r.state for r in site.state().instances.values()} == {"returned"}
        rc.release([made[0].id])
        assert len(site.calls("requestReturnMachines")) == 1, "releasing again does nothing"
        wait_for(lambda: cluster.host(grants[0].name)["state"] == "unreach", 10,
                 "the controller to miss the returned host")


# ---------------------------------------------------------------- how requests end
def test_a_request_completing_with_errors_gives_a_gone_instance(site: Site) -> None:
    rc = site.provider()
    grants = [HostGrant("rc.flaky-1", "xcej_a"), HostGrant("rc.flaky-2", "xcej_b")]
    assert [i.state for i in rc.request_hosts("r-2", "rc.flaky", grants)] == ["running"] * 2
    assert states(rc) == [("rc.flaky-1", "running"), ("rc.flaky-2", "gone")]
    failed = site.state().instances["rc-rc.flaky-2"]
    assert (failed.state, failed.result, failed.status, failed.message) == (
        "failed", "fail", "terminated", "simulated failure (rcTest failMachines)")
    assert site.state().requests == {}, "complete_with_error ends the request"
    assert pid_alive(site.machine("rc.flaky-1")["pid"]), "the good machine runs its agent"
    polls = len(site.calls("getRequestStatus"))
    assert states(rc) == [("rc.flaky-1", "running"), ("rc.flaky-2", "gone")]
    assert len(site.calls("getRequestStatus")) == polls
    rc.release(["rc-rc.flaky-2"])  # a failed machine is the plugin's: nothing to return
    assert site.calls("requestReturnMachines") == []


def test_query_interval_spaces_the_polls(site: Site) -> None:
    (site.conf / "scriptconf.yaml").write_text(
        f"query_interval: 60\nenv: {{RC_PYTHON: {json.dumps(sys.executable)}}}\n")
    rc = site.provider()
    rc.request_hosts("r-8", "rc.flaky", [HostGrant("rc.flaky-1", "xcej_a")])
    assert states(rc) == [("rc.flaky-1", "running")]
    asked = [len(site.calls("getRequestStatus")), len(site.calls("getReturnRequests"))]
    assert asked == [1, 1], "the first call asks the plugin"
    assert states(rc) == [("rc.flaky-1", "running")]
    assert [len(site.calls("getRequestStatus")), len(site.calls("getReturnRequests"))] == asked
    assert states(site.provider()) == [("rc.flaky-1", "running")]
    assert len(site.calls("getReturnRequests")) == 2, "a restarted provider asks at once"


def test_a_slow_request(site: Site) -> None:
    """rc.slow lists no machine for 1 s, and its machines boot for 2.5 s; they are named
    vm-<id>, not after their hosts, so XCE maps them to the hosts in order. The third
    host is released before its machine is reported: it is returned when it is."""
    rc = site.provider()
    grants = [HostGrant(f"rc.slow-{n}", f"xcej_{n}") for n in (1, 2, 3)]
    started = time.monotonic()
    made = rc.request_hosts("r-3", "rc.slow", grants)
    assert time.monotonic() - started < 2, "requestMachines answers before the machines are up"
    assert states(rc) == [(g.name, "running") for g in grants]
    assert [r.machine_id for r in site.state().instances.values()] == ["", "", ""]

    rc.release([made[2].id])
    assert states(rc)[2] == ("rc.slow-3", "gone")
    assert site.state().instances[made[2].id].state == "released"
    assert site.calls("requestReturnMachines") == [], "no machine to return yet"

    def reported() -> bool:
        rc.instances()
        return all(r.machine_id for r in site.state().instances.values())

    wait_for(reported, 5, "the plugin to list the machines", interval=0.2)
    known = site.state().instances
    assert [known[i.id].machine_id for i in made] == [
        site.machine(g.name)["machineId"] for g in grants], "mapped in order"
    assert [known[i.id].machine_name for i in made] == [
        f"vm-{site.machine(g.name)['machineId']}" for g in grants]
    [late] = site.calls("requestReturnMachines")
    assert late["input"]["machines"] == [{"name": known[made[2].id].machine_name,
                                          "machineId": known[made[2].id].machine_id}]
    if time.monotonic() - started < 2.3:  # still booting
        assert [known[i.id].result for i in made[:2]] == ["executing", "executing"]
        assert known[made[0].id].state == "executing"
        assert [r.kind for r in site.state().requests.values()].count("create") == 1

    def up() -> list[tuple[str, str]] | None:
        listed = states(rc)
        creating = [r for r in site.state().requests.values() if r.kind == "create"]
        return listed if not creating else None

    assert wait_for(up, 8, "the slow machines to boot", interval=0.2) == [
        ("rc.slow-1", "running"), ("rc.slow-2", "running"), ("rc.slow-3", "gone")]
    assert [site.state().instances[i.id].result for i in made[:2]] == ["succeed", "succeed"]
    assert all(pid_alive(site.machine(g.name)["pid"]) for g in grants[:2])
    assert not pid_alive(site.machine("rc.slow-3")["pid"]), "the released one never booted"
    wait_for(lambda: rc.instances() and site.state().instances[made[2].id].state == "returned",
             10, "its return to complete")


def test_the_provider_takes_machines_back(site: Site) -> None:
    """getReturnRequests lists rc.small-1 at once and rc.small-2 with 2 s of grace."""
    rc = site.provider()
    grants = [HostGrant("rc.small-1", "xcej_a"), HostGrant("rc.small-2", "xcej_b")]
    made = rc.request_hosts("r-4", "rc.small", grants)
    wait_for(lambda: rc.instances() and not site.state().requests, 10, "the machines to be up")
    assert site.calls("getReturnRequests")[-1]["input"] == {"machines": [
        {"name": g.name, "machineId": site.machine(g.name)["machineId"]} for g in grants]}
    pids = [site.machine(g.name)["pid"] for g in grants]

    (site.conf / "reclaim").write_text("rc.small-1\nrc.small-2 2\n")
    assert states(rc) == [("rc.small-1", "gone"), ("rc.small-2", "running")]
    notice = rc.instances()[1].reclaim_at
    assert notice is not None and notice > time.time()  # the daemon closes the host
    wait_for(lambda: not pid_alive(pids[0]), 5, "the provider to take rc.small-1")
    second = site.state().instances[made[1].id]
    assert second.reclaim_at > time.time() and pid_alive(pids[1])
    assert second.message == "taken back by the provider (gracePeriod 2 s)"
    wait_for(lambda: states(rc)[1] == ("rc.small-2", "gone"), 5, "the grace to pass",
             interval=0.2)
    wait_for(lambda: not pid_alive(pids[1]), 5, "the provider to take rc.small-2")
    assert {r.state for r in site.state().instances.values()} == {"reclaimed"}
    rc.release([i.id for i in made])
    assert site.calls("requestReturnMachines") == [], "nothing of ours left to return"


# ---------------------------------------------------------------- failures
def test_script_failures_are_provider_errors_that_say_what_went_wrong(site: Site) -> None:
    rc = site.provider()
    assert refusal(rc.request_hosts, "r-5", "rc.refused", [HostGrant("rc.refused-1", "x")]) == (
        "unavailable", "provider rc: requestMachines.sh exited with status 1: "
        "InsufficientInstanceCapacity: no room in zone here; stderr: rcplugin requestMachines: "
        "InsufficientInstanceCapacity: no room in zone here")
    assert rc.instances() == [], "a refused request leaves no instance"
    assert refusal(rc.request_hosts, "r-5", "aws.c5", [HostGrant("aws.c5-1", "x")]) == (
        "request", "template aws.c5: not a template of provider rc (its templates: "
        "rc.small, rc.flaky, rc.slow, rc.refused)")
    assert refusal(rc.release, ["rc-nope"]) == ("request", "no such instance: rc-nope")

    site.fault(getAvailableTemplates="garbage")
    assert refusal(rc.describe) == (
        "unavailable", "provider rc: getAvailableTemplates.sh: the output is not JSON: "
        "'Traceback (most recent call last): this is not JSON'")
    site.fault(getAvailableTemplates="bad")
    assert refusal(rc.describe) == (
        "unavailable", "provider rc: getAvailableTemplates.sh: "
        "templates[0].attributes.ncpus: expected [\"Type\", \"value\"], got 4")

    [made] = rc.request_hosts("r-6", "rc.small", [HostGrant("rc.small-1", "x")])
    site.fault(getRequestStatus="bad")
    assert refusal(rc.instances) == (
        "unavailable", "provider rc: getRequestStatus.sh: requests[0].requestId: "
        "expected a non-empty string, got 7")
    site.fault(getRequestStatus="exit")
    assert refusal(rc.instances) == (
        "unavailable", "provider rc: getRequestStatus.sh exited with status 1: "
        "getRequestStatus: the cloud said no (simulated); stderr: rcplugin getRequestStatus: "
        "getRequestStatus: the cloud said no (simulated)")
    site.fault(requestReturnMachines="exit")
    assert refusal(rc.release, [made.id])[0] == "unavailable"
    site.fault()
    assert rc.instances() == [msgspec.structs.replace(made, state="running")], \
        "a failed call changed nothing"

    (site.conf / "scriptconf.yaml").write_text(
        f"timeout: 1\nenv: {{RC_PYTHON: {json.dumps(sys.executable)}}}\n")
    site.fault(getAvailableTemplates="hang")
    started = time.monotonic()
    assert refusal(site.provider().describe) == (
        "unavailable", "provider rc: getAvailableTemplates.sh did not finish within 1 s "
        "(killed)")
    assert time.monotonic() - started < 4


def test_configuration_mistakes_are_config_errors(tmp_path: Path) -> None:
    site = Site(tmp_path)
    context = ProviderContext(load_config_text(CONFIG), "http://127.0.0.1:1", str(site.work))

    def error(entry: dict[str, str]) -> str:
        site.providers.write_text(json.dumps({"providers": [
            {"name": "rc", "type": "script", **entry}]}))
        with pytest.raises(ConfigError) as caught:
            build_providers(load_providers(site.providers), context)
        return str(caught.value)

    where = f"{site.providers}:1"
    assert error({"confPath": "rc-conf"}) == (
        f"{where}: scriptPath: provider rc: the script provider needs a scriptPath (the "
        "directory of the plugin's scripts)")
    assert error({"scriptPath": str(PLUGIN)}) == (
        f"{where}: confPath: provider rc: the script provider needs a confPath (the "
        "plugin's configuration directory, its PRO_CONF_DIR)")
    flat = tmp_path / "flat"  # scripts right in scriptPath, without getReturnRequests.sh
    flat.mkdir()
    for name in ("rcplugin.py", "getAvailableTemplates.sh", "getRequestStatus.sh",
                 "requestReturnMachines.sh"):
        shutil.copy2(PLUGIN / "scripts" / name, flat / name)
    assert error({"confPath": "rc-conf", "scriptPath": "flat"}) == (
        f"{where}: scriptPath: provider rc: no requestMachines.sh in {flat}")
    shutil.copy2(PLUGIN / "scripts" / "requestMachines.sh", flat / "requestMachines.sh")
    (flat / "requestMachines.sh").chmod(0o644)
    assert error({"confPath": "rc-conf", "scriptPath": "flat"}) == (
        f"{where}: scriptPath: provider rc: {flat / 'requestMachines.sh'} is not an "
        "executable file")
    (flat / "requestMachines.sh").chmod(0o755)
    site.providers.write_text(json.dumps({"providers": [
        {"name": "rc", "type": "script", "confPath": "rc-conf", "scriptPath": "flat"}]}))
    flat_rc = build_providers(load_providers(site.providers), context)["rc"]
    flat_rc.request_hosts("r-7", "rc.small", [HostGrant("rc.small-1", "x")])
    assert [i.state for i in flat_rc.instances()] == ["running"]
    assert site.calls("getReturnRequests") == [], "optional: without it, no reclaims"

    scriptconf = site.conf / "scriptconf.yaml"
    scriptconf.write_text("timeout: 5\ncolour: blue\n")
    assert error({"confPath": "rc-conf", "scriptPath": str(PLUGIN)}) == (
        f"{scriptconf}:2: colour: unknown key 'colour'")
    scriptconf.write_text("templates:\n  rc.small: small\n  rc.big: big\n")
    assert error({"confPath": "rc-conf", "scriptPath": str(PLUGIN)}) == (
        f"{scriptconf}:3: templates.rc.big: template 'rc.big' is not a catalog template of "
        "this provider (its templates: rc.small, rc.flaky, rc.slow, rc.refused)")
    scriptconf.write_text("timeout: 0\n")
    assert error({"confPath": "rc-conf", "scriptPath": str(PLUGIN)}) == (
        f"{scriptconf}:1: timeout: timeout must be > 0")

    scriptconf.write_text("")
    other = ProviderContext(load_config_text(CONFIG.replace("cluster: rc", "cluster: zz")),
                            "http://127.0.0.1:1", str(site.work))
    with pytest.raises(ProviderError, match=f"{site.home} holds the instances of cluster rc, "
                       "not zz"):
        build_providers(load_providers(site.providers), other)
    kill_marked(f"{tmp_path}{os.sep}")


# ---------------------------------------------------------------- end to end
def test_live_provisioner_drives_plugin_hosts_through_failure_slowness_and_reclaim(
        tmp_path: Path) -> None:
    """A real controller and `xce provisioner run --providers hostProviders.json`. Two
    jobs need rc.flaky or rc.slow hosts (rcjob): the provisioner asks for 2 x rc.flaky
    (rank 2); the plugin fails the second machine (complete_with_error), so that expected
    host fails and rc.flaky backs off: the demand moves to rc.slow, whose machine boots
    slowly, joins and runs the second job. Then the plugin takes the slow machine back
    (getReturnRequests): its host is lost, its job requeued and run on a new host. Once
    idle, every host is drained, decommissioned and returned (their agents end)."""
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller()
        cluster.start_agent("n1", slots=1)
        site = Site(tmp_path)
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(site.work), "--providers", str(site.providers),
            "--name", "prov-a", "--interval", "0.3",
        ])
        jobs = [cluster.submit(GATED, n=2, res="select[rcjob]") for _ in range(2)]

        def log() -> str:
            return cluster.log_tail("provisioner", 100_000)

        # rc.flaky's request completes with error: one host joins, the other fails.
        wait_for(lambda: "rc.flaky-2 (its instance is gone before it joined): lost" in log(),
                 30, "the failed machine to fail its expected host")
        assert site.state().instances["rc-rc.flaky-2"].state == "failed"
        wait_for(lambda: "SetAllowance rc.flaky -> 0 (provider failure: back-off 8 s" in log(),
                 5, "rc.flaky to back off")
        # The demand moves to rc.slow, whose machine boots slowly: both jobs run.
        ran = [cluster.wait_state(j, "RUN", timeout=40)["exec_hosts"] for j in jobs]
        hosts = {h: j for j, on in zip(jobs, ran, strict=True) for h in on}
        [flaky] = [h for h in hosts if h.startswith("rc.flaky-")]
        [slow] = [h for h in hosts if h.startswith("rc.slow-")]
        assert flaky == "rc.flaky-1"
        made = [(c["input"]["template"]["templateId"], c["input"]["template"]["machineCount"])
                for c in site.calls("requestMachines")]
        assert made[:2] == [("rc.flaky", 2), ("rc.slow", 1)], made
        assert site.machine(slow)["name"].startswith("vm-"), "mapped to its host in order"

        # The provider takes the slow machine back with 3 s of notice: its host is closed
        # at once (closed_Recl, its job runs on), then lost, its job requeued.
        victim, machine = hosts[slow], site.machine(slow)
        (site.conf / "reclaim").write_text(machine["name"] + " 3\n")
        noticed = wait_for(lambda: (h := cluster.hosts().get(slow)) and h["status"]
                           == "closed_Recl" and h, 10, "the host closed on the notice")
        assert noticed["jobs"] == [victim] and pid_alive(machine["pid"])
        wait_for(lambda: slow not in cluster.hosts(), 15, "the reclaimed host lost, removed")
        wait_for(lambda: not pid_alive(machine["pid"]), 5, "the provider to take it")
        wait_for(lambda: f"{slow} (its instance is gone): lost, removed" in log(), 5,
                 "the reconciliation's note")
        [record] = [i for r in cluster.ok("GET", "/requests?all=1")["requests"]
                    for i in r["instances"] if i["host"] == slow]
        assert (record["state"], record["reason"]) == ("lost", "reclaimed by the provider")
        again = wait_for(lambda: (info := cluster.job(victim))["state"] == "RUN"
                         and slow not in info["exec_hosts"] and info, 40,
                         "the requeued job to run on a new host")
        [third] = again["exec_hosts"]
        assert third.startswith(("rc.flaky-", "rc.slow-")) and third not in hosts

        (tmp_path / "go").touch()
        for job in jobs:
            assert cluster.wait_state(job, "DONE")["state"] == "DONE"
        returned = [m["host"] for m in site.machines() if not m["failed"] and m["host"] != slow]
        assert flaky in returned and third in returned
        pids = [site.machine(h)["pid"] for h in returned]
        wait_for(lambda: not any(h in cluster.hosts() for h in returned), 40,
                 "the idle hosts to be drained, decommissioned, returned and removed")
        wait_for(lambda: not any(pid_alive(p) for p in pids), 15, "their agents to end")
        given_back = {m["machineId"] for c in site.calls("requestReturnMachines")
                      for m in c["input"]["machines"]}
        assert given_back == {site.machine(h)["machineId"] for h in returned}
        assert log().count("DecommissionHost") >= 2 and "Traceback" not in log()
        records = {r.host: r.state for r in site.state().instances.values()}
        assert records[slow] == "reclaimed" and records["rc.flaky-2"] == "failed"
        assert {records[h] for h in returned} <= {"returning", "returned"}
