"""The controller's durable state store: an append-only log of facts plus snapshots.

A *fact* is one event (`xce.model.events.Event`: a scheduler event, or one of the
controller's own records) with a sequence number and the time it happened. Facts are
appended in transactions: when `append` returns, its facts are durable (the SQLite
commit is fsync'd: WAL mode, `synchronous=FULL`), and either all of them are in the
log or, after a crash, none. A *snapshot* is the state
as of some seq, compacted into the events that rebuild it (`xce.sched.rebuild.state_events`);
`recover` applies the latest snapshot and then every scheduler event after it.

Encoding: each fact body is the msgpack encoding of its event (msgspec, tagged by
`event`); a snapshot body is the msgpack list of its events. The jobs' accounting
records (`JobAccounted` facts) are also written, in the same transaction, to a table of
their own by end time and job (`accounting`, `job_accounting`). The file is marked with
SQLite's `application_id`, so a foreign database is refused rather than written into.

`GroupCommitter` lets concurrent threads share transactions: one fsync for every
submission that arrived while the previous commit was in flight.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time as _time
from collections.abc import Iterator, Sequence
from typing import Protocol

import msgspec

from xce.model.events import Event, JobAccounted, is_scheduler_event
from xce.sched.rebuild import state_events
from xce.sched.state import SchedulerInputError, SchedulerState, SubmitError

APPLICATION_ID = 0x58434531  # "XCE1" in the SQLite header
SCHEMA_VERSION = 1
_PAGE = 1000  # facts fetched per query by `read`

_SCHEMA = (
    "CREATE TABLE facts (seq INTEGER PRIMARY KEY, time REAL NOT NULL, body BLOB NOT NULL)",
    "CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)",
)
# What a snapshot's owner keeps beside the scheduler state (the controller: recently
# finished jobs); added after schema version 1 shipped, so made when missing.
_EXTRA = "CREATE TABLE IF NOT EXISTS snapshot_extra (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)"
# The jobs' accounting records (JobAccounted facts, also in `facts`), by end time and
# job, for `xce acct` and `xce hist`; added later too, so made when missing (a log
# written before has no such record).
_ACCOUNTING = (
    "CREATE TABLE IF NOT EXISTS accounting (seq INTEGER PRIMARY KEY, job INTEGER NOT NULL,"
    " end_time REAL NOT NULL, user TEXT NOT NULL, body BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS accounting_end ON accounting (end_time)",
    "CREATE INDEX IF NOT EXISTS accounting_job ON accounting (job)",
)


class StoreError(Exception):
    """The store cannot be opened or read: not an XCE store, corrupt, or unusable."""


class Fact(msgspec.Struct, frozen=True):
    """One durable fact: an event, its position in the log and when it happened."""

    seq: int
    time: float
    event: Event


class Store(Protocol):
    """A durable, append-only log of facts with snapshots."""

    def append(self, time: float, events: Sequence[Event]) -> int:
        """Append `events` in one transaction, durable on return; the last fact's seq
        (the current last seq when `events` is empty)."""
        ...

    def append_batches(self, batches: Sequence[tuple[float, Sequence[Event]]]) -> list[int]:
        """Append several (time, events) groups in ONE transaction; per group, the seq
        of its last fact."""
        ...

    def read(self, after: int = 0) -> Iterator[Fact]:
        """Facts with seq > `after`, in order."""
        ...

    def write_snapshot(self, seq: int, events: Sequence[Event], extra: bytes = b"") -> None:
        """Record the state as of `seq` (0 <= seq <= last seq) as events that rebuild it,
        with `extra` bytes its owner keeps beside it."""
        ...

    def snapshot_extra(self, seq: int) -> bytes: ...

    def latest_snapshot(self) -> tuple[int, list[Event]] | None: ...

    def read_from_time(self, time: float) -> Iterator[Fact]:
        """Facts from the first one that happened at `time` or later, in order."""
        ...

    def accounting(self, since: float | None = None, until: float | None = None,
                   user: str | None = None) -> list[JobAccounted]:
        """The accounting records of jobs that ended in [since, until) (None: open),
        of `user` only when given, in log order."""
        ...

    def job_accounting(self, job: int) -> JobAccounted | None:
        """The accounting record of `job` (None: it has not ended, or long ago in a
        log written before accounting)."""
        ...

    def close(self) -> None: ...


class SqliteStore:
    """A `Store` in one SQLite file (WAL mode, `synchronous=FULL`).

    One writer: a connection shared by the threads of this process behind a lock;
    every write is a `BEGIN IMMEDIATE` transaction, so another process that writes the
    same file waits for SQLite's write lock instead of interleaving."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._closed = False
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(Event)
        self._list_decoder = msgspec.msgpack.Decoder(list[Event])
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except sqlite3.Error as err:
            raise StoreError(f"{self.path}: cannot open the store: {err}") from err
        try:
            self._open()
        except sqlite3.Error as err:
            self._db.close()
            raise StoreError(f"{self.path}: not a usable XCE store: {err}") from err
        except StoreError:
            self._db.close()
            raise

    def _open(self) -> None:
        db = self._db
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        tables = {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if app_id != APPLICATION_ID and (app_id != 0 or tables):
            raise StoreError(
                f"{self.path}: not an XCE store (a foreign SQLite database: "
                f"application_id {app_id}, tables {sorted(tables)})"
            )
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot use WAL mode (journal_mode is {mode})")
        db.execute("PRAGMA synchronous=FULL")
        if app_id == 0:  # a new, empty file
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in (*_SCHEMA, _EXTRA, *_ACCOUNTING):
                    db.execute(statement)
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION or not {"facts", "snapshots"} <= tables:
            raise StoreError(
                f"{self.path}: unsupported XCE store layout (schema version {version}, "
                f"tables {sorted(tables)}; this version reads {SCHEMA_VERSION})"
            )
        for statement in (_EXTRA, *_ACCOUNTING):
            db.execute(statement)

    # ------------------------------------------------------------------ writes
    def append(self, time: float, events: Sequence[Event]) -> int:
        return self.append_batches([(time, events)])[0]

    def append_batches(self, batches: Sequence[tuple[float, Sequence[Event]]]) -> list[int]:
        encode = self._encoder.encode
        with self._lock:
            db = self._checked()
            db.execute("BEGIN IMMEDIATE")
            try:
                seq = self._last_seq()
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
                    db.executemany("INSERT INTO accounting (seq, job, end_time, user, body)"
                                   " VALUES (?, ?, ?, ?, ?)", accounts)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return ends

    def _last_seq(self) -> int:
        """The highest seq ever used (facts or snapshots), so that seqs never go back
        even if old facts are one day compacted away."""
        row = self._db.execute(
            "SELECT MAX(COALESCE((SELECT MAX(seq) FROM facts), 0),"
            " COALESCE((SELECT MAX(seq) FROM snapshots), 0))"
        ).fetchone()
        return int(row[0])

    def last_seq(self) -> int:
        with self._lock:
            self._checked()
            return self._last_seq()

    def write_snapshot(self, seq: int, events: Sequence[Event], extra: bytes = b"") -> None:
        """Record the state as of `seq`; `extra`: what the caller keeps beside it."""
        body = self._encoder.encode(list(events))
        with self._lock:
            db = self._checked()
            db.execute("BEGIN IMMEDIATE")
            try:
                last = self._last_seq()
                if not 0 <= seq <= last:
                    raise ValueError(f"snapshot seq {seq} is outside the log (last seq {last})")
                db.execute("INSERT OR REPLACE INTO snapshots (seq, body) VALUES (?, ?)",
                           (seq, body))
                db.execute("INSERT OR REPLACE INTO snapshot_extra (seq, body) VALUES (?, ?)",
                           (seq, extra))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    # ------------------------------------------------------------------ reads
    def read(self, after: int = 0) -> Iterator[Fact]:
        """Facts with seq > `after`, in order, fetched a page at a time (appends may go
        on meanwhile; facts appended before a page is fetched are included)."""
        while True:
            with self._lock:
                rows = self._checked().execute(
                    "SELECT seq, time, body FROM facts WHERE seq > ? ORDER BY seq LIMIT ?",
                    (after, _PAGE),
                ).fetchall()
            for seq, time, body in rows:
                yield Fact(seq=seq, time=time, event=self._decode(seq, body))
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]

    def read_from_time(self, time: float) -> Iterator[Fact]:
        """Facts from the first one at `time` or later (found by a scan of the times
        alone, nothing decoded), in order: a job's facts from its submission on."""
        with self._lock:
            row = self._checked().execute(
                "SELECT seq FROM facts WHERE time >= ? ORDER BY seq LIMIT 1", (time,)
            ).fetchone()
        if row is None:
            return iter(())
        return self.read(after=int(row[0]) - 1)

    def accounting(self, since: float | None = None, until: float | None = None,
                   user: str | None = None) -> list[JobAccounted]:
        """The accounting records of the jobs that ended in [since, until), of `user`
        only when given, in log order."""
        query = "SELECT seq, body FROM accounting WHERE end_time >= ? AND end_time < ?"
        args: list[object] = [-math.inf if since is None else since,
                              math.inf if until is None else until]
        if user is not None:
            query += " AND user = ?"
            args.append(user)
        with self._lock:
            rows = self._checked().execute(query + " ORDER BY seq", args).fetchall()
        return [self._account(seq, body) for seq, body in rows]

    def job_accounting(self, job: int) -> JobAccounted | None:
        """The (last) accounting record of `job`, if it has one."""
        with self._lock:
            row = self._checked().execute(
                "SELECT seq, body FROM accounting WHERE job = ? ORDER BY seq DESC LIMIT 1",
                (job,),
            ).fetchone()
        return None if row is None else self._account(*row)

    def _account(self, seq: int, body: object) -> JobAccounted:
        event = self._decode(seq, body)
        if not isinstance(event, JobAccounted):
            raise StoreError(f"{self.path}: accounting record {seq} is not a JobAccounted")
        return event

    def _decode(self, seq: int, body: object) -> Event:
        if not isinstance(body, bytes):
            raise StoreError(f"{self.path}: fact {seq} is corrupt (body is not a blob)")
        try:
            return self._decoder.decode(body)
        except msgspec.DecodeError as err:  # ValidationError is a DecodeError
            raise StoreError(f"{self.path}: fact {seq} is corrupt: {err}") from err

    def latest_snapshot(self) -> tuple[int, list[Event]] | None:
        with self._lock:
            row = self._checked().execute(
                "SELECT seq, body FROM snapshots ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return None
        seq, body = row
        try:
            return int(seq), self._list_decoder.decode(body)
        except (msgspec.DecodeError, TypeError) as err:
            raise StoreError(f"{self.path}: snapshot {seq} is corrupt: {err}") from err

    def snapshot_extra(self, seq: int) -> bytes:
        """What was kept beside snapshot `seq` (empty when nothing was)."""
        with self._lock:
            row = self._checked().execute(
                "SELECT body FROM snapshot_extra WHERE seq = ?", (seq,)
            ).fetchone()
        return b"" if row is None else bytes(row[0])

    # ------------------------------------------------------------------ life
    def _checked(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        return self._db

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Pending:
    __slots__ = ("done", "error", "events", "seq", "time")

    def __init__(self, time: float, events: Sequence[Event]) -> None:
        self.time = time
        self.events = events
        self.done = False
        self.seq = 0
        self.error: BaseException | None = None


class GroupCommitter:
    """Group commit for concurrent callers (threads).

    `submit` blocks until its facts are durable and returns the seq of its last fact.
    The first caller to find no commit in flight becomes the leader: it waits `window`
    seconds (default 0: commits at once), takes every submission queued by then, and
    writes them all in ONE transaction; submissions that arrive during that commit
    form the next group. Submissions of one thread keep their order; a failed commit
    raises its error in every caller of its group. `commits` and `facts` count the
    transactions and the facts written."""

    def __init__(self, store: Store, window: float = 0.0) -> None:
        self.store = store
        self.window = window
        self.commits = 0
        self.facts = 0
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._committing = False

    def submit(self, time: float, events: Sequence[Event]) -> int:
        mine = _Pending(time, events)
        with self._cond:
            self._queue.append(mine)
            while not mine.done and self._committing:
                self._cond.wait()
            if mine.done:
                return self._result(mine)
            self._committing = True  # this caller leads the next group
        try:
            if self.window > 0:
                _time.sleep(self.window)
            with self._cond:
                group, self._queue = self._queue, []  # `mine` among them
            try:
                seqs = self.store.append_batches([(p.time, p.events) for p in group])
            except BaseException as err:
                for pending in group:
                    pending.error = err
            else:
                for pending, seq in zip(group, seqs, strict=True):
                    pending.seq = seq
                with self._cond:
                    self.commits += 1
                    self.facts += sum(len(p.events) for p in group)
            for pending in group:
                pending.done = True
        finally:
            with self._cond:
                self._committing = False
                self._cond.notify_all()
        return self._result(mine)

    @staticmethod
    def _result(pending: _Pending) -> int:
        if pending.error is not None:
            raise pending.error
        return pending.seq


def take_snapshot(store: Store, state: SchedulerState, seq: int) -> None:
    """Write `state`, which reflects every fact up to `seq`, as a snapshot."""
    store.write_snapshot(seq, state_events(state))


def recover(store: Store) -> tuple[SchedulerState, int]:
    """The scheduler state after the latest snapshot and every fact after it, and the
    last seq read (the snapshot's when no fact follows it; 0 for an empty store). Only
    scheduler events reach the state: the controller's own records (leases, requests,
    instances, ...) are passed over, as the live controller passes them over."""
    state = SchedulerState()
    last = 0
    snapshot = store.latest_snapshot()
    if snapshot is not None:
        last, events = snapshot
        try:
            state.apply_all(e for e in events if is_scheduler_event(e))
        except (SubmitError, SchedulerInputError) as err:
            raise StoreError(f"snapshot {last} does not rebuild a state: {err}") from err
    for fact in store.read(after=last):
        try:
            if is_scheduler_event(fact.event):
                state.apply(fact.event)
        except (SubmitError, SchedulerInputError) as err:
            raise StoreError(f"fact {fact.seq} cannot be applied: {err}") from err
        last = fact.seq
    return state, last
