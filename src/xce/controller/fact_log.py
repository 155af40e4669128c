"""What the SQL stores share (store.py: SQLite; pg_store.py: PostgreSQL): the tables,
the encoding of facts, and every query, written once over a small database surface
(`Cursor`) that each store provides with its own connection and transactions.

Each fact body is the msgpack encoding of its event (msgspec, tagged by `event`); a
snapshot body is the msgpack list of its events; the accounting table holds every
`JobAccounted` fact once more, by end time and job. Queries use `?` parameters (the
PostgreSQL store translates them).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, Self, TypeVar

import msgspec

from xce.model.events import Event, JobAccounted

T = TypeVar("T")
SCHEMA_VERSION = 1


class StoreError(Exception):
    """The store cannot be opened or read: not an XCE store, corrupt, or unusable."""


class Fact(msgspec.Struct, frozen=True):
    """One durable fact: an event, its position in the log and when it happened."""

    seq: int
    time: float
    event: Event


class Rows(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Cursor(Protocol):
    """What the shared queries need of a database connection."""

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Rows: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object: ...


# The highest seq ever used (facts or snapshots), so that seqs never go back even if
# old facts are one day compacted away: the larger of the two columns.
LAST_SEQS = ("COALESCE((SELECT MAX(seq) FROM facts), 0),"
             " COALESCE((SELECT MAX(seq) FROM snapshots), 0)")
LAST_SEQ = f"SELECT {LAST_SEQS}"
_UPSERT = ("INSERT INTO {table} (seq, body) VALUES (?, ?)"
           " ON CONFLICT (seq) DO UPDATE SET body = excluded.body")


class FactLog:
    """The queries of a store of facts (see the module doc). A store gives its
    connection to `_write` (one transaction, serialised with every other writer) and
    `_rows` (one read); `where` names the store in errors (a path, or a URL)."""

    PAGE = 1000  # facts fetched per query by `read`

    def __init__(self, where: str) -> None:
        self.where = where
        self._lock = threading.Lock()
        self._closed = False
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(Event)
        self._list_decoder = msgspec.msgpack.Decoder(list[Event])

    # ------------------------------------------------------------- for the stores
    def _write(self, work: Callable[[Cursor, int], T]) -> T:
        """`work(cursor, last seq)` in one write transaction (committed, durably, on
        return; the last seq read in it, `LAST_SEQ`)."""
        raise NotImplementedError

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query (under the store's lock)."""
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.where}: the store is closed")

    # ------------------------------------------------------------------ writes
    def append(self, time: float, events: Sequence[Event]) -> int:
        return self.append_batches([(time, events)])[0]

    def append_batches(self, batches: Sequence[tuple[float, Sequence[Event]]]) -> list[int]:
        encode = self._encoder.encode

        def work(db: Cursor, seq: int) -> list[int]:
            rows: list[tuple[int, float, bytes]] = []
            accounts: list[tuple[int, int, float, str, bytes]] = []
            ends: list[int] = []
            for time, events in batches:
                for event in events:
                    seq += 1
                    rows.append((seq, float(time), encode(event)))
                    if isinstance(event, JobAccounted):
                        accounts.append((seq, event.job, event.end, event.user, rows[-1][2]))
                ends.append(seq)
            if rows:
                db.executemany("INSERT INTO facts (seq, time, body) VALUES (?, ?, ?)", rows)
            if accounts:
                db.executemany('INSERT INTO accounting (seq, job, end_time, "user", body)'
                               " VALUES (?, ?, ?, ?, ?)", accounts)
            return ends

        return self._write(work)

    def last_seq(self) -> int:
        """The highest seq ever used (facts or snapshots)."""
        return int(max(self._rows(LAST_SEQ)[0]))

    def write_snapshot(self, seq: int, events: Sequence[Event], extra: bytes = b"") -> None:
        """Record the state as of `seq`; `extra`: what the caller keeps beside it."""
        body = self._encoder.encode(list(events))

        def work(db: Cursor, last: int) -> None:
            if not 0 <= seq <= last:
                raise ValueError(f"snapshot seq {seq} is outside the log (last seq {last})")
            db.execute(_UPSERT.format(table="snapshots"), (seq, body))
            db.execute(_UPSERT.format(table="snapshot_extra"), (seq, extra))

        self._write(work)

    # ------------------------------------------------------------------ reads
    def read(self, after: int = 0) -> Iterator[Fact]:
        """Facts with seq > `after`, in order, fetched a page at a time (appends may go
        on meanwhile; facts appended before a page is fetched are included)."""
        while True:
            rows = self._rows("SELECT seq, time, body FROM facts WHERE seq > ? ORDER BY seq"
                              " LIMIT ?", (after, self.PAGE))
            for seq, time, body in rows:
                yield Fact(seq=seq, time=time, event=self._decode(seq, body))
            if len(rows) < self.PAGE:
                return
            after = rows[-1][0]

    def read_from_time(self, time: float) -> Iterator[Fact]:
        """Facts from the first one at `time` or later (found by a scan of the times
        alone, nothing decoded), in order: a job's facts from its submission on."""
        rows = self._rows("SELECT seq FROM facts WHERE time >= ? ORDER BY seq LIMIT 1", (time,))
        if not rows:
            return iter(())
        return self.read(after=int(rows[0][0]) - 1)

    def accounting(self, since: float | None = None, until: float | None = None,
                   user: str | None = None) -> list[JobAccounted]:
        """The accounting records of the jobs that ended in [since, until), of `user`
        only when given, in log order."""
        query = "SELECT seq, body FROM accounting WHERE end_time >= ? AND end_time < ?"
        args: list[object] = [-math.inf if since is None else since,
                              math.inf if until is None else until]
        if user is not None:
            query += ' AND "user" = ?'
            args.append(user)
        rows = self._rows(query + " ORDER BY seq", args)
        return [self._account(seq, body) for seq, body in rows]

    def job_accounting(self, job: int) -> JobAccounted | None:
        """The (last) accounting record of `job`, if it has one."""
        rows = self._rows("SELECT seq, body FROM accounting WHERE job = ? ORDER BY seq DESC"
                          " LIMIT 1", (job,))
        return self._account(*rows[0]) if rows else None

    def _account(self, seq: int, body: object) -> JobAccounted:
        event = self._decode(seq, body)
        if not isinstance(event, JobAccounted):
            raise StoreError(f"{self.where}: accounting record {seq} is not a JobAccounted")
        return event

    def _decode(self, seq: int, body: object) -> Event:
        if not isinstance(body, bytes):
            raise StoreError(f"{self.where}: fact {seq} is corrupt (body is not a blob)")
        try:
            return self._decoder.decode(body)
        except msgspec.DecodeError as err:  # ValidationError is a DecodeError
            raise StoreError(f"{self.where}: fact {seq} is corrupt: {err}") from err

    def latest_snapshot(self) -> tuple[int, list[Event]] | None:
        rows = self._rows("SELECT seq, body FROM snapshots ORDER BY seq DESC LIMIT 1")
        if not rows:
            return None
        seq, body = rows[0]
        try:
            return int(seq), self._list_decoder.decode(body)
        except (msgspec.DecodeError, TypeError) as err:
            raise StoreError(f"{self.where}: snapshot {seq} is corrupt: {err}") from err

    def snapshot_extra(self, seq: int) -> bytes:
        """What was kept beside snapshot `seq` (empty when nothing was)."""
        rows = self._rows("SELECT body FROM snapshot_extra WHERE seq = ?", (seq,))
        return bytes(rows[0][0]) if rows else b""

    # ------------------------------------------------------------------ life
    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
