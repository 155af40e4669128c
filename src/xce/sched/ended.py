"""How jobs ended, remembered for dependency conditions, and jobs found by name.

A condition may name a job that ended before its dependent was submitted
(`done(12)`), so the state remembers how every job ended: for at least CLEAN_PERIOD
after its end (an hour: LSF's CLEAN_PERIOD default, and how long the controller shows
finished jobs), and for as long as a pending dependent's condition names it (a state
rebuilt from events must find it again). A job name (per user) lists its jobs and
arrays in submission order, for conditions that name jobs (`done(step1)`).
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Container
from typing import Final

from xce.model.events import EndedJob

CLEAN_PERIOD: Final = 3600.0  # s an ended job is remembered at least

# (submit time, id): a job's place in submission order; an array's id is its own
Unit = tuple[float, int]


class JobMemory:
    """Ended jobs by id (oldest end first) and the jobs and arrays of each name."""

    __slots__ = ("_kept", "_order", "ended", "names")

    def __init__(self) -> None:
        self.ended: dict[int, EndedJob] = {}
        self._order: deque[EndedJob] = deque()  # by end (events come in time order)
        self._kept: set[int] = set()  # past CLEAN_PERIOD, still named by a condition
        # user -> job name -> its jobs (and arrays, by their id) in submission order
        self.names: dict[str, dict[str, list[Unit]]] = {}

    def remember(self, ended: EndedJob) -> None:
        self.ended[ended.id] = ended
        self._order.append(ended)

    def due(self, now: float) -> bool:
        """Whether some job ended more than CLEAN_PERIOD before `now`."""
        order = self._order
        return bool(order) and order[0].time < now - CLEAN_PERIOD

    def forget_old(self, now: float, named: Container[int]) -> list[EndedJob]:
        """Forget the jobs that ended more than CLEAN_PERIOD before `now` and that no
        condition names (those are kept until none does: `release`); returns them."""
        order, gone = self._order, []
        limit = now - CLEAN_PERIOD
        while order and order[0].time < limit:
            ended = order.popleft()
            if self.ended.get(ended.id) is not ended:
                continue  # (restored again since: the newer record counts)
            if ended.id in named:
                self._kept.add(ended.id)
            else:
                del self.ended[ended.id]
                gone.append(ended)
        return gone

    def release(self, jobs: list[int], named: Container[int]) -> list[EndedJob]:
        """Of `jobs` (no longer named by the condition that named them), forget those
        kept past CLEAN_PERIOD that no other condition names; returns them."""
        gone: list[EndedJob] = []
        if not self._kept:
            return gone
        for job in jobs:
            if job in self._kept and job not in named:
                self._kept.discard(job)
                gone.append(self.ended.pop(job))
        return gone

    def records(self) -> list[EndedJob]:
        """Every ended job remembered, oldest end first."""
        return sorted(self.ended.values(), key=lambda e: (e.time, e.id))

    # ------------------------------------------------------------------ names
    def add_name(self, user: str, name: str, unit: Unit) -> None:
        units = self.names.setdefault(user, {}).setdefault(name, [])
        if not units or units[-1] < unit:
            units.append(unit)
        elif unit not in units:
            insort(units, unit)

    def drop_name(self, user: str, name: str, unit: Unit) -> None:
        by_name = self.names.get(user)
        units = by_name.get(name) if by_name is not None else None
        if by_name is None or units is None or unit not in units:
            return
        units.remove(unit)
        if not units:
            del by_name[name]
            if not by_name:
                del self.names[user]

    def latest(self, user: str, name: str, before: Unit, exclude: int) -> int | None:
        """The id of `user`'s most recent job (or array) named `name` (the latest
        submit time, then the highest id) submitted no later than the dependent
        `before` (its submit time and id; not itself, nor `exclude`: its own array),
        or None."""
        units = self.names.get(user, {}).get(name, [])
        submit, dependent = before
        for unit in reversed(units):
            if unit[0] <= submit and unit[1] != dependent and unit[1] != exclude:
                return unit[1]
        return None

    def matching(self, user: str, prefix: str, before: Unit, exclude: int) -> list[int]:
        """For each of `user`'s job names that start with `prefix`, its most recent
        job (or array) as `latest` finds it, by name."""
        found: list[int] = []
        for name in sorted(self.names.get(user, {})):
            if name.startswith(prefix):
                unit = self.latest(user, name, before, exclude)
                if unit is not None:
                    found.append(unit)
        return found
