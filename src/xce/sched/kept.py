"""A template's hosts kept in the catalog pass for jobs wider than its max that ask
for them later (sched/holds_wide.py), so that no later job counts them too.

Such a job holds its real hosts from its start and will ask for `count` hosts of the
template then. Until then later jobs may still use the template, but only so that
`count` hosts stay within reach at that start: in flight, new within the allowance,
or opened in this pass for jobs that end by then ("lent": a host that joins for a
short job is free again for the wide one). A job whose hosts would stay busy past a
kept start is refused the template when it would leave too few. The holds count
together: at each kept start, every hold starting by then needs its hosts.

The jobs ahead of such a job have the template first (the catalog pass goes in
scheduling order); the hosts they keep busy past its start count against it. A hold
they leave too few hosts is not kept: it plans again at the next session. So every
host the pass opens is followed from the first, for a template with such a hold.
"""

from __future__ import annotations

from collections.abc import Iterable


class KeptHosts:
    """The kept holds of one template in one catalog pass, and the hosts it opened."""

    __slots__ = ("free_by", "holds", "lent")

    def __init__(self) -> None:
        # (hosts, from when, for which job), in the order kept
        self.holds: list[tuple[int, float, int]] = []
        # Per hold: the lent hosts free again by its start
        self.free_by: list[int] = []
        # Host opened in the pass -> when the last job placed on it ends
        self.lent: dict[int, float] = {}

    def needed_by(self, start: float) -> int:
        """Hosts the holds starting by `start` need together."""
        return sum([count for count, at, _job in self.holds if at <= start])

    def admits(self, count: int, start: float, room: int) -> bool:
        """Whether a hold of `count` hosts from `start` can be kept with those already
        kept, `room` hosts still to come (in flight and new within the allowance)."""
        free = self._free_by(start)
        if room + free < self.needed_by(start) + count:
            return False
        return all(
            room + self.free_by[k] >= self.needed_by(at) + count
            for k, (_count, at, _job) in enumerate(self.holds)
            if at >= start
        )

    def keep(self, job: int, count: int, start: float) -> None:
        self.free_by.append(self._free_by(start))
        self.holds.append((count, start, job))

    def short(self, room: int, chosen: Iterable[int], end: float) -> tuple[int, float] | None:
        """The first hold (its job and start) that a job busy on the template until
        `end`, on `chosen` hosts opened so far and leaving `room` hosts to come, would
        leave too few hosts at its start; None: it leaves every hold its hosts."""
        for k, (_count, at, job) in enumerate(self.holds):
            if at >= end:
                continue  # (its hosts are free again by then)
            taken = 0  # lent hosts free by then that the job would keep busy
            for index in chosen:
                busy = self.lent.get(index)
                if busy is not None and busy <= at:
                    taken += 1
            if room + self.free_by[k] - taken < self.needed_by(at):
                return job, at
        return None

    def lend(self, chosen: Iterable[int], opened: Iterable[int], end: float) -> None:
        """A job busy until `end` was placed on `chosen` hosts opened before and on
        `opened` ones opened for it: they are busy until then at least."""
        for index in chosen:
            self._busy(index, end)
        for index in opened:
            self._busy(index, end)

    def _busy(self, index: int, end: float) -> None:
        busy = self.lent.get(index)
        if busy is not None and busy >= end:
            return
        for k, (_count, at, _job) in enumerate(self.holds):
            if busy is not None and busy <= at:
                self.free_by[k] -= 1
            if end <= at:
                self.free_by[k] += 1
        self.lent[index] = end

    def _free_by(self, start: float) -> int:
        return sum([1 for busy in self.lent.values() if busy <= start])
