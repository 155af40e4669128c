"""Following the leader among several controllers (xce.model.controllers): a standby's
503 names the leader; a controller that does not answer gives way to the next."""

from __future__ import annotations

import msgspec
import pytest

from xce.model.api import ApiError, NotLeader
from xce.model.controllers import ControllerAddresses


def standby(leader: str) -> bytes:
    return msgspec.json.encode(NotLeader(f"this controller is a standby: {leader}", 503,
                                         leader))


def test_follows_the_leader_a_standby_names() -> None:
    addresses = ControllerAddresses(" http://a:6820/, http://b:6820 ")
    assert (addresses.urls, addresses.current, addresses.several) == (
        ["http://a:6820", "http://b:6820"], "http://a:6820", True)
    assert addresses.redirected(503, standby("http://b:6820/"))
    assert addresses.current == "http://b:6820"
    assert not addresses.redirected(503, standby("http://b:6820"))  # (already there)
    assert addresses.redirected(503, standby("http://c:6820"))  # a leader not given
    assert addresses.urls == ["http://a:6820", "http://b:6820", "http://c:6820"]


def test_other_answers_are_not_redirections() -> None:
    addresses = ControllerAddresses("http://a:6820,http://b:6820")
    journal = msgspec.json.encode(ApiError("the durable log failed", 503))
    assert not addresses.redirected(503, journal)
    assert not addresses.standby(503, journal)
    assert not addresses.redirected(200, standby("http://b:6820"))
    assert not addresses.redirected(503, b"<html>proxy error</html>")
    assert not addresses.redirected(503, standby(""))  # a takeover: no leader yet
    assert addresses.standby(503, standby(""))
    assert addresses.current == "http://a:6820"


def test_an_unreachable_one_gives_way_to_the_next() -> None:
    addresses = ControllerAddresses("http://a:6820,http://b:6820,http://c:6820")
    seen = []
    for _ in range(4):
        addresses.unreachable()
        seen.append(addresses.current)
    assert seen == ["http://b:6820", "http://c:6820", "http://a:6820", "http://b:6820"]
    single = ControllerAddresses("http://a:6820")
    single.unreachable()
    assert (single.current, single.several) == ("http://a:6820", False)


def test_no_url_is_an_error() -> None:
    with pytest.raises(ValueError, match="no controller URL in ' , '"):
        ControllerAddresses(" , ")
