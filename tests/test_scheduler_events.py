"""What reaches the scheduler state (issue 19, part 1): `SchedulerState.apply` takes a
`SchedulerEvent` and refuses anything else, changing nothing; the controller passes on
only scheduler events, so its own records (leases, provisioning requests and
instances, expected hosts, token steps, job accounting) leave `capacity_version`, and with it the
cross-session failure cache, alone, live, on recovery and on replay.

The live acceptance test (a provisioner renewing its lease every round over 10,000
pending jobs) is tests/test_live_failure_cache.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import get_args

import msgspec
import pytest

from xce.config import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller, Settings
from xce.controller.store import SqliteStore, recover
from xce.model.api import SubmitRequest
from xce.model.events import (
    SCHEDULER_EVENTS,
    ConfigLoaded,
    ControllerRecord,
    Event,
    ExpectedHostEnded,
    HostExpected,
    InstanceChanged,
    InstanceRecorded,
    JobAccounted,
    JobSubmitted,
    JobSuspended,
    LeaseGranted,
    LeaseReleased,
    RequestChanged,
    RequestRecorded,
    SchedulerEvent,
    SupplyChanged,
    TokensChanged,
    is_scheduler_event,
)
from xce.model.jobs import JobSpec
from xce.model.recording import Recorder
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events
from xce.sched.state import SchedulerInputError
from xce.sim.replay import replay

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  gpu: {type: boolean}
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: loc, provider: local, slots: 2, max: 3, rank: 1, resources: {gpu: true}}
"""  # (select[gpu]: a job no host present satisfies, but one that could run some day)
ADMIN = Identity("root-admin", "admin")
PROVISIONER = "prov-a"

RECORDS: list[ControllerRecord] = [
    LeaseGranted("local", PROVISIONER, 1, 115.0, 100.0),
    LeaseReleased("local", PROVISIONER, 1, 101.0),
    RequestRecorded("r1", "local", "loc", 1, PROVISIONER, 100.0, (1,)),
    RequestChanged("r1", "in flight", "accepted by the provider", 100.0),
    InstanceRecorded("loc-1", "r1", "local", "loc", 100.0),
    InstanceChanged("loc-1", "running", "started by the provider", 100.0, "i-1"),
    HostExpected("loc-1", "loc", "local", "r1", "0" * 64, 700.0, 100.0),
    ExpectedHostEnded("loc-1", "removed", "cancelled", 100.0),
    TokensChanged("vcs", "borrow_requested", 1.0, 100.0),
    JobAccounted(1, "alice", "normal", "EXIT", 90.0, 100.0, 95.0, 1, {"n1": 1}, 127,
                 failure="unknown user 'alice' on n1", cpu_time=0.0, time=100.0),
    JobSuspended(1, True, 100.0, "alice"),
]


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_event_union_splits_into_scheduler_events_and_controller_records() -> None:
    ours, records = set(get_args(SchedulerEvent)), set(get_args(ControllerRecord))
    assert ours == SCHEDULER_EVENTS and not ours & records, "each fact is one or the other"
    assert ours | records == set(get_args(Event)), "every fact of the log is classified"
    assert {type(r) for r in RECORDS} == records, "the tests below try every record"
    assert all(not is_scheduler_event(r) for r in RECORDS)
    assert is_scheduler_event(JobSubmitted(JobSpec(id=1)))


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_the_scheduler_state_refuses_what_is_not_a_scheduler_event(
        record: ControllerRecord) -> None:
    state = SchedulerState(load_config_text(CONFIG))
    state.apply(JobSubmitted(JobSpec(id=1, queue="normal", res="select[gpu]")))
    before = (state.capacity_version, state_events(state))
    name = type(record).__name__
    with pytest.raises(SchedulerInputError) as refused:
        state.apply(record)  # type: ignore[arg-type]  # (what the types already refuse)
    assert str(refused.value) == (
        f"{name} is not a scheduler event: the scheduler state takes only "
        "xce.model.events.SchedulerEvent"), "the refusal names the type"
    assert (state.capacity_version, state_events(state)) == before, \
        "a refused event changes nothing: above all not capacity_version, which would " \
        "void every bucket's cached failure"


