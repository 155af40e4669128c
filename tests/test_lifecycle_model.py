"""The lifecycle model (xce.model.lifecycle, docs/layers.md "Lifecycles"): every table
has a reason on each edge and refuses any other change naming the allowed targets; the
states' values are the strings facts, snapshots, recordings and state files store (a
previous release's data reads the same); causes come from the fact, or, for a fact
written before facts carried one, from what its reason stored."""

from __future__ import annotations

import json
import shutil
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec
import pytest

from xce.model.causes import Cause
from xce.model.events import ExpectedHostEnded, HostAdded, HostStateChanged, InstanceChanged
from xce.model.lifecycle import (
    CANCELLED,
    CLOSE_REASONS,
    HOST_LIFE,
    INSTANCE_LIFE,
    LEASE_LIFE,
    LIFECYCLES,
    MACHINE_LIFE,
    RECLAIMED,
    REQUEST_LIFE,
    TOKEN_LIFE,
    TOKEN_STEPS,
    HostState,
    InstanceState,
    LeaseState,
    Lifecycle,
    MachineState,
    RequestState,
    TokenState,
    TokenStep,
    TransitionError,
    host_change,
    lease_state,
)

RELEASE = Path(__file__).resolve().parent / "data" / "release-0.1"

# The strings each lifecycle's states are stored as (facts, snapshots, the API, state
# files): they must never change.
STORED: dict[str, tuple[type[StrEnum], list[str]]] = {
    "host": (HostState, ["expected", "unavail", "ok", "closed", "unreach", "lost", "failed",
                         "decommissioned", "removed"]),
    "request": (RequestState, ["requested", "in flight", "fulfilled", "partially fulfilled",
                               "failed", "returning", "returned"]),
    "instance": (InstanceState, ["requested", "running", "joined", "draining", "releasing",
                                 "released", "lost"]),
    "lease": (LeaseState, ["live", "expired", "released"]),
    "tokens": (TokenState, ["lender", "in_flight", "borrowed", "returning"]),
    "machine": (MachineState, ["requesting", "executing", "running", "failed", "released",
                               "returning", "returned", "return_failed", "reclaimed"]),
}
TABLES = sorted(LIFECYCLES.items())


def test_every_lifecycle_is_listed_with_its_stored_strings() -> None:
    assert set(LIFECYCLES) == set(STORED)
    for name, (states, values) in STORED.items():
        assert LIFECYCLES[name].states is states, name
        assert [s.value for s in states] == values, name
        for state in states:
            assert state == state.value and str(state) == state.value
            assert f"{state}" == state.value
            assert msgspec.json.encode(state) == json.dumps(state.value).encode()
    assert [s.value for s in TokenStep] == ["borrow_requested", "granted", "refused",
                                            "return_requested", "returned"]
    assert [c.value for c in Cause] == ["admin", "idle", "lifetime", "reclaim", "drained",
                                        "cancelled", "refused"]


@pytest.mark.parametrize(("name", "table"), TABLES)
def test_every_edge_has_a_reason_and_is_allowed(name: str, table: Lifecycle[Any]) -> None:
    assert table.edges, name
    for (current, target), reason in table.edges.items():
        assert isinstance(reason, str) and reason.strip(), (name, current, target)
        assert current in table.states and target in table.states
        assert table.allows(current, target)
        assert table.reason_for("x", current, target) == reason
        assert table.reason_for("x", current.value, target.value) == reason
        assert target in table.targets(current)
    assert set(table.final) <= set(table.states)


@pytest.mark.parametrize(("name", "table"), TABLES)
def test_every_state_is_reached_or_a_start(name: str, table: Lifecycle[Any]) -> None:
    touched = {s for edge in table.edges for s in edge}
    starts = {"host": {HostState.EXPECTED, HostState.UNAVAIL, HostState.OK},
              "request": {RequestState.REQUESTED}, "instance": {InstanceState.REQUESTED},
              "lease": {LeaseState.LIVE}, "tokens": {TokenState.LENDER},
              "machine": {MachineState.REQUESTING}}[name]
    assert touched | starts == set(table.states), name


