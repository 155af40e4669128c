"""What the scheduler and the records learn of each provisioning request (issue 18):

* every in-flight host reaches the scheduler with its request time
  (`SupplyChanged.requested`), through every change of the in-flight count and after a
  restart, so that the plan expects each host at its own request time + lead time;
* a request records the jobs it was made for (`RequestHosts.jobs`), durably; `xce
  requests` and `xce provisioner status` show them (`1203,1204,+17`), the JSON the full
  list;
* the provisioner observes request-to-join times and publishes, per template, the
  median of the recent ones as the runtime lead time (`POST /catalog` `lead_time`, then
  `SupplyChanged.lead_time` in the scheduler); nothing before the first observation.

The controller runs in process with a hand-driven clock where exact times matter, and
as a real `xce controller` on loopback (tests/live.py) with an in-process provisioner
whose provider is driven by the test (hosts join when the test registers them).
"""

from __future__ import annotations

import asyncio
import json
import signal
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hand_provider import QUIET, HandProvider, join, rounds
from live import LiveCluster, live_cluster, skip_unless_linux, wait_for

from xce.config import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller, Settings
from xce.controller.problems import ApiProblem
from xce.controller.store import SqliteStore
from xce.controller.supply import catalog, set_catalog
from xce.model.api import CatalogRequest, RegisterRequest
from xce.model.events import (
    HostExpected,
    InstanceRecorded,
    RequestRecorded,
    SupplyChanged,
)
from xce.model.job_ids import jobs_column
from xce.policy import RequestHosts
from xce.provisioner.daemon import Provisioner
from xce.provisioner.leadtime import LeadTimes

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  burst: {type: boolean}
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: burst, provider: hand, slots: 2, max: 4, resources: {burst: true},
       expected_lead_time: 120}
policy:
  persistence: 0
  max_lifetime: 0
