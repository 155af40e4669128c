"""Replay a recording through the scheduler core and report the first divergence."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from xce.model.events import is_scheduler_event
from xce.model.recording import SessionRecord, read_recording, session_outputs
from xce.sched import SchedulerState, run_session


class Divergence(msgspec.Struct, frozen=True):
    """Where a replayed session differs from the recording."""

    session: int
    time: float
    field: str
    expected: Any
    got: Any

    def __str__(self) -> str:
        return (
            f"session {self.session} at t={self.time:g}: {self.field}: "
            f"expected {self.expected!r}, got {self.got!r}"
        )


class ReplayReport(msgspec.Struct):
    sessions: int
    events: int
    divergence: Divergence | None


def replay(path: str | os.PathLike[str]) -> ReplayReport:
    """Feed the recorded events to a fresh scheduler state; at each recorded session,
    run the session and compare every output. Stops at the first divergence."""
    state = SchedulerState()
    sessions = events = 0
    for _line, t, item in read_recording(path):
        if isinstance(item, SessionRecord):
            sessions += 1
            got = _normal(session_outputs(run_session(state, t)))
            if "reservations" not in item.outputs:  # recorded before plans existed
                del got["reservations"]
            found = _first_difference(item.outputs, got)
            if found is not None:
                field, expected, actual = found
                divergence = Divergence(item.s, t, field, expected, actual)
                return ReplayReport(sessions, events, divergence)
        elif is_scheduler_event(item):  # (older live recordings hold leases, requests...)
            events += 1
            state.apply(item)
    return ReplayReport(sessions, events, None)


def _normal(outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs as they read back from JSON (job keys as ints, tuples as lists)."""
    normal: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(outputs))
    normal["pending"] = {
        int(job): list(why) for job, why in outputs["pending"].items()
    }
    return normal


def _first_difference(expected: Any, got: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got), key=str):
            where = f"{path}.{key}" if path and not isinstance(key, int) else (
                f"{path}[job {key}]" if isinstance(key, int) else str(key)
            )
            if key not in got:
                return where, expected[key], None
            if key not in expected:
                return where, None, got[key]
            found = _first_difference(expected[key], got[key], where)
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(got, list):
        for index, (a, b) in enumerate(zip(expected, got, strict=False)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        if len(expected) != len(got):
            return f"{path} length", len(expected), len(got)
        return None
    if expected != got:
        return path, expected, got
    return None
