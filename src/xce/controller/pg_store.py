"""The durable log in PostgreSQL (psycopg 3): the same facts, snapshots and accounting
records as the SQLite store (fact_log.py holds the queries both run), for controllers
that must survive their machine (docs/ha.md).

Every write is one transaction that first locks the `leader` row (`FOR UPDATE`: writers
queue as on SQLite's write lock) and checks the leader's term against the one this
store writes for (`term`, when set): a controller deposed by a takeover cannot write,
its transaction fails with `Deposed` (fencing). The session runs with
`synchronous_commit = on`, so a commit that returned is in the server's durable WAL.
Every write also notifies channel `xce_facts` (delivered at commit), so the standbys
that follow the log read on without polling.

The database is marked by table `xce_schema` (one row: the schema version): a database
with other tables and no such mark is refused as foreign, and one written by a newer
release (a higher version) is refused with nothing written.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from xce.controller.fact_log import (
    LAST_SEQ,
    SCHEMA_VERSION,
    Cursor,
    FactLog,
    Rows,
    StoreError,
)

T = TypeVar("T")
CHANNEL = "xce_facts"  # NOTIFY channel of new facts (payload: the last seq)
# Every write's first round trip (one simple query, three statements): the leader
# row locked, so writers queue, with its term; then the last seq (fact_log.LAST_SEQ),
# in a statement of its own: under READ COMMITTED each statement sees what was
# committed when it began, so it sees the facts of a writer this one waited for (read
# in the locking statement, they were those from before the wait: a seq taken twice).
_BEGIN = f"BEGIN; SELECT term FROM leader FOR UPDATE; {LAST_SEQ}"
_INIT_LOCK = 0x58434530  # advisory lock key while the schema is checked or made
_REQUIRED = frozenset({"xce_schema", "facts", "snapshots", "snapshot_extra", "accounting",
                       "leader", "controllers"})

_SCHEMA = (
    "CREATE TABLE xce_schema (version integer NOT NULL)",
    "CREATE TABLE facts (seq bigint PRIMARY KEY, time double precision NOT NULL,"
    " body bytea NOT NULL)",
    "CREATE TABLE snapshots (seq bigint PRIMARY KEY, body bytea NOT NULL)",
    "CREATE TABLE snapshot_extra (seq bigint PRIMARY KEY, body bytea NOT NULL)",
    "CREATE TABLE accounting (seq bigint PRIMARY KEY, job bigint NOT NULL,"
    ' end_time double precision NOT NULL, "user" text NOT NULL, body bytea NOT NULL)',
    "CREATE INDEX accounting_end ON accounting (end_time)",
    "CREATE INDEX accounting_job ON accounting (job)",
    # The leader's term: raised by every takeover; every write checks it (fencing).
    "CREATE TABLE leader (id integer PRIMARY KEY CHECK (id = 1), term bigint NOT NULL,"
    " holder text NOT NULL, url text NOT NULL, since double precision NOT NULL)",
    "INSERT INTO leader VALUES (1, 0, '', '', 0)",
    # Every controller on the database: its role, URL and how far it has applied.
    # (pids: its sessions' server processes, ended when another controller takes over)
    "CREATE TABLE controllers (name text PRIMARY KEY, url text NOT NULL, role text NOT NULL,"
    " term bigint NOT NULL, applied bigint NOT NULL, seen double precision NOT NULL,"
    " pids integer[] NOT NULL)",
)


class Deposed(StoreError):
    """The store's term is no longer the leader's: another controller took over."""


def redacted(url: str) -> str:
    """`url` without its password (errors and logs show it)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


@cache
def _pg(sql: str) -> str:
    """A shared query with psycopg's placeholders."""
    return sql.replace("?", "%s")


class _PgCursor:
    """A psycopg cursor that takes the shared queries (`?` placeholders)."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Rows:
        return self._cursor.execute(_pg(sql), args)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object:
        self._cursor.executemany(_pg(sql), rows)
        return None


class PostgresStore(FactLog):
    """A `Store` in a PostgreSQL database (see the module doc). One connection, shared
    by the threads of this process behind a lock."""

    PAGE = 5000

    def __init__(self, url: str, term: int | None = None) -> None:
        super().__init__(redacted(url))
        self.url = url
        self.term = term  # the term this store writes for (None: any; no fencing)
        self._conn = connect(url, self.where)
        try:
            self._open()
        except psycopg.Error as err:
            self._conn.close()
            raise StoreError(f"{self.where}: not a usable XCE store: {err}") from err
        except StoreError:
            self._conn.close()
            raise

    def _open(self) -> None:
        with self._conn.transaction():
            db = self._conn
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_INIT_LOCK,))
            tables = {row[0] for row in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
            if "xce_schema" not in tables:
                if tables:
                    raise StoreError(f"{self.where}: not an XCE store (a foreign database: "
                                     f"tables {sorted(tables)})")
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute("INSERT INTO xce_schema VALUES (%s)", (SCHEMA_VERSION,))
                return
            row = db.execute("SELECT max(version) FROM xce_schema").fetchone()
            version = row[0] if row else None
            if version != SCHEMA_VERSION or not tables >= _REQUIRED:
                newer = " (written by a newer xce: upgrade xce)" if (
                    version is not None and version > SCHEMA_VERSION) else ""
                raise StoreError(
                    f"{self.where}: unsupported XCE store layout (schema version {version}, "
                    f"tables {sorted(tables)}; this version reads {SCHEMA_VERSION}){newer}")

    # ------------------------------------------------------------- FactLog
    def _write(self, work: Callable[[Cursor, int], T]) -> T:
        """Two round trips: BEGIN with the leader row locked (its term) and the last
        seq; then, pipelined, the work, the notification and the COMMIT."""
        with self._lock:
            self._check_open()
            conn = self._conn
            try:
                with conn.cursor() as cursor:
                    cursor.execute(_BEGIN)
                    cursor.nextset()  # (the first result is the BEGIN's)
                    row = cursor.fetchone()
                    if row is None or (self.term is not None and row[0] != self.term):
                        raise Deposed(f"{self.where}: deposed: this controller writes for "
                                      f"term {self.term}, the leader's term is now "
                                      f"{row[0] if row else None}")
                    cursor.nextset()
                    seqs = cursor.fetchone()
                    assert seqs is not None
                    with conn.pipeline():
                        result = work(_PgCursor(cursor), max(seqs[0], seqs[1]))
                        cursor.execute(f"NOTIFY {CHANNEL}")
                        cursor.execute("COMMIT")
                return result
            except psycopg.Error as err:
                raise StoreError(f"{self.where}: {err}") from err
            finally:
                if conn.info.transaction_status != TransactionStatus.IDLE and not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            self._check_open()
            try:
                with self._conn.cursor(binary=True) as cursor:
                    return cursor.execute(_pg(sql), args).fetchall()
            except psycopg.Error as err:
                raise StoreError(f"{self.where}: {err}") from err

    def backend_pid(self) -> int:
        """The server process of this store's session."""
        return int(self._conn.info.backend_pid)

    def _close(self) -> None:
        self._conn.close()


def connect(url: str, where: str) -> psycopg.Connection[Any]:
    """An autocommit session on `url` with synchronous commit; a clear error when the
    server cannot be reached or the URL is wrong."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10,
                               application_name="xce-controller")
    except psycopg.Error as err:
        message = str(err).strip().replace("\n", " ")
        raise StoreError(f"{where}: cannot connect to the store: {message}") from err
    conn.execute("SET synchronous_commit = on")
    return conn