"""
ADMIN = Identity("root-admin", "admin")
BURST = "select[burst]"


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- pure parts
def test_the_lead_time_is_the_median_of_the_recent_observations() -> None:
    seen = LeadTimes(recent=3)
    assert seen.estimate("t") is None and seen.changed("t", None) is None, \
        "no observation: nothing to publish, the configured value applies"
    seen.observe("t", "t-1", requested=100, joined=110)
    seen.observe("t", "t-2", requested=100, joined=130)
    seen.observe("t", "t-3", requested=100, joined=200)
    assert seen.estimate("t") == 30, "the median, not the mean: one slow host moves it little"
    seen.observe("t", "t-1", requested=100, joined=500)
    assert seen.estimate("t") == 30, "a host seen again is the same observation"
    seen.observe("t", "t-4", requested=190, joined=210)
    assert seen.estimate("t") == 30, "the oldest join (t-1, 10 s) made room for t-4 (20 s)"
    seen.observe("t", "t-0", requested=0, joined=1)
    assert seen.estimate("t") == 30, "an observation older than the kept ones is dropped"
    assert seen.changed("t", None) == 30
    assert seen.changed("t", 30.01) is None, "a change below the tolerance is not a fact"
    assert seen.changed("t", 25) == 30
    assert seen.estimate("u") is None, "per template"


def test_observations_come_from_joined_hosts_of_known_requests() -> None:
    seen = LeadTimes()
    hosts: list[dict[str, Any]] = [
        {"name": "b-1", "template": "burst", "joined": 105.0, "request": "r1"},
        {"name": "b-2", "template": "burst", "joined": None, "request": "r1"},  # expected
        {"name": "b-3", "template": "burst", "joined": 109.0, "request": "gone"},
        {"name": "o-1", "template": "other", "joined": 103.0, "request": "r1"},
        {"name": "n1", "template": None, "joined": None, "request": ""},
    ]
    seen.observe_hosts(hosts, {"r1": 100.0}, ["burst"])
    assert seen.estimate("burst") == 5 and seen.estimate("other") is None


@pytest.mark.parametrize(("jobs", "shown"), [
    ([], "-"), ([7], "7"), ([7, 9], "7,9"), ([7, 9, 3], "7,9,3"),
    (list(range(1203, 1222)), "1203,1204,+17"),
])
def test_the_jobs_column_keeps_the_order_and_counts_the_rest(jobs: list[int],
                                                            shown: str) -> None:
    assert jobs_column(jobs) == shown


# ---------------------------------------------------------------- the controller, in process
def _controller(path: Path, clock: Clock, snapshot_every: int = 100_000) -> Controller:
    return Controller(load_config_text(CONFIG), SqliteStore(path / "xce.db"),
                      Settings(snapshot_every=snapshot_every), clock)


def _in_process(path: Path, clock: Clock,
                body: Callable[[Callable[[], Awaitable[Controller]]], Awaitable[None]]) -> None:
    """Run `body(start)`: `start()` starts a controller on the test's store (closing
    the one before: a restart)."""
    made: list[Controller] = []

    async def start() -> Controller:
        if made:
            await made[-1].close()
            made[-1].store.close()
        made.append(_controller(path, clock))
        await made[-1].start()
        return made[-1]

    async def main() -> None:
        try:
            await body(start)
        finally:
            if made:
                await made[-1].close()
                made[-1].store.close()

    asyncio.run(main())


def _supply_facts(ctl: Controller) -> list[SupplyChanged]:
    return [f.event for f in ctl.store.read(0) if isinstance(f.event, SupplyChanged)]


def test_in_flight_hosts_reach_the_scheduler_with_their_request_times(tmp_path: Path) -> None:
    clock = Clock()

    async def body(start: Callable[[], Awaitable[Controller]]) -> None:
        ctl = await start()
        first = await ctl.request_hosts(ADMIN, "burst", "", "r1", 2, 60)
        clock.now = 1_010
        [(late, _)] = await ctl.request_hosts(ADMIN, "burst", "", "r2", 1, 600)
        assert (ctl.state.in_flight["burst"], ctl.state.requested["burst"]) == (
            3, [1_000, 1_000, 1_010]), "each host at its own request time"
        assert ctl.state.arrivals("burst", 1_011) == [1_120, 1_120, 1_130], \
            "planned at request time + expected_lead_time"

        clock.now = 1_020
        (joining, _), (failing, _) = first
        await ctl.register(joining.name, RegisterRequest(slots=2))
        assert ctl.state.requested["burst"] == [1_000, 1_010], "the joined one left"
        await ctl.remove(ADMIN, late.name)
        assert (ctl.state.in_flight["burst"], ctl.state.requested["burst"]) == (1, [1_000])
        clock.now = 1_061  # past the first request's deadline
        await ctl.watch_hosts()
        assert ctl.view.expected[failing.name].state == "failed"
        assert (ctl.state.in_flight["burst"], ctl.state.requested["burst"]) == (0, [])
        told = [(f.in_flight, f.requested) for f in _supply_facts(ctl)]
        assert told == [
            ({"burst": 2}, {"burst": [1_000, 1_000]}),
            ({"burst": 3}, {"burst": [1_000, 1_000, 1_010]}),
            ({"burst": 2}, {"burst": [1_000, 1_010]}),
            ({"burst": 1}, {"burst": [1_000]}),
            ({"burst": 0}, {"burst": []}),
        ], "every in-flight change is a durable fact with the request times"

    _in_process(tmp_path, clock, body)


def test_refused_and_vanished_hosts_leave_with_their_times(tmp_path: Path) -> None:
    clock = Clock()

    async def body(start: Callable[[], Awaitable[Controller]]) -> None:
        ctl = await start()
        await ctl.request_hosts(ADMIN, "burst", "", "r1", 2, 600)
        clock.now = 1_005
        [(kept, _)] = await ctl.request_hosts(ADMIN, "burst", "", "r2", 1, 600)
        clock.now = 1_006
        await ctl.refuse_request(ADMIN, "r1", "capacity: none left")
        assert ctl.state.requested["burst"] == [1_005]
        await ctl.accept_request(ADMIN, "r2", {kept.name: "i-1"})
        await ctl.vanished(ADMIN, kept.name, "gone")
        assert (ctl.state.in_flight["burst"], ctl.state.requested["burst"]) == (0, [])

    _in_process(tmp_path, clock, body)


@pytest.mark.parametrize("snapshot", [False, True], ids=["log", "snapshot"])
def test_a_restart_rebuilds_the_request_times(tmp_path: Path, snapshot: bool) -> None:
    clock = Clock()

    async def body(start: Callable[[], Awaitable[Controller]]) -> None:
        ctl = await start()
        await ctl.request_hosts(ADMIN, "burst", "", "r1", 2, 600, jobs=[4, 2])
        clock.now = 1_030
        await ctl.request_hosts(ADMIN, "burst", "", "r2", 1, 600)
        if snapshot:
            await ctl.snapshot()
        before = len(list(ctl.store.read(0)))
        clock.now = 1_100
        again = await start()
        assert (again.state.in_flight["burst"], again.state.requested["burst"]) == (
            3, [1_000, 1_000, 1_030])
        assert len(list(again.store.read(0))) == before, "nothing to correct: no new fact"
        assert again.records.requests["r1"].jobs == [4, 2], "the jobs are durable"
        assert again.records.requests["r2"].jobs == []

    _in_process(tmp_path, clock, body)


def test_a_log_without_request_times_is_corrected_at_start(tmp_path: Path) -> None:
    """A log written before request times were sent: the expected-host records are the
    truth, and one fact at start gives the scheduler their times."""
    clock = Clock()

    async def body(start: Callable[[], Awaitable[Controller]]) -> None:
        ctl = await start()
        await ctl.commit(1_000, [
            RequestRecorded("old", "hand", "burst", 1, "root-admin", 1_000),
            HostExpected("burst-1", "burst", "hand", "old", "0" * 64, 5_000, 1_000),
            InstanceRecorded("burst-1", "old", "hand", "burst", 1_000),
            SupplyChanged(in_flight={"burst": 1}, time=1_000),  # as written then
        ])
        ctl.view.last_host_number = 1
        clock.now = 1_200
        again = await start()
        assert again.state.requested["burst"] == [1_000]
        assert again.state.arrivals("burst", 1_200) == [1_201], \
            "requested 200 s ago with a 120 s lead time: overdue, expected any second"
        last = _supply_facts(again)[-1]
        assert (last.in_flight, last.requested, last.time) == (
            {"burst": 1}, {"burst": [1_000]}, 1_200)

    _in_process(tmp_path, clock, body)


def test_the_runtime_lead_time_replaces_the_configured_one(tmp_path: Path) -> None:
    clock = Clock()

    async def body(start: Callable[[], Awaitable[Controller]]) -> None:
        ctl = await start()
        [burst] = catalog(ctl).templates
        assert (burst.lead_time, burst.runtime_lead_time) == (120, None)
        await set_catalog(ctl, CatalogRequest(lead_time={"burst": 42.5}))
        assert ctl.state.lead_time("burst") == 42.5
        [burst] = catalog(ctl).templates
        assert (burst.lead_time, burst.runtime_lead_time) == (42.5, 42.5)
        again = await start()
        assert again.state.lead_time("burst") == 42.5, "a durable fact"
        await set_catalog(again, CatalogRequest(lead_time={"burst": None}))
        assert again.state.lead_time("burst") == 120, "null: back to expected_lead_time"
        with pytest.raises(ApiProblem, match="unknown template 'nope'"):
            await set_catalog(again, CatalogRequest(lead_time={"nope": 1}))

    _in_process(tmp_path, clock, body)


# ---------------------------------------------------------------- live, on loopback
def _demand_jobs(cluster: LiveCluster, count: int) -> list[int]:
    def found() -> list[int] | None:
        demand = cluster.ok("GET", "/demand").get("demand") or {"hosts": []}
        hosts = [h for h in demand["hosts"] if h["template"] == "burst"]
        return hosts[0]["jobs"] if hosts and hosts[0]["count"] == count else None

    return wait_for(found, 10, f"demand for {count} burst hosts")


def _recorded_supply(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    return [line["e"] for line in lines
            if "e" in line and line["e"]["event"] == "SupplyChanged"]


@skip_unless_linux
def test_requests_carry_their_jobs_and_joins_publish_the_lead_time(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(record=recording, extra=QUIET)
        jobs = [cluster.submit(["sleep", "60"], n=2, res=BURST) for _ in range(4)]
        assert _demand_jobs(cluster, 4) == jobs
        hand = HandProvider()
        prov = Provisioner(cluster.url, cluster.token("prov"), "prov-a",
                           load_config_text(CONFIG), {"hand": hand},
                           status_file=tmp_path / "status.json")
        [asked] = [a for a in rounds(prov) if isinstance(a, RequestHosts)]
        assert asked.jobs == tuple(jobs), "the policy names the demand's jobs"
        [request] = cluster.ok("GET", "/requests")["requests"]
        assert (request["count"], request["jobs"]) == (4, jobs), request
        rid = request["request"]

        # Before any join: nothing observed, the configured lead time applies.
        [burst] = cluster.ok("GET", "/catalog")["templates"]
        assert (burst["lead_time"], burst["runtime_lead_time"]) == (120, None)

        # The CLI: a JOBS column (truncated), the full list in JSON, ranges with -l.
        shown = cluster.xce("requests", check=True).stdout.splitlines()
        assert shown[0].split() == ["REQUEST", "PROVIDER", "TEMPLATE", "HOSTS", "STATE",
                                    "SINCE", "JOBS", "REASON"]
        assert shown[1].split()[7] == f"{jobs[0]},{jobs[1]},+2", shown  # "in flight"
        assert json.loads(cluster.xce("requests", "--json", check=True).stdout)[
            "requests"][0]["jobs"] == jobs
        assert f"  for job(s) {jobs[0]}-{jobs[-1]}" in cluster.xce(
            "requests", "-l", check=True).stdout
        status = cluster.xce("provisioner", "status", "--work", str(tmp_path), check=True)
        table = status.stdout.splitlines()
        at = table.index("Open requests:")
        assert table[at + 1].split() == ["REQUEST", "PROVIDER", "TEMPLATE", "HOSTS",
                                         "STATE", "JOBS"]
        assert table[at + 2].split() == [rid, "hand", "burst", "4", "in", "flight",
                                         f"{jobs[0]},{jobs[1]},+2"], status.stdout
        told = json.loads(cluster.xce("provisioner", "status", "--work", str(tmp_path),
                                      "--json", check=True).stdout)
        assert told["requests"][0]["jobs"] == jobs
        assert told["decisions"][0]["jobs"] == jobs

        # Hosts join at different times: two soon, two later.
        names = sorted(hand.grants)
        time.sleep(0.5)
        for name in names[:2]:
            assert join(cluster, hand.grants[name]) == 200
        time.sleep(1.0)
        for name in names[2:]:
            assert join(cluster, hand.grants[name]) == 200
        rounds(prov)
        hosts = cluster.hosts()
        waited = [hosts[n]["joined"] - request["created"] for n in names]
        [burst] = cluster.ok("GET", "/catalog")["templates"]
        assert burst["runtime_lead_time"] == pytest.approx(statistics.median(waited),
                                                           abs=1e-3), (burst, waited)
        assert burst["lead_time"] == burst["runtime_lead_time"], "it replaces the configured"
        # (the CLI calls between the request and the joins take seconds each on a
        # loaded machine: 10.4 s once with two test runs side by side)
        assert 0.5 < burst["runtime_lead_time"] < 60
        history = cluster.xce("history", "-n", "0", check=True).stdout
        assert f"lead time burst {burst['runtime_lead_time']:.1f} s" in history
        assert f"for job(s) {', '.join(map(str, jobs))}" in history
        rounds(prov)
        history = cluster.xce("history", "-n", "0", check=True).stdout
        assert history.count("lead time burst") == 1, "an unchanged estimate is not sent again"

        cluster.stop_controller(signal.SIGTERM)  # closes the recording
        cluster.start_controller(extra=QUIET)
        assert cluster.ok("GET", f"/requests/{rid}")["jobs"] == jobs, "durable"
        [again] = cluster.ok("GET", "/catalog")["templates"]
        assert again["runtime_lead_time"] == burst["runtime_lead_time"], "durable"

    supply = _recorded_supply(recording)
    times = [s["requested"]["burst"] for s in supply if "burst" in s.get("requested", {})]
    made = request["created"]
    assert times[0] == [made] * 4, "the request: four hosts requested then"
    assert [len(t) for t in times] == [4, 3, 2, 1, 0], "each join takes one out"
    leads = [s["lead_time"]["burst"] for s in supply if s.get("lead_time")]
    assert leads == [burst["runtime_lead_time"]], "the scheduler got the estimate once"


@skip_unless_linux
def test_bad_jobs_and_lead_times_change_nothing(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.add_token("provisioner", "other")
        cluster.start_controller(extra=QUIET)
        cluster.lease("prov", "hand")
        for jobs in ([0], [-3], ["x"], list(range(1, 100_002))):
            answer = cluster.api("POST", "/requests",
                                 {"template": "burst", "count": 1, "jobs": jobs}, "prov")
            assert answer.status == 400, answer
        for lead in (-1, "5m", 1e12):
            answer = cluster.api("POST", "/catalog", {"lead_time": {"burst": lead}}, "prov")
            assert answer.status == 400, answer
        unknown = cluster.api("POST", "/catalog", {"lead_time": {"nope": 5}}, "prov")
        assert unknown.status == 400 and "unknown template 'nope'" in unknown.json["error"]
        fenced = cluster.api("POST", "/catalog", {"lead_time": {"burst": 5}}, "other")
        assert fenced.status == 409, "only under the provider's lease"
        assert cluster.ok("GET", "/requests?all=1")["requests"] == []
        [burst] = cluster.ok("GET", "/catalog")["templates"]
        assert (burst["lead_time"], burst["runtime_lead_time"]) == (120, None)

        cluster.ok("POST", "/catalog", {"lead_time": {"burst": 42}}, "prov")
        shown = json.loads(cluster.xce("demand", "-l", "--json", check=True).stdout)
        [burst] = shown["catalog"]["templates"]
        assert (burst["lead_time"], burst["runtime_lead_time"]) == (42, 42)
        cluster.ok("POST", "/catalog", {"lead_time": {"burst": None}}, "prov")
        [burst] = cluster.ok("GET", "/catalog")["templates"]
        assert (burst["lead_time"], burst["runtime_lead_time"]) == (120, None), \
            "null: back to expected_lead_time"
