"""Recordings: the event stream fed to the scheduler and every session's outputs.

Here, below the drivers, because two of them write it: the simulator (`xce sim run
--record`) and the controller (`xce controller --record`); the simulator replays it.

Format (documented in docs/recording.md): JSON Lines, gzip-compressed when the file
name ends in `.gz`. The first line is the header
`{"format": "xce-recording", "version": 1, "source": "sim"}`; then, in order,
event lines `{"t": T, "e": EVENT}` (an `xce.model.events.SchedulerEvent` with its
`event` tag; live recordings written before the controller kept its own records out
may also hold those, which replay skips)
and session lines `{"t": T, "s": N, "dispatch": [...], "pending": {...}, "demand":
{...}, "idle": {...}, "reservations": [...], "trace": [...]}` (`reservations` as in
the session result JSON; recordings written before it existed have none, and replay
then does not compare it). Pend reasons are recorded as a change against
the previous session: `"pending": {"set": [[reason, kind, [job, ...]], ...], "gone":
[job, ...]}`, so that a long run with a deep queue stays small.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from typing import IO, Any, cast

import msgspec

from xce.model.events import Event, SchedulerEvent
from xce.model.result import SessionResult, demand_json, idle_json, reservation_json

FORMAT = "xce-recording"
VERSION = 1


class RecordingError(ValueError):
    """A file that is not a readable recording (names file and line)."""


def _open(path: str | os.PathLike[str], mode: str) -> IO[str]:
    if str(path).endswith(".gz"):
        return cast(IO[str], gzip.open(path, mode + "t", encoding="utf-8"))
    return open(path, mode, encoding="utf-8")


def session_outputs(result: SessionResult) -> dict[str, Any]:
    """The outputs a recording keeps of one session (pend reasons as a full map)."""
    return {
        "dispatch": [
            {"job": d.job, "hosts": d.hosts, **({"pools": d.pools} if d.pools else {})}
            for d in result.dispatch
        ],
        "pending": {m.id: (g.reason, g.kind) for g in result.pending for m in g.members},
        "demand": demand_json(result.demand),
        "idle": idle_json(result.idle),
        "reservations": [reservation_json(r) for r in result.reservations],
        "trace": [[e.job, e.stage, e.check, e.detail] for e in result.trace],
        **({"orphans": result.orphans} if result.orphans else {}),
    }


class Recorder:
    """Writes a recording as the scheduler is fed and runs sessions."""

    def __init__(self, path: str | os.PathLike[str], source: str = "sim") -> None:
        self._file = _open(path, "w")
        self._encoder = msgspec.json.Encoder()
        self._pending: dict[int, tuple[str, str]] = {}
        self._sessions = 0
        self._write({"format": FORMAT, "version": VERSION, "source": source})

    def _write(self, obj: object) -> None:
        self._file.write(self._encoder.encode(obj).decode())
        self._file.write("\n")

    def event(self, now: float, event: SchedulerEvent) -> None:
        self._write({"t": now, "e": event})

    def session(self, now: float, result: SessionResult) -> None:
        self._sessions += 1
        outputs = session_outputs(result)
        pending: dict[int, tuple[str, str]] = outputs.pop("pending")
        changed: dict[tuple[str, str], list[int]] = {}
        for job, why in pending.items():
            if self._pending.get(job) != why:
                changed.setdefault(why, []).append(job)
        gone = sorted(job for job in self._pending if job not in pending)
        self._pending = pending
        outputs["pending"] = {
            "set": [[reason, kind, sorted(jobs)] for (reason, kind), jobs in changed.items()],
            "gone": gone,
        }
        self._write({"t": now, "s": self._sessions, **outputs})
        self._file.flush()  # a recording of a live run is readable up to its last session

    def close(self) -> None:
        self._file.close()


class SessionRecord(msgspec.Struct):
    t: float
    s: int
    outputs: dict[str, Any]  # pending expanded to {job: [reason, kind]}


def read_recording(
    path: str | os.PathLike[str],
) -> Iterator[tuple[int, float, Event | SessionRecord]]:
    """(line number, time, event or session record) in file order."""
    name = str(path)
    try:
        handle = _open(path, "r")
    except OSError as err:
        raise RecordingError(f"{name}: cannot read: {err}") from err
    decoder = msgspec.json.Decoder()
    pending: dict[int, list[str]] = {}
    with handle:
        try:
            header = decoder.decode(handle.readline() or "null")
        except (msgspec.DecodeError, OSError, EOFError) as err:
            raise RecordingError(f"{name}:1: not a recording: {err}") from err
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise RecordingError(f"{name}:1: not an xce recording")
        if header.get("version") != VERSION:
            raise RecordingError(
                f"{name}:1: recording version {header.get('version')} (this XCE reads {VERSION})"
            )
        for line_no, line in enumerate(handle, start=2):
            try:
                obj = decoder.decode(line)
                if "e" in obj:
                    yield line_no, float(obj["t"]), msgspec.convert(obj["e"], Event)
                    continue
                delta = obj.pop("pending")
                for job in delta["gone"]:
                    pending.pop(job, None)
                for reason, kind, jobs in delta["set"]:
                    for job in jobs:
                        pending[job] = [reason, kind]
                t, s = float(obj.pop("t")), int(obj.pop("s"))
                obj["pending"] = dict(pending)
                yield line_no, t, SessionRecord(t, s, obj)
            except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError) as err:
                raise RecordingError(f"{name}:{line_no}: unreadable record: {err}") from err
