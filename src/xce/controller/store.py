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

import os
import sqlite3
import threading
import time as _time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from xce.controller.fact_log import (
    LAST_SEQ,
    SCHEMA_VERSION,
    Cursor,
    Fact,
    FactLog,
    StoreError,
)
from xce.model.events import Event, JobAccounted, is_scheduler_event
from xce.sched.rebuild import state_events
from xce.sched.state import SchedulerInputError, SchedulerState, SubmitError

__all__ = ["Fact", "GroupCommitter", "SqliteStore", "Store", "StoreError", "open_store",
           "recover", "take_snapshot"]

T = TypeVar("T")
APPLICATION_ID = 0x58434531  # "XCE1" in the SQLite header

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

    def last_seq(self) -> int:
        """The highest seq used (0: an empty log)."""
        ...

    def close(self) -> None: ...


class SqliteStore(FactLog):
    """A `Store` in one SQLite file (WAL mode, `synchronous=FULL`).

    One writer: a connection shared by the threads of this process behind a lock;
    every write is a `BEGIN IMMEDIATE` transaction, so another process that writes the
    same file waits for SQLite's write lock instead of interleaving."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        super().__init__(self.path)
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
            def create(db: Cursor) -> None:
                for statement in (*_SCHEMA, _EXTRA, *_ACCOUNTING):
                    db.execute(statement)
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

            self._transaction(create)
            return
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION or not {"facts", "snapshots"} <= tables:
            raise StoreError(
                f"{self.path}: unsupported XCE store layout (schema version {version}, "
                f"tables {sorted(tables)}; this version reads {SCHEMA_VERSION})"
            )
        for statement in (_EXTRA, *_ACCOUNTING):
            db.execute(statement)

    def _transaction(self, work: Callable[[Cursor], T]) -> T:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return result

    def _write(self, work: Callable[[Cursor, int], T]) -> T:
        with self._lock:
            self._check_open()
            return self._transaction(
                lambda db: work(db, int(max(db.execute(LAST_SEQ).fetchone()))))

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            self._check_open()
            return self._db.execute(sql, args).fetchall()

    def _close(self) -> None:
        self._db.close()


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


def open_store(location: str) -> Store:
    """The store at `location`: a PostgreSQL URL (`postgresql://...`, pg_store.py) or
    the path of an SQLite file."""
    if location.startswith(("postgresql://", "postgres://")):
        from xce.controller.pg_store import PostgresStore

        return PostgresStore(location)
    return SqliteStore(location)


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
