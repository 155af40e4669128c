"""Provisioning records (xce.controller.records): requests and instances follow their
hosts through one transition table each (xce.model.lifecycle), a reason for every edge,
each change with its host change's cause."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.controller.records import ALL_CANCELLED, RecordBook
from xce.model.causes import Cause
from xce.model.events import (
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    InstanceChanged,
    InstanceRecorded,
    RequestChanged,
    RequestRecorded,
)
from xce.model.lifecycle import (
    CANCELLED,
    INSTANCE_LIFE,
    RECLAIMED,
    REQUEST_LIFE,
    TransitionError,
)

INSTANCE_TRANSITIONS = INSTANCE_LIFE.edges
REQUEST_TRANSITIONS = REQUEST_LIFE.edges


def book_with(count: int) -> RecordBook:
    book = RecordBook()
    book.apply(RequestRecorded("r1", "aws", "c5", count, "prov-a", 1.0))
    for n in range(1, count + 1):
        book.apply(InstanceRecorded(f"c5-{n}", "r1", "aws", "c5", 1.0))
    return book


def joined(name: str) -> HostAdded:
    return HostAdded(name, 4, "X86_64", "", {}, "c5", "ok", 5.0, provider="aws")


def feed(book: RecordBook, events: list[Event], now: float = 5.0) -> list[Event]:
    """Apply host facts as the controller does; the record facts that followed."""
    made: list[Event] = []
    for event in events:
        book.apply(event)
        for derived in book.follow(event, now):
            book.apply(derived)
            made.append(derived)
    return made


def changes(facts: list[Event]) -> list[tuple[str, str, str]]:
    return [
        (f.host, f.state, f.reason) if isinstance(f, InstanceChanged)
        else (f.request, f.state, f.reason)
        for f in facts if isinstance(f, InstanceChanged | RequestChanged)
    ]


def accept(book: RecordBook, *hosts: str) -> list[Event]:
    made: list[Event] = []
    for host in hosts:
        made += book.change_instance(host, "running", 2.0, instance_id=f"i-{host}")
    return made


def test_a_request_fulfilled_then_returned() -> None:
    book = book_with(2)
    assert changes(accept(book, "c5-1", "c5-2")) == [
        ("c5-1", "running", "started by the provider"),
        ("r1", "in flight", "accepted by the provider"),
        ("c5-2", "running", "started by the provider"),
    ]
    assert changes(feed(book, [joined("c5-1"), joined("c5-2")])) == [
        ("c5-1", "joined", "joined the cluster"),
        ("c5-2", "joined", "joined the cluster"),
        ("r1", "fulfilled", "every host joined"),
    ]
    assert changes(feed(book, [
        HostStateChanged("c5-1", "closed", 6.0, "idle"),
        HostStateChanged("c5-1", "decommissioned", 7.0, "decommissioned"),
        HostRemoved("c5-1", 8.0),
        HostStateChanged("c5-2", "closed", 6.0, "lifetime"),
        HostStateChanged("c5-2", "ok", 6.5, "opened"),
        HostStateChanged("c5-2", "closed", 6.0, "admin"),  # an admin's close is no drain
        HostStateChanged("c5-2", "decommissioned", 7.0, "decommissioned"),
        HostRemoved("c5-2", 8.0),
    ])) == [
        ("c5-1", "draining", "idle"),
        ("c5-1", "releasing", "decommissioned"),
        ("r1", "returning", "hosts are being given back"),
        ("c5-1", "released", "released by the provider"),
        ("c5-2", "draining", "lifetime"),
        ("c5-2", "joined", "opened again"),
        ("c5-2", "releasing", "decommissioned"),
        ("c5-2", "released", "released by the provider"),
        ("r1", "returned", "every host given back"),
    ]
    assert book.instances["c5-1"].instance_id == "i-c5-1"


def test_a_join_deadline_makes_a_request_partially_fulfilled() -> None:
    book = book_with(2)
    accept(book, "c5-1", "c5-2")
    assert changes(feed(book, [
        joined("c5-1"),
        ExpectedHostEnded("c5-2", "failed", "join deadline passed", 9.0),
        ExpectedHostEnded("c5-2", "removed", "cleared", 10.0),
    ])) == [
        ("c5-1", "joined", "joined the cluster"),
        ("c5-2", "releasing", "join deadline passed"),
        ("r1", "partially fulfilled", "some hosts joined, the others failed"),
        ("c5-2", "released", "released by the provider"),
    ]


def test_no_host_joined_fails_the_request() -> None:
    book = book_with(1)
    accept(book, "c5-1")
    assert changes(feed(book, [ExpectedHostEnded("c5-1", "failed", "join deadline passed")])) \
        == [("c5-1", "releasing", "join deadline passed"), ("r1", "failed", "no host joined")]


def test_a_refused_request_releases_its_instances_with_the_reason() -> None:
    book = book_with(2)
    made = book.change_request("r1", "failed", 2.0, "capacity: no c5 in eu-west-1a")
    made += feed(book, [ExpectedHostEnded(f"c5-{n}", "removed", "refused: capacity: no c5",
                                          cause=Cause.REFUSED) for n in (1, 2)])
    assert changes(made) == [
        ("r1", "failed", "capacity: no c5 in eu-west-1a"),
        ("c5-1", "released", "refused: capacity: no c5"),
        ("c5-2", "released", "refused: capacity: no c5"),
    ]
    assert {i.cause for i in book.instances.values()} == {Cause.REFUSED}


def test_cancelled_hosts_release_their_instances_as_cancelled() -> None:
    """The cause, not the reason's words, says an instance was cancelled: started by
    the provider or not, the request then says every host was cancelled."""
    book = book_with(2)
    accept(book, "c5-1")
    made = feed(book, [ExpectedHostEnded(f"c5-{n}", "removed", "cancelled",
                                         cause=Cause.CANCELLED) for n in (1, 2)])
    assert changes(made) == [
        ("c5-1", "released", CANCELLED),
        ("c5-2", "released", CANCELLED),
        ("r1", "failed", ALL_CANCELLED),
    ]
    assert all(isinstance(f, InstanceChanged) and f.cause is Cause.CANCELLED
               for f in made[:2])


def test_a_host_fact_without_a_cause_has_the_one_its_reason_stood_for() -> None:
    """Facts of release 0.1 carry no cause: a close's reason is its cause's value, a host
    lost as RECLAIMED was reclaimed; an instance change is read the same way."""
    book = book_with(2)
    accept(book, "c5-1", "c5-2")
    feed(book, [joined("c5-1"), joined("c5-2")])
    made = feed(book, [HostStateChanged("c5-1", "closed", 6.0, "idle"),
                       HostStateChanged("c5-2", "lost", 6.0, RECLAIMED)])
    assert [(f.host, f.state, f.cause) for f in made if isinstance(f, InstanceChanged)] == [
        ("c5-1", "draining", Cause.IDLE), ("c5-2", "lost", Cause.RECLAIM)]
    old = RecordBook()
    old.apply(RequestRecorded("r1", "aws", "c5", 1, "prov-a", 1.0))
    old.apply(InstanceRecorded("c5-1", "r1", "aws", "c5", 1.0))
    old.apply(InstanceChanged("c5-1", "running", "started by the provider", 2.0))
    old.apply(InstanceChanged("c5-1", "released", CANCELLED, 3.0))
    assert old.instances["c5-1"].cause is Cause.CANCELLED
    requests, instances = old.snapshot()
    instances[0].cause = None  # as a snapshot of release 0.1 decodes
    again = RecordBook()
    again.restore(requests, instances)
    assert again.instances["c5-1"].cause is Cause.CANCELLED


def test_a_host_that_joins_before_its_acceptance_is_recorded() -> None:
    book = book_with(1)
    assert changes(feed(book, [joined("c5-1")])) == [
        ("c5-1", "running", "started by the provider"),
        ("r1", "in flight", "accepted by the provider"),
        ("c5-1", "joined", "joined the cluster"),
        ("r1", "fulfilled", "every host joined"),
    ]


def test_accepting_a_request_whose_host_joined_first_keeps_it_joined() -> None:
    """A fast provider's agent can join before the provisioner reports the provider's
    answer: the late acceptance is no conflict, and the other host becomes running."""
    book = book_with(2)
    feed(book, [joined("c5-1")])
    made = book.accept_instances({"c5-1": "i-1", "c5-2": "i-2"}, 6.0)
    assert [(e.host, e.state, e.instance_id) for e in made
            if isinstance(e, InstanceChanged)] == [("c5-2", "running", "i-2")]
    assert (book.instances["c5-1"].state, book.instances["c5-2"].state) == (
        "joined", "running")


def test_accepting_a_released_instance_changes_nothing() -> None:
    book = book_with(2)
    book.apply(InstanceChanged("c5-2", "released", CANCELLED, 2.0))
    with pytest.raises(TransitionError, match="c5-2"):
        book.accept_instances({"c5-1": "i-1", "c5-2": "i-2"}, 6.0)
    assert book.instances["c5-1"].state == "requested", "checked whole before any change"


def test_a_reclaimed_host_is_lost_and_its_request_returned() -> None:
    book = book_with(1)
    accept(book, "c5-1")
    feed(book, [joined("c5-1")])
    assert changes(feed(book, [HostStateChanged("c5-1", "lost", 9.0, RECLAIMED,
                                                Cause.RECLAIM)])) == [
        ("c5-1", "lost", RECLAIMED),
        ("r1", "returning", "hosts are being given back"),
        ("r1", "returned", "every host given back"),
    ]


def test_an_unreachable_host_is_not_lost_for_its_instance() -> None:
    book = book_with(1)
    accept(book, "c5-1")
    feed(book, [joined("c5-1")])
    assert feed(book, [HostStateChanged("c5-1", "unreach", 9.0, "no heartbeat"),
                       HostStateChanged("c5-1", "lost", 9.0, "unreachable too long")]) == []
    assert book.instances["c5-1"].state == "joined"


def test_a_forbidden_change_names_what_is_allowed() -> None:
    book = book_with(1)
    with pytest.raises(TransitionError, match=r"instance of host c5-1 is requested: it cannot "
                       r"become draining \(from requested: released, running\)"):
        book.change_instance("c5-1", "draining", 2.0)
    with pytest.raises(TransitionError,
                       match="request r1 is requested: it cannot become returned"):
        book.change_request("r1", "returned", 2.0)
    assert book.instances["c5-1"].state == "requested"


def test_records_of_other_hosts_and_static_hosts_are_left_alone() -> None:
    book = book_with(1)
    assert feed(book, [HostAdded("n1", 4, "X86_64", "", {}, None, "ok", 1.0),
                       HostStateChanged("n1", "closed", 2.0, "idle")]) == []


def test_ended_requests_are_forgotten_after_the_clean_period() -> None:
    book = book_with(1)
    accept(book, "c5-1")
    feed(book, [ExpectedHostEnded("c5-1", "failed", "x", 9.0),
                ExpectedHostEnded("c5-1", "removed", "cleared", 10.0)], now=10.0)
    book.forget(before=10.0)
    assert "r1" in book.requests
    book.forget(before=11.0)
    assert book.requests == {} and book.instances == {}


def test_every_edge_has_a_reason_and_every_state_is_reached() -> None:
    for table in (REQUEST_TRANSITIONS, INSTANCE_TRANSITIONS):
        assert all(reason for reason in table.values())
    assert {t for _, t in REQUEST_TRANSITIONS} == {
        "in flight", "fulfilled", "partially fulfilled", "failed", "returning", "returned"}
    assert {t for _, t in INSTANCE_TRANSITIONS} == {
        "running", "joined", "draining", "releasing", "released", "lost"}


# Host facts a provisioned host may go through, as the controller makes them.
HOST_STEPS = st.sampled_from([
    "accept", "join", "drain", "open", "decommission", "remove", "reclaim", "deadline",
    "clear", "cancel",
])


def host_fact(step: str, name: str) -> Event | None:
    return {
        "join": joined(name),
        "drain": HostStateChanged(name, "closed", 5.0, "idle", Cause.IDLE),
        "open": HostStateChanged(name, "ok", 5.0, "opened"),
        "decommission": HostStateChanged(name, "decommissioned", 5.0, "decommissioned"),
        "remove": HostRemoved(name, 5.0),
        "reclaim": HostStateChanged(name, "lost", 5.0, RECLAIMED, Cause.RECLAIM),
        "deadline": ExpectedHostEnded(name, "failed", "join deadline passed", 5.0),
        "clear": ExpectedHostEnded(name, "removed", "cleared", 5.0),
        "cancel": ExpectedHostEnded(name, "removed", "cancelled", 5.0, Cause.CANCELLED),
    }.get(step)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), HOST_STEPS), max_size=30))
def test_every_change_is_an_edge_of_the_tables(steps: list[tuple[int, str]]) -> None:
    """Whatever host facts arrive (even ones the host table would refuse), the records
    only ever move along their tables, and a request's state agrees with its instances."""
    book = book_with(3)
    states = {"r1": "requested", **{f"c5-{n}": "requested" for n in (1, 2, 3)}}
    for number, step in steps:
        name = f"c5-{number}"
        if step == "accept":
            made = (accept(book, name)
                    if book.instances[name].state == "requested" else [])
        else:
            fact = host_fact(step, name)
            assert fact is not None
            made = feed(book, [fact])
        for fact in made:
            if isinstance(fact, InstanceChanged):
                assert (states[fact.host], fact.state) in INSTANCE_TRANSITIONS
                states[fact.host] = fact.state
            elif isinstance(fact, RequestChanged):
                assert (states["r1"], fact.state) in REQUEST_TRANSITIONS
                states["r1"] = fact.state
    instances = list(book.instances.values())
    request = book.requests["r1"]
    if request.state == "fulfilled":
        assert all(i.joined for i in instances)
    if request.state == "returned":
        assert all(i.state in ("released", "lost") for i in instances)
    if request.state in ("requested", "in flight"):
        assert any(i.state in ("requested", "running") for i in instances)
