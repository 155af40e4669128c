"""The controller's path to the durable log: facts are queued in the order the
controller applied them and written by one thread, everything queued during one
commit going into the next transaction (group commit). A caller awaits its facts'
durability before acknowledging anything.

If a commit fails, the controller's memory is ahead of its log: `failed` is set and
every later append fails, so the daemon stops instead of acknowledging more.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time as wallclock
from collections.abc import Callable, Sequence

from xce.controller.store import Store
from xce.model.events import Event

log = logging.getLogger("xce.controller.journal")


class JournalFailed(RuntimeError):
    """The log could not be written: nothing more can be acknowledged."""


class _Entry:
    __slots__ = ("events", "extra", "future", "snapshot_seq", "time")

    def __init__(
        self,
        time: float,
        events: Sequence[Event],
        future: asyncio.Future[int],
        snapshot_seq: int | None = None,
        extra: bytes = b"",
    ) -> None:
        self.time = time
        self.events = events
        self.future = future
        self.snapshot_seq = snapshot_seq
        self.extra = extra


class Journal:
    """Ordered, group-committed appends to a `Store` from an asyncio loop."""

    def __init__(self, store: Store, last_seq: int, loop: asyncio.AbstractEventLoop,
                 timed: Callable[[float], None] | None = None) -> None:
        self.store = store
        self.timed = timed  # told the seconds of each commit of facts (on the writer thread)
        self.loop = loop
        self.queued_seq = last_seq  # seq of the last fact queued
        self.durable_seq = last_seq  # seq of the last fact known durable
        self.commits = 0
        self.failed: BaseException | None = None
        self._queue: list[_Entry] = []
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="xce-journal", daemon=True)
        self._thread.start()

    def append(self, time: float, events: Sequence[Event]) -> asyncio.Future[int]:
        """Queue `events` (already applied in memory); the future gives the seq of the
        last one once durable."""
        if self.failed is not None:
            raise JournalFailed(f"the durable log failed: {self.failed}")
        future: asyncio.Future[int] = self.loop.create_future()
        self.queued_seq += len(events)
        with self._cond:
            self._queue.append(_Entry(time, events, future))
            self._cond.notify()
        return future

    def snapshot(self, seq: int, events: Sequence[Event], extra: bytes) -> asyncio.Future[int]:
        """Queue a snapshot of the state as of fact `seq` (facts queued later are not in
        it: recovery replays them after it)."""
        future: asyncio.Future[int] = self.loop.create_future()
        with self._cond:
            self._queue.append(_Entry(0.0, events, future, seq, extra))
            self._cond.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                group, self._queue = self._queue, []
            facts = [e for e in group if e.snapshot_seq is None]
            try:
                started = wallclock.perf_counter()
                seqs = self.store.append_batches([(e.time, e.events) for e in facts])
                if self.timed is not None and facts:
                    self.timed(wallclock.perf_counter() - started)
                for entry in group:
                    if entry.snapshot_seq is not None:
                        self.store.write_snapshot(entry.snapshot_seq, entry.events, entry.extra)
            except BaseException as err:  # the log is behind memory: stop acknowledging
                log.critical("cannot write the durable log: %s", err)
                self.failed = err
                for entry in group:
                    self.loop.call_soon_threadsafe(_fail, entry.future, err)
                return
            self.commits += 1
            results = dict(zip((id(e) for e in facts), seqs, strict=True))
            done = [(e.future, results.get(id(e), e.snapshot_seq or 0)) for e in group]
            # One wake-up of the loop for the whole group (bench_controller.py submit).
            self.loop.call_soon_threadsafe(self._done, done)

    def _done(self, done: list[tuple[asyncio.Future[int], int]]) -> None:
        for future, seq in done:
            self.durable_seq = max(self.durable_seq, seq)
            if not future.done():
                future.set_result(seq)

    def close(self) -> None:
        """Write what is queued, then stop the writer thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()


def _fail(future: asyncio.Future[int], err: BaseException) -> None:
    if not future.done():
        future.set_exception(JournalFailed(f"the durable log failed: {err}"))
