"""Provider leases and fencing tokens (src/xce/controller/leases.py)."""

from __future__ import annotations

import pytest

from xce.controller.leases import LeaseRefused, LeaseTable
from xce.model.events import LeaseGranted, LeaseReleased


def taken(table: LeaseTable, provider: str, holder: str, ttl: float, now: float) -> int:
    fact = table.grant(provider, holder, ttl, now)
    table.apply(fact)
    return fact.token


def test_tokens_grow_when_the_lease_changes_hands_and_only_then() -> None:
    table = LeaseTable()
    assert taken(table, "aws", "a", 10, 0) == 1
    assert taken(table, "aws", "a", 10, 5) == 1  # a renewal keeps the token
    assert table.leases["aws"].expires == 15
    with pytest.raises(LeaseRefused) as refused:
        table.grant("aws", "b", 10, 14.9)
    assert (refused.value.status, refused.value.message) == (
        409, "provider aws is leased to a for 0.1 s more")
    assert taken(table, "aws", "b", 10, 15) == 2  # expired: b takes over
    assert taken(table, "aws", "a", 10, 25) == 3  # and back: the token never goes back
    assert taken(table, "gcp", "a", 10, 25) == 1  # per provider


def test_fenced_changes() -> None:
    table = LeaseTable()
    with pytest.raises(LeaseRefused) as refused:  # never leased: nobody may act for it
        table.check("aws", "anyone", None, 0)
    assert refused.value.message == ("provider aws is not leased: take its lease "
                                     "(POST /leases/aws) before acting for it")
    token = taken(table, "aws", "a", 10, 0)
    table.check("aws", "a", token, 9.9)
    for holder, sent, now, message in [
        ("a", None, 1, "provider aws is leased: send the fencing token "
                       "(header X-XCE-Fencing-Token)"),
        ("a", 0, 1, "stale fencing token 0 for provider aws (current 1, held by a)"),
        ("b", 1, 1, "provider aws is leased to a, not b"),
        ("a", 1, 10, "the lease on provider aws has expired or was released: take it again"),
    ]:
        with pytest.raises(LeaseRefused) as refused:
            table.check("aws", holder, sent, now)
        assert (refused.value.status, refused.value.message) == (409, message)
    taken(table, "aws", "b", 10, 11)
    with pytest.raises(LeaseRefused):  # the old holder's token is stale for good
        table.check("aws", "a", token, 12)
    table.check("aws", "b", 2, 12)


def test_release_and_rebuild_from_facts() -> None:
    table = LeaseTable()
    with pytest.raises(LeaseRefused) as refused:
        table.release("aws", "a", 1, 0)
    assert (refused.value.status, refused.value.message) == (404, "provider aws is not leased")
    taken(table, "aws", "a", 10, 0)
    with pytest.raises(LeaseRefused):
        table.release("aws", "b", 1, 1)
    fact = table.release("aws", "a", 1, 1)
    assert fact == LeaseReleased("aws", "a", 1, 1)
    table.apply(fact)
    assert taken(table, "aws", "b", 10, 2) == 2  # released: free before its expiry
    rebuilt = LeaseTable()
    for event in (LeaseGranted("aws", "a", 1, 10, 0), fact, LeaseGranted("aws", "b", 2, 12, 2)):
        rebuilt.apply(event)
    assert rebuilt.snapshot() == table.snapshot()
    restored = LeaseTable()
    restored.restore(table.snapshot())
    assert restored.leases == table.leases