@pytest.mark.parametrize(("name", "table"), TABLES)
def test_every_other_change_is_refused_naming_the_allowed_targets(
        name: str, table: Lifecycle[Any]) -> None:
    for current in table.states:
        allowed = table.targets(current)
        assert allowed == sorted(allowed)
        for target in table.states:
            if (current, target) in table.edges:
                continue
            assert not table.allows(current, target)
            with pytest.raises(TransitionError) as caught:
                table.reason_for("x-1", current, target, "some reason")
            assert str(caught.value) == (
                f"{table.subject} x-1 is {current}: it cannot become {target} "
                f"(from {current}: {', '.join(allowed) or 'nothing'})"), (name, current)
            assert isinstance(caught.value, ValueError)


def test_messages_name_what_each_is() -> None:
    with pytest.raises(TransitionError, match=r"^request r1 is failed: it cannot become "
                                              r"in flight \(from failed: nothing\)$"):
        REQUEST_LIFE.reason_for("r1", RequestState.FAILED, RequestState.IN_FLIGHT)
    with pytest.raises(TransitionError, match=r"^instance of host c5-1 is requested: it "
                       r"cannot become draining \(from requested: released, running\)$"):
        INSTANCE_LIFE.reason_for("c5-1", "requested", "draining")
    with pytest.raises(TransitionError, match=r"^machine of host c5-1 is returned: "):
        MACHINE_LIFE.reason_for("c5-1", MachineState.RETURNED, MachineState.RUNNING)
    with pytest.raises(TransitionError, match=r"^lease on provider aws is expired: it "
                       r"cannot become released \(from expired: live\)$"):
        LEASE_LIFE.reason_for("aws", LeaseState.EXPIRED, LeaseState.RELEASED)
    with pytest.raises(TransitionError, match=r"^tokens of pool vcs is lender: "):
        TOKEN_LIFE.reason_for("vcs", TokenState.LENDER, TokenState.BORROWED)


def test_a_given_reason_wins_and_a_close_takes_only_close_reasons() -> None:
    assert HOST_LIFE.reason_for("h", "expected", "failed", "no capacity") == "no capacity"
    assert INSTANCE_LIFE.reason_for("h", "running", "lost", "gone") == "gone"
    for reason in CLOSE_REASONS:
        assert HOST_LIFE.reason_for("h", "ok", "closed", reason) == reason
    with pytest.raises(TransitionError, match=r"^host h: close reason must be one of admin, "
                                              r"idle, lifetime, reclaim$"):
        HOST_LIFE.reason_for("h", "ok", "closed", "bored")
    # only the edge from ok checks: an agent back to a host closed for idle keeps it
    assert HOST_LIFE.reason_for("h", "unreach", "closed", "idle") == "idle"


def test_a_host_change_records_its_cause() -> None:
    assert host_change("h", HostState.OK, HostState.CLOSED) == ("admin", Cause.ADMIN)
    assert host_change("h", "ok", "closed", Cause.LIFETIME) == ("lifetime", Cause.LIFETIME)
    assert host_change("h", "ok", "lost", cause=Cause.RECLAIM) == (RECLAIMED, Cause.RECLAIM)
    assert host_change("h", "unreach", "lost") == ("unreachable too long", None)
    assert host_change("h", "expected", "removed", cause=Cause.CANCELLED) == (
        "cancelled", Cause.CANCELLED)
    with pytest.raises(TransitionError):
        host_change("h", "ok", "decommissioned")


