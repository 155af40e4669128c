"""Leadership of the controllers that share one PostgreSQL log (docs/ha.md): one leads,
the others stand by, following the log, and take over when the leader is gone.

* **The lock.** The leader holds a session-level advisory lock (`LOCK_KEY`) on a
  connection of its own; PostgreSQL releases it when that session ends, so a leader
  killed (or whose machine died) frees it at once. A candidate waits for the lock in
  `pg_advisory_lock`, a second at a time (`lock_timeout`); between waits it renews its
  row of `controllers` (role, applied seq, when seen) and looks at the leader's: a
  leader not seen for `lease` seconds (stopped, or cut off) has its sessions ended
  by the candidate (`pg_terminate_backend`), which frees the lock.
* **The term.** Taking over raises the `leader` row's term in one transaction, after
  ending every session of the previous leader (one may hold the row in a write). Every
  write of the log locks that row and checks the term (pg_store.py): a deposed leader
  cannot write; its commit fails, and it stops (exit 75) when it notices, in a write
  or in its next renewal (a second apart).
* **Following.** A standby LISTENs on `xce_facts` (every commit notifies it) and
  applies the facts after the last it applied, as they come: it keeps the controller's
  state current, so a takeover replays only the tail written since.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import psycopg
from psycopg import errors

from xce.controller.fact_log import Fact, StoreError
from xce.controller.pg_store import CHANNEL, PostgresStore, connect

log = logging.getLogger("xce.controller.leadership")

LOCK_KEY = 0x58434531  # the advisory lock of leadership
RENEW = 1.0  # seconds between renewals of a controller's row (and lock waits)
LEASE = 5.0  # a leader not seen for this long is ended by a candidate
STEPPED_DOWN = 75  # the exit status of a deposed leader

_REGISTER = (
    "INSERT INTO controllers (name, url, role, term, applied, seen, pids)"
    " VALUES (%s, %s, %s, 0, %s, extract(epoch FROM now()), %s)"
    " ON CONFLICT (name) DO UPDATE SET url = excluded.url, role = excluded.role,"
    " applied = excluded.applied, seen = excluded.seen, pids = excluded.pids")
_RENEW = ("UPDATE controllers SET role = %s, term = %s, applied = %s,"
          " seen = extract(epoch FROM now()) WHERE name = %s")
# The sessions of the previous leader (its row's pids that are still xce sessions).
_ENDED = ("SELECT pg_terminate_backend(a.pid) FROM controllers c, pg_stat_activity a"
          " WHERE c.name = %s AND c.name <> %s AND a.pid = ANY(c.pids)"
          " AND a.application_name = 'xce-controller'")
_LIVE_STANDBYS = ("SELECT name, applied FROM controllers WHERE role = 'standby'"
                  " AND extract(epoch FROM now()) - seen <= %s")
_STALE = ("SELECT l.holder FROM leader l JOIN controllers c ON c.name = l.holder"
          " WHERE extract(epoch FROM now()) - c.seen > %s")


class LeaderInfo:
    """Who leads, as this controller last read it."""

    def __init__(self) -> None:
        self.url = ""
        self.term = 0


class Leadership:
    """One controller's part in the leadership (see the module doc): `lead()` returns
    once this controller leads, its state caught up with the whole log."""

    def __init__(self, store: PostgresStore, follow: Callable[[list[Fact]], None],
                 applied: Callable[[], int], lease: float = LEASE) -> None:
        self.store = store
        self.follow = follow  # applies followed facts (on the event loop)
        self.applied = applied  # the seq of the last fact applied
        self.lease = lease
        self.url = ""  # where this controller serves (set by `advertise`)
        self.leader = LeaderInfo()
        self.standbys: dict[str, int] = {}  # the leader's view: standby -> last applied
        self.leading = False
        self.term = 0
        self._advertised = asyncio.Event()
        self._led = threading.Event()  # set at the takeover: the follower stops
        self._loop: asyncio.AbstractEventLoop | None = None

    def leader_url(self) -> str:
        return self.leader.url

    def leader_term(self) -> int:
        return self.leader.term

    def advertise(self, url: str) -> None:
        """This controller's API URL, given once it listens."""
        self.url = url
        self._advertised.set()

    # ------------------------------------------------------------------ the event loop
    async def lead(self) -> int:
        """Follow the log as a standby until this controller holds the lock, then take
        over: the term raised, the tail applied. The last seq applied."""
        await self._advertised.wait()
        loop = self._loop = asyncio.get_running_loop()
        took: asyncio.Future[int] = loop.create_future()
        lock = connect(self.store.url, self.store.where)
        follower = threading.Thread(target=self._follow, name="xce-follow", daemon=True)
        follower.start()
        threading.Thread(target=self._hold, args=(lock, took), name="xce-leadership",
                         daemon=True).start()
        term = await took
        self._led.set()  # the follower stops: the tail is read here
        await asyncio.to_thread(follower.join)
        await asyncio.sleep(0)  # (what the follower handed over is applied)
        self.store.term = term
        tail = await asyncio.to_thread(lambda: list(self.store.read(after=self.applied())))
        self.follow(tail)
        self.leading = True
        self.leader.url, self.leader.term = self.url, term
        log.info("leading in term %d from fact %d (%d facts of tail)", term, self.applied(),
                 len(tail))
        return self.applied()

    def _step_down(self, why: str) -> None:
        log.critical("stepping down: %s", why)
        os._exit(STEPPED_DOWN)

    def _to_loop(self, call: Callable[..., Any], *args: Any) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # (the loop is closing)
            self._loop.call_soon_threadsafe(call, *args)

    # ------------------------------------------------------------------ threads
    def _follow(self) -> None:
        """The standby's follower: LISTEN, then read what each notification brings."""
        try:
            with connect(self.store.url, self.store.where) as conn:
                conn.execute(f"LISTEN {CHANNEL}")
                after, notified = self.applied(), True  # (facts may precede the LISTEN)
                while not self._led.is_set():
                    if notified:
                        facts = list(self.store.read(after=after))
                        if facts:
                            after = facts[-1].seq
                            self._to_loop(self.follow, facts)
                    notified = False
                    for _ in conn.notifies(timeout=RENEW, stop_after=1):
                        notified = True
        except (psycopg.Error, OSError) as err:
            if not self._led.is_set():
                self._to_loop(self._step_down, f"cannot follow the log: {err}")

    def _hold(self, conn: psycopg.Connection[Any], took: asyncio.Future[int]) -> None:
        """Wait for the lock (renewing this controller's row), take over, then renew
        as the leader until deposed."""
        try:
            pids = [conn.info.backend_pid, self.store.backend_pid()]
            conn.execute(_REGISTER, (self.url, self.url, "standby", self.applied(), pids))
            conn.execute("SELECT set_config('lock_timeout', %s, false)",
                         (f"{int(RENEW * 1000)}ms",))
            self._renew(conn, "standby")  # (who leads, for the standby's answers)
            while not self._try_lock(conn):
                self._renew(conn, "standby")
            conn.execute("SET lock_timeout = 0")
            term = self.term = self._claim(conn)
            self._to_loop(took.set_result, term)
            while True:
                time.sleep(RENEW)
                row = self._renew(conn, "leader")
                if row is None or row[1] != term:
                    self._to_loop(self._step_down, f"deposed: the leader is now {row}")
                    return
        except (psycopg.Error, OSError) as err:
            self._to_loop(self._step_down, f"lost the leadership session: {err}")

    def _try_lock(self, conn: psycopg.Connection[Any]) -> bool:
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        except errors.LockNotAvailable:
            stale = conn.execute(_STALE, (self.lease,)).fetchone()
            if stale is not None:
                log.warning("the leader %s was not seen for %.0f s: ending its sessions",
                            stale[0], self.lease)
                conn.execute(_ENDED, (stale[0], self.url))
            return False
        return True

    def _claim(self, conn: psycopg.Connection[Any]) -> int:
        """Raise the term, the previous leader's sessions ended first."""
        with conn.transaction():
            holder = conn.execute("SELECT holder FROM leader").fetchone()
            if holder is not None:
                conn.execute(_ENDED, (holder[0], self.url))
            row = conn.execute(
                "UPDATE leader SET term = term + 1, holder = %s, url = %s,"
                " since = extract(epoch FROM now()) RETURNING term", (self.url, self.url),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def _renew(self, conn: psycopg.Connection[Any], role: str) -> tuple[str, int] | None:
        """Renew this controller's row; the leader's URL and term (also kept in
        `leader`); the leader also reads how far the live standbys have applied."""
        conn.execute(_RENEW, (role, self.term, self.applied(), self.url))
        row = conn.execute("SELECT url, term FROM leader").fetchone()
        if row is not None:
            self.leader.url, self.leader.term = str(row[0]), int(row[1])
        if role == "leader":
            self.standbys = dict(conn.execute(_LIVE_STANDBYS, (self.lease,)).fetchall())
        return None if row is None else (str(row[0]), int(row[1]))

    def lags(self) -> dict[str, int]:
        """The leader's view: facts each live standby has yet to apply."""
        last = self.applied()
        return {name: max(0, last - applied) for name, applied in self.standbys.items()}


# ---------------------------------------------------------------- operations (CLI)
class ControllerRow(msgspec.Struct, frozen=True):
    """One controller of the database as `xce controller status` shows it."""

    name: str
    role: str  # leader, standby, or gone (not seen for the lease)
    term: int
    applied: int
    lag: int  # facts of the log it has not applied (0 for the leader)
    seen_ago: float


class Status(msgspec.Struct, frozen=True):
    """Who leads the controllers of a PostgreSQL log, and how far each has applied."""

    leader: str
    term: int
    since: float
    last_seq: int
    controllers: list[ControllerRow]


def status(store: PostgresStore, lease: float = LEASE) -> Status:
    """The leadership as the database tells it (works with no controller running)."""
    with connect(store.url, store.where) as conn:
        row = conn.execute(
            "SELECT holder, term, since, extract(epoch FROM now()) FROM leader").fetchone()
        if row is None:
            raise StoreError(f"{store.where}: the leader row is missing")
        holder, term, since, now = row[0], row[1], float(row[2]), float(row[3])
        rows = conn.execute("SELECT name, role, term, applied, seen FROM controllers"
                            " ORDER BY name").fetchall()
    last = store.last_seq()
    return Status(str(holder), int(term), float(since), last, [
        ControllerRow(name, role if now - seen <= lease else "gone", int(row_term),
                      int(applied), 0 if role == "leader" else max(0, last - int(applied)),
                      round(float(now - seen), 1))
        for name, role, row_term, applied, seen in rows])


def depose(store: PostgresStore, lease: float = LEASE) -> tuple[str, int]:
    """A planned switch (`xce admin takeover`): end the leader's sessions, so that it
    steps down and a live standby takes over; (the deposed leader, its term). Refused
    when no standby is live to take over."""
    now = status(store, lease)
    if not now.leader:
        raise StoreError(f"{store.where}: no controller has led yet")
    if not any(c.role == "standby" for c in now.controllers):
        raise StoreError(f"{store.where}: no live standby to take over from {now.leader} "
                         "(start one first: it would be left without a leader)")
    with connect(store.url, store.where) as conn:
        conn.execute(_ENDED, (now.leader, ""))
    return now.leader, now.term