def test_the_controller_keeps_its_records_out_of_the_scheduler_state(tmp_path: Path) -> None:
    """Lease renewals, a provisioning request's records and its instance's progress, a
    lease release: durable facts of the controller that change neither the scheduler
    state nor its capacity_version; only the SupplyChanged of the request's in-flight
    host does. Recovery of that log rebuilds the same state."""
    clock = Clock()
    path = tmp_path / "xce.db"
    config = load_config_text(CONFIG)
    rebuilt: list[SchedulerEvent] = []

    async def main() -> None:
        ctl = Controller(config, SqliteStore(path), Settings(), clock)
        await ctl.start()
        await ctl.submit(ADMIN, SubmitRequest(command=["true"], res="select[gpu]"))
        state = ctl.state

        def seen() -> int:
            return state.capacity_version

        quiet = seen()
        lease = await ctl.lease(Identity(PROVISIONER, "provisioner"), "local", 15)
        for _ in range(3):  # a provisioner renews its lease every round
            clock.now += 1
            await ctl.lease(Identity(PROVISIONER, "provisioner"), "local", 15)
        assert seen() == quiet, "a lease renewal is no scheduler input"

        fenced = Identity(PROVISIONER, "provisioner", lease.token)
        [(host, _token)] = await ctl.request_hosts(fenced, "loc", "", "r1", 1, 600, [1])
        assert seen() == quiet + 1, \
            "of a request's facts only the in-flight count (SupplyChanged) reaches it"
        assert state.in_flight == {"loc": 1}
        requested = seen()
        await ctl.accept_request(fenced, "r1", {host.name: "i-1"})
        clock.now += 1
        await ctl.lease(fenced, "local", 15)
        await ctl.release_lease(fenced, "local", lease.token)
        assert seen() == requested, "instance and request progress, a lease release: none"

        kinds = {type(f.event).__name__ for f in ctl.store.read(0)}
        assert {"LeaseGranted", "LeaseReleased", "RequestRecorded", "RequestChanged",
                "InstanceRecorded", "InstanceChanged", "HostExpected"} <= kinds, kinds
        rebuilt.extend(state_events(state))
        await ctl.close()
        ctl.store.close()

        again = Controller(config, SqliteStore(path), Settings(), clock)
        await again.start()  # recovery reads the records, passes them over
        assert state_events(again.state) == rebuilt
        assert again.leases.leases["local"].released, "the controller's records came back"
        assert again.records.instances[host.name].state == "running"
        await again.close()
        again.store.close()

    asyncio.run(main())
    with SqliteStore(path) as store:
        recovered, _last = recover(store)
    assert state_events(recovered) == rebuilt, "xce.controller.store.recover: the same"


def test_lease_renewals_between_sessions_keep_the_failure_cache() -> None:
    """In process, on the core alone: sessions with only controller records between
    them reuse every bucket's failure (one hit per failing bucket and session); a
    scheduler event that may change what fits (a host closed) makes them evaluate
    again. (The count is Evaluator.quick_failure's, see SchedulerState.failure_cache_hits.)"""
    state = SchedulerState(load_config_text(CONFIG))
    for job, res in enumerate(["select[gpu]", "select[gpu] span[hosts=1]", "select[gpu]"], 1):
        state.apply(JobSubmitted(JobSpec(id=job, queue="normal", n=job, res=res)))
    assert len(state.buckets) == 3
    run_session(state, 10.0)
    assert state.failure_cache_hits == 0, "the first session finds the failures"
    for now in (11.0, 12.0):
        with pytest.raises(SchedulerInputError):
            state.apply(LeaseGranted("local", PROVISIONER, 1, now + 15, now))  # type: ignore[arg-type]
        run_session(state, now)
    assert state.failure_cache_hits == 2 * 3, "each later session reuses the 3 failures"
    state.apply(SupplyChanged(allowance={"loc": 1}, time=13.0))
    run_session(state, 13.0)
    assert state.failure_cache_hits == 2 * 3, "supply changed: every bucket evaluated again"
    run_session(state, 14.0)
    assert state.failure_cache_hits == 3 * 3


def test_a_recording_holds_only_scheduler_events_and_replay_skips_older_records(
        tmp_path: Path) -> None:
    """Live recordings written before the controller kept its records out hold leases
    and requests between the scheduler events: replay passes over them."""
    config = load_config_text(CONFIG)
    path = tmp_path / "old.jsonl"
    state = SchedulerState()
    recorder = Recorder(path, source="live")
    for event in [ConfigLoaded(config),
                  JobSubmitted(JobSpec(id=1, queue="normal", res="select[gpu]"))]:
        state.apply(event)
        recorder.event(1.0, event)
    recorder.session(2.0, run_session(state, 2.0))
    recorder.close()
    lines = path.read_text().splitlines()
    records = [json.dumps({"t": 1.5, "e": msgspec.to_builtins(r)}) for r in RECORDS]
    older = [*lines[:3], *records, lines[3]]
    path.write_text("\n".join(older) + "\n")
    report = replay(path)
    assert report.divergence is None, str(report.divergence)
    assert (report.sessions, report.events) == (1, 2), "only scheduler events are applied"