def test_facts_without_a_cause_get_the_one_their_reason_stood_for() -> None:
    """Release 0.1 wrote no causes: what its facts stored says which they had (the one
    place a reason's text is read); a fact's own cause always wins."""
    old = HostStateChanged("c-1", "lost", 5.0, RECLAIMED)
    assert old.cause is None
    assert HOST_LIFE.cause_of(old.state, old.reason, old.cause) is Cause.RECLAIM
    assert HOST_LIFE.cause_of("lost", "unreachable too long") is None
    for reason in ("admin", "idle", "lifetime", "reclaim"):
        assert HOST_LIFE.cause_of("closed", reason) is Cause(reason)
    assert HOST_LIFE.cause_of("closed", "heartbeat again") is None
    assert HOST_LIFE.cause_of("lost", RECLAIMED, Cause.ADMIN) is Cause.ADMIN
    assert INSTANCE_LIFE.cause_of("released", CANCELLED) is Cause.CANCELLED
    assert INSTANCE_LIFE.cause_of("lost", RECLAIMED) is Cause.RECLAIM
    assert INSTANCE_LIFE.cause_of("released", "released by the provider") is None
    assert REQUEST_LIFE.cause_of("failed", "no host joined") is None
    for table in (HOST_LIFE, INSTANCE_LIFE):  # each stored reason is an edge's (a close's)
        for (state, reason) in table.stored_causes():
            assert state in table.states
            assert reason in CLOSE_REASONS or any(
                t == state and r == reason for (_f, t), r in table.edges.items())


def test_old_facts_decode_without_a_cause_and_new_ones_round_trip() -> None:
    for kind, body in (
        (HostStateChanged, {"name": "c-1", "state": "lost", "time": 1.0, "reason": RECLAIMED}),
        (ExpectedHostEnded, {"name": "c-2", "state": "removed", "reason": "cancelled"}),
        (InstanceChanged, {"host": "c-1", "state": "lost", "reason": RECLAIMED}),
    ):
        raw = json.dumps({"event": kind.__name__, **body}).encode()
        assert msgspec.json.decode(raw, type=kind).cause is None  # type: ignore[attr-defined]
    new = HostStateChanged("c-1", HostState.LOST, 1.0, RECLAIMED, Cause.RECLAIM)
    raw = msgspec.json.encode(new)
    assert b'"state":"lost"' in raw and b'"cause":"reclaim"' in raw
    assert msgspec.json.decode(raw, type=HostStateChanged) == new


def test_the_previous_release_stores_only_these_states(tmp_path: Path) -> None:
    from xce.controller.store import SqliteStore

    lines = (RELEASE / "recording.jsonl").read_text().splitlines()[1:]
    states = {json.loads(line).get("e", {}).get("state") for line in lines} - {None}
    assert states and states <= {s.value for s in HostState}
    shutil.copy(RELEASE / "xce.db", tmp_path / "xce.db")
    store = SqliteStore(tmp_path / "xce.db")
    try:
        facts = [fact.event for fact in store.read(after=0)]
    finally:
        store.close()
    hosts = {f.state for f in facts if isinstance(f, HostStateChanged | HostAdded)}
    assert hosts and hosts <= {s.value for s in HostState}


def test_lease_states_follow_from_what_a_lease_stores() -> None:
    assert lease_state(False, 10.0, 5.0) is LeaseState.LIVE
    assert lease_state(False, 10.0, 10.0) is LeaseState.EXPIRED
    assert lease_state(True, 10.0, 5.0) is LeaseState.RELEASED
    assert set(LEASE_LIFE.targets(LeaseState.LIVE)) == set(LeaseState)


def test_each_token_step_is_one_edge() -> None:
    assert set(TOKEN_STEPS) == set(TokenStep)
    assert sorted(TOKEN_STEPS.values()) == sorted(TOKEN_LIFE.edges)


def test_the_script_providers_records_use_the_machine_states() -> None:
    from xce.provisioner.providers.script import ALIVE, MachineRecord

    record = MachineRecord(id="p-h1", host="h1", template="t", request="r", started=1.0)
    assert record.state is MachineState.REQUESTING
    raw = msgspec.json.encode(record)
    assert b'"state":"requesting"' in raw
    for state in MachineState:
        decoded = msgspec.json.decode(raw.replace(b'"requesting"', f'"{state}"'.encode()),
                                      type=MachineRecord)
        assert decoded.state is state
    assert set(ALIVE) == {MachineState.EXECUTING, MachineState.RUNNING}
    assert not any(f in ALIVE for f in MACHINE_LIFE.final)
    for final in MACHINE_LIFE.final:
        assert MACHINE_LIFE.targets(final) == []
