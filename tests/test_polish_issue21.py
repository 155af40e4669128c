"""Everyday polish found on the way (issue 21: 7 and 8): connection options before the
command, lease renewals out of `xce history`, durations in their units, rounded
figures in policy reasons, host ranges in the REPL, a bad requirement in a simulator
workload reported with its place, the agent's and the demo's help, one status file
per provisioner instance."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest
from click.testing import CliRunner

from xce.cli import client as client_module
from xce.cli.main import main
from xce.cli.provisioner_cmd import status_file
from xce.config.hostnames import expand_hostnames, fold_hostnames
from xce.controller.history import entries
from xce.controller.store import Fact
from xce.model.api import KillResult
from xce.model.durations import seconds_figure
from xce.model.events import HostStateChanged, LeaseGranted, LeaseReleased
from xce.provisioner.status import Status, write_status
from xce.sim.repl_text import hosts_text
from xce.sim.summary_text import format_value
from xce.sim.workload import WorkloadError, read_yaml_jobs


class FakeClient:
    """Stands for the HTTP client: records where and as whom a command connected."""

    made: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, url: str, token: str) -> None:
        FakeClient.made.append((url, token))

    def kill(self, job: int) -> KillResult:
        return KillResult(job, "EXIT")


def test_connection_options_before_the_command(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "Client", FakeClient)
    for name in ("XCE_CONTROLLER", "XCE_TOKEN", "XCE_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "a").write_text("token-a\n")
    (tmp_path / "b").write_text("token-b\n")
    FakeClient.made.clear()
    done = CliRunner().invoke(main, ["--token-file", str(tmp_path / "a"),
                                     "--controller", "head:7000", "kill", "8"])
    assert (done.exit_code, done.output) == (0, "Job <8> is being terminated\n")
    after = CliRunner().invoke(main, ["--token-file", str(tmp_path / "a"), "kill", "9",
                                      "--token-file", str(tmp_path / "b")])
    assert after.exit_code == 0, after.output
    assert FakeClient.made == [("http://head:7000", "token-a"),
                               ("http://127.0.0.1:6820", "token-b")], "after the command wins"


def test_history_hides_lease_renewals_unless_all() -> None:
    facts = [
        Fact(1, 1.0, LeaseGranted("local", "prov-a", 1, 16.0, 1.0)),
        Fact(2, 3.0, LeaseGranted("local", "prov-a", 1, 18.0, 3.0)),  # renewed
        Fact(3, 4.0, HostStateChanged("n1", "ok", 4.0, "agent registered")),
        Fact(4, 5.0, LeaseGranted("local", "prov-a", 1, 20.0, 5.0)),  # renewed
        Fact(5, 9.0, LeaseReleased("local", "prov-a", 1, 9.0)),
        Fact(6, 9.5, LeaseGranted("local", "prov-a", 2, 24.5, 9.5)),  # taken again
        Fact(7, 30.0, LeaseGranted("local", "prov-b", 3, 45.0, 30.0)),  # another holder
    ]
    assert [e.seq for e in entries(facts, 0)] == [1, 3, 5, 6, 7]
    assert [e.seq for e in entries(facts, 0, renewals=True)] == [1, 2, 3, 4, 5, 6, 7]
    assert [e.seq for e in entries(facts, 2)] == [6, 7], "the last N shown ones"


def test_summary_durations_in_their_units_and_rounded_reasons() -> None:
    assert format_value(63_181_100.0, "sim_seconds") == "731d06h"
    assert format_value(245.0, "wait_mean") == "4m05s"
    assert format_value(0.25, "wall_seconds") == "0.2s"
    assert format_value(2500.75, "bsld_mean") == "2,500.750", "not a duration"
    assert format_value({"aws.c5": 1.5}, "host_hours") == "aws.c5=1.5"
    assert [seconds_figure(s) for s in (0.0, 0.04, 2.00071, 1.25, 60.0, 4940.4,
                                         1_764_459_000.3)] == [
        "0", "0", "2", "1.2", "60", "4940", "1764459000"]


def test_host_ranges_in_the_repl() -> None:
    names = ["n011", "n012", "n013", "n014", "n020", "login", "cloud-1", "cloud-2"]
    assert fold_hostnames(names) == ["n[011-014,020]", "login", "cloud-[1-2]"]
    assert expand_hostnames("n[011-014,020]") == names[:5], "the inverse of expanding"
    assert fold_hostnames(["n9", "n10"]) == ["n9", "n10"], "two widths: not one range"
    hosts = [("n011", 4), ("n012", 4), ("n013", 4), ("n014", 4), ("n020", 2)]
    assert hosts_text(hosts) == "4*n[011-014] 2*n020"


def test_a_bad_requirement_in_a_workload_names_its_place(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {id: 1, run: 10}\n  - {id: 2, run: 10}\n"
                    "  - {id: 3, run: 10}\n  - {id: 4, run: 10, res: \"rusage[mem=]\"}\n")
    with pytest.raises(WorkloadError) as err:
        read_yaml_jobs(path)
    assert str(err.value) == (f"{path}:5: jobs[3]: requirement error at column 12: "
                              "expected a number after '=', found ']'")


def test_a_resource_the_cluster_lacks_is_reported_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("cluster: t\nhosts:\n  - {name: n1, slots: 2}\n"
                                     "queues:\n  - {name: normal, priority: 1}\n")
    (tmp_path / "w.yaml").write_text('jobs:\n  - {id: 4, run: 10, res: "select[foo>1]"}\n')
    done = CliRunner().invoke(main, ["sim", "run", str(tmp_path / "c.yaml"), "--workload",
                                     str(tmp_path / "w.yaml")])
    assert done.exit_code == 1
    assert done.output.strip() == (f"Error: {tmp_path / 'w.yaml'}: job 4: requirement error "
                                   "at column 8: unknown resource 'foo'")


def test_the_help_of_the_agent_and_the_demo() -> None:
    agent = CliRunner().invoke(main, ["agent", "--help"]).output
    assert "http://ctl:6820" in agent and "8700" not in agent
    demo = CliRunner().invoke(main, ["demo", "--help"]).output
    assert "about 20 seconds" in demo


def test_each_provisioner_instance_has_its_own_status(tmp_path: Path) -> None:
    """Instances of the local provider share --work: each writes status-NAME.json, and
    `status` shows them all (or one)."""
    for name, at in (("prov-a", 100.0), ("prov-b", 200.0)):
        write_status(status_file(str(tmp_path), name), Status(name, at, {}, [], []))
    runner = CliRunner()
    both = runner.invoke(main, ["provisioner", "status", "--work", str(tmp_path)])
    assert both.exit_code == 0, both.output
    heads = [line for line in both.output.splitlines() if line.startswith("Instance ")]
    assert [h.split(",")[0] for h in heads] == ["Instance prov-a", "Instance prov-b"]
    one = runner.invoke(main, ["provisioner", "status", "--work", str(tmp_path),
                               "--name", "prov-b", "--json"])
    shown: Any = msgspec.json.decode(one.output)
    assert shown["name"] == "prov-b"
    none = runner.invoke(main, ["provisioner", "status", "--work", str(tmp_path),
                                "--name", "prov-c"])
    assert none.exit_code == 1 and "status-prov-c.json: no status yet" in none.output
