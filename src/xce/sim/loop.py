"""The simulator's event loop: a heap of (time, priority, sequence, action).

Actions at the same time run by priority (inputs before the session that reads them),
then in the order they were scheduled. Nothing else: the simulator builds on it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

Action = Callable[[], None]

INPUT = 0  # job arrivals, completions, provider responses
SESSION = 1  # a scheduling session and its policy round, after the inputs of its time
TIMER = 2  # a wake-up when something may fall due; not work by itself


class EventLoop:
    """Pops actions in time order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Action]] = []
        self._seq = 0
        self.now = 0.0
        self.work = 0  # scheduled actions that are not timers

    def at(self, time: float, action: Action, priority: int = INPUT) -> None:
        """Run `action` at `time` (never in the past)."""
        self._seq += 1
        if priority != TIMER:
            self.work += 1
        heapq.heappush(self._heap, (max(time, self.now), priority, self._seq, action))

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Run the next action; False when nothing is left."""
        if not self._heap:
            return False
        time, priority, _seq, action = heapq.heappop(self._heap)
        if priority != TIMER:
            self.work -= 1
        self.now = time
        action()
        return True

    def __len__(self) -> int:
        return len(self._heap)
