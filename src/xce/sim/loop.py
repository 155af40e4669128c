"""The simulator's event loop: a heap of (time, priority, sequence, action).

Actions at the same time run by priority (inputs before the session that reads them),
then in the order they were scheduled. Nothing else: the simulator builds on it.

A long sorted series of inputs known in advance (a workload's arrivals) is kept out of
the heap as a *stream*: it is merged in time order as if each item had been scheduled
as an input before anything else, so an item runs before every heap action of the
same time (same order as scheduling them all with `at` first, without a heap of
hundreds of thousands of entries).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import pairwise

Action = Callable[[], None]

INPUT = 0  # job arrivals, completions, provider responses
SESSION = 1  # a scheduling session and its policy round, after the inputs of its time
TIMER = 2  # a wake-up when something may fall due; not work by itself


class EventLoop:
    """Pops actions in time order."""

    __slots__ = ("_handler", "_heap", "_next", "_seq", "_times", "_work", "now")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Action]] = []
        self._seq = 0
        self.now = 0.0
        self._work = 0  # scheduled heap actions that are not timers
        self._times: Sequence[float] = ()  # the stream: times, sorted
        self._next = 0  # the stream's next item
        self._handler: Callable[[int], None] | None = None

    def stream(self, times: Sequence[float], handler: Callable[[int], None]) -> None:
        """Run `handler(i)` at `times[i]` (sorted, none before `now`), each as an input
        scheduled before anything else. Only before any `at`, once."""
        if self._seq or self._handler is not None:
            raise RuntimeError("a stream must be given first, and only once")
        for earlier, later in pairwise(times):
            if later < earlier:
                raise ValueError("stream times must be sorted")
        if times and times[0] < self.now:
            raise ValueError("stream times must not be in the past")
        self._times = times
        self._handler = handler
        self._next = 0

    @property
    def work(self) -> int:
        """Scheduled actions that are not timers (stream items still to come included)."""
        return self._work + len(self._times) - self._next

    def at(self, time: float, action: Action, priority: int = INPUT) -> None:
        """Run `action` at `time` (never in the past)."""
        self._seq += 1
        if priority != TIMER:
            self._work += 1
        now = self.now
        # max(time, now), exactly: the time itself unless it is in the past
        heapq.heappush(self._heap, (now if now > time else time, priority, self._seq, action))

    def next_time(self) -> float | None:
        heap, times, nxt = self._heap, self._times, self._next
        if nxt < len(times):
            first = times[nxt]
            if heap and heap[0][0] < first:
                return heap[0][0]
            return first
        return heap[0][0] if heap else None

    def step(self) -> bool:
        """Run the next action; False when nothing is left."""
        times, nxt = self._times, self._next
        heap = self._heap
        if nxt < len(times):
            first = times[nxt]
            if not heap or first <= heap[0][0]:
                self._next = nxt + 1
                self.now = first
                assert self._handler is not None
                self._handler(nxt)
                return True
        elif not heap:
            return False
        time, priority, _seq, action = heapq.heappop(heap)
        if priority != TIMER:
            self._work -= 1
        self.now = time
        action()
        return True

    def __len__(self) -> int:
        return len(self._heap) + len(self._times) - self._next
