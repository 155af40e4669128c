"""The simulator's event loop: actions in order of (time, priority, sequence).

Actions at the same time run by priority (inputs before the session that reads them),
then in the order they were scheduled. Nothing else: the simulator builds on it.

A long sorted series of inputs known in advance (a workload's arrivals) is kept out of
the heap as a *stream*: it is merged in time order as if each item had been scheduled
as an input before anything else, so an item runs before every heap action of the
same time (same order as scheduling them all with `at` first, without a heap of
hundreds of thousands of entries).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from itertools import pairwise
from typing import Final

Action = Callable[[], None]

INPUT: Final = 0  # job arrivals, completions, provider responses
SESSION: Final = 1  # a scheduling session and its policy round, after the inputs of its time
TIMER: Final = 2  # a wake-up when something may fall due; not work by itself


class EventLoop:
    """Pops actions in time order.

    A heap holds each time that has actions once (floats compare fast; most times
    have one or two actions); beside it, each time's actions by priority, in the
    order they were scheduled."""

    __slots__ = ("_handler", "_next", "_seq", "_slots", "_times", "_when", "_work", "now")

    def __init__(self) -> None:
        self._when: list[float] = []  # heap of the times that have actions
        # time -> its actions by priority (None: none of that priority), in order
        self._slots: dict[float, list[list[Action] | None]] = {}
        self._seq = 0  # actions ever scheduled
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
        time = now if time < now else float(time)  # (times are floats, as `now` is)
        slots = self._slots.get(time)
        if slots is None:
            slots = self._slots[time] = [None, None, None]
            heappush(self._when, time)
        actions = slots[priority]
        if actions is None:
            slots[priority] = [action]
        else:
            actions.append(action)

    def next_time(self) -> float | None:
        when, times, nxt = self._when, self._times, self._next
        if nxt < len(times):
            first = times[nxt]
            if when and when[0] < first:
                return when[0]
            return first
        return when[0] if when else None

    def step(self) -> bool:
        """Run the next action; False when nothing is left."""
        times, nxt = self._times, self._next
        when = self._when
        if nxt < len(times):
            first = times[nxt]
            if not when or first <= when[0]:
                self._next = nxt + 1
                self.now = float(first)
                assert self._handler is not None
                self._handler(nxt)
                return True
        elif not when:
            return False
        time = when[0]
        slots = self._slots[time]
        for priority in range(3):
            actions = slots[priority]
            if actions:
                break
        assert actions
        action = actions.pop(0)
        if priority != TIMER:
            self._work -= 1
        if not actions:
            slots[priority] = None
            if slots[0] is None and slots[1] is None and slots[2] is None:
                heappop(when)
                del self._slots[time]
        self.now = time
        action()
        return True
