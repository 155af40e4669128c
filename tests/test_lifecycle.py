"""The host lifecycle's transition table (xce.model.lifecycle.HOST_LIFE): every edge is
allowed with its reason, everything else is refused naming what is allowed, and the
STATUS labels of `xce hosts`."""

from __future__ import annotations

import pytest

from xce.model.lifecycle import (
    CLOSE_REASONS,
    HOST_LIFE,
    TransitionError,
    status_label,
)

TRANSITIONS = HOST_LIFE.edges
reason_for = HOST_LIFE.reason_for

STATES = sorted({s for edge in TRANSITIONS for s in edge})

# The table as the issue states it: (from, to) -> the reason recorded by default.
EXPECTED_TABLE = {
    ("expected", "ok"): "joined",
    ("expected", "failed"): "join deadline passed",
    ("expected", "removed"): "cancelled",
    ("failed", "removed"): "cleared",
    ("unavail", "ok"): "agent registered",
    ("ok", "closed"): "admin",
    ("closed", "ok"): "opened",
    ("closed", "decommissioned"): "decommissioned",
    ("lost", "decommissioned"): "decommissioned",
    ("decommissioned", "removed"): "released",
    ("ok", "unreach"): "no heartbeat",
    ("closed", "unreach"): "no heartbeat",
    ("unreach", "ok"): "heartbeat again",
    ("unreach", "closed"): "heartbeat again",
    ("unreach", "lost"): "unreachable too long",
    ("lost", "ok"): "agent back",
    ("lost", "closed"): "agent back",
    ("ok", "lost"): "reclaimed by the provider",
    ("closed", "lost"): "reclaimed by the provider",
}


def test_the_table_is_the_documented_one() -> None:
    assert TRANSITIONS == EXPECTED_TABLE
    assert STATES == ["closed", "decommissioned", "expected", "failed", "lost", "ok",
                      "removed", "unavail", "unreach"]


@pytest.mark.parametrize(("edge", "reason"), sorted(TRANSITIONS.items()))
def test_every_edge_is_allowed_with_its_reason(edge: tuple[str, str], reason: str) -> None:
    current, target = edge
    assert reason_for("h1", current, target) == reason
    assert reason_for("h1", current, target, "") == reason


@pytest.mark.parametrize("edge", sorted(
    (f, t) for f in STATES for t in STATES if (f, t) not in TRANSITIONS and f != t))
def test_every_other_edge_is_refused(edge: tuple[str, str]) -> None:
    current, target = edge
    allowed = sorted(t for (f, t) in TRANSITIONS if f == current)
    with pytest.raises(TransitionError) as caught:
        reason_for("h1", current, target)
    assert str(caught.value) == (
        f"host h1 is {current}: it cannot become {target} "
        f"(from {current}: {', '.join(allowed) or 'nothing'})"
    )


@pytest.mark.parametrize(("current", "target", "message"), [
    ("closed", "removed",
     "host c-1 is closed: it cannot become removed (from closed: decommissioned, lost, ok, "
     "unreach)"),
    ("ok", "decommissioned",
     "host c-1 is ok: it cannot become decommissioned (from ok: closed, lost, unreach)"),
    ("decommissioned", "ok",
     "host c-1 is decommissioned: it cannot become ok (from decommissioned: removed)"),
    ("expected", "closed",
     "host c-1 is expected: it cannot become closed (from expected: failed, ok, removed)"),
    ("failed", "ok",
     "host c-1 is failed: it cannot become ok (from failed: removed)"),
    ("unavail", "closed", "host c-1 is unavail: it cannot become closed (from unavail: ok)"),
    ("removed", "ok", "host c-1 is removed: it cannot become ok (from removed: nothing)"),
    ("ok", "ok", "host c-1 is ok: it cannot become ok (from ok: closed, lost, unreach)"),
    ("nosuch", "ok", "host c-1 is nosuch: it cannot become ok (from nosuch: nothing)"),
])
def test_selected_non_edges_name_the_allowed_targets(current: str, target: str,
                                                     message: str) -> None:
    with pytest.raises(TransitionError) as caught:
        reason_for("c-1", current, target)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("reason", sorted(CLOSE_REASONS))
def test_close_takes_each_close_reason(reason: str) -> None:
    assert reason_for("h1", "ok", "closed", reason) == reason


def test_close_refuses_another_reason() -> None:
    with pytest.raises(TransitionError) as caught:
        reason_for("h1", "ok", "closed", "bored")
    assert str(caught.value) == (
        "host h1: close reason must be one of admin, idle, lifetime, reclaim")


def test_a_given_reason_wins_over_the_default() -> None:
    # An agent back to a host closed for idleness keeps that reason.
    assert reason_for("h1", "unreach", "closed", "idle") == "idle"
    assert reason_for("h1", "lost", "closed", "reclaim") == "reclaim"
    assert reason_for("h1", "expected", "failed", "no capacity") == "no capacity"
    # A reason never makes a refused edge allowed.
    with pytest.raises(TransitionError):
        reason_for("h1", "decommissioned", "closed", "admin")


@pytest.mark.parametrize(("state", "reason", "label"), [
    ("closed", "admin", "closed_Adm"),
    ("closed", "idle", "closed_Idle"),
    ("closed", "lifetime", "closed_Life"),
    ("closed", "reclaim", "closed_Recl"),
    ("closed", "heartbeat again", "closed"),
    ("closed", "", "closed"),
    ("ok", "joined", "ok"),
    ("ok", "admin", "ok"),
    ("expected", "", "expected"),
    ("failed", "join deadline passed", "failed"),
    ("unreach", "no heartbeat", "unreach"),
    ("lost", "unreachable too long", "lost"),
    ("decommissioned", "decommissioned", "decommissioned"),
    ("unavail", "", "unavail"),
])
def test_status_label(state: str, reason: str, label: str) -> None:
    assert status_label(state, reason) == label


def test_close_reasons_labels() -> None:
    assert CLOSE_REASONS == {"admin": "closed_Adm", "idle": "closed_Idle",
                             "lifetime": "closed_Life", "reclaim": "closed_Recl"}
