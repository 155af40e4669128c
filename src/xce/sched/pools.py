"""Shared (pooled) resources: base total plus borrowed tokens, and who can reach them."""

from __future__ import annotations

from xce.model.cluster import Countable, SharedPool
from xce.sched.hosts import HostRecord, pattern_matches


class PoolRecord:
    """One pool of a shared resource.

    A pool with a countable entry (tokens can be borrowed for it) keeps a short
    history of (time, used, borrowed) so that idle borrowed tokens can be told apart
    from tokens that were busy within their idle time.
    """

    __slots__ = (
        "base",
        "borrowed",
        "countable",
        "headroom",
        "history",
        "hosts",
        "label",
        "name",
        "resource",
        "tokens_in_flight",
        "used",
    )

    def __init__(self, spec: SharedPool, only_pool: bool, countable: Countable | None) -> None:
        self.resource = spec.resource
        self.name = spec.pool
        self.base = spec.total
        self.borrowed = 0.0
        self.tokens_in_flight = 0.0
        self.headroom: float | None = None  # None: max_borrow less borrowed and in flight
        self.hosts = spec.hosts
        self.used = 0.0
        self.countable = countable
        self.history: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)]
        # FORMATS.md: a resource with several pools is reported as "resource/pool".
        self.label = spec.resource if only_pool else f"{spec.resource}/{spec.pool}"

    @property
    def total(self) -> float:
        return self.base + self.borrowed

    def reaches(self, host: HostRecord) -> bool:
        return pattern_matches(self.hosts, host)

    def available_headroom(self) -> float:
        """How many more tokens could be borrowed now."""
        if self.countable is None:
            return 0.0
        if self.headroom is not None:
            return max(0.0, self.headroom)
        return max(0.0, self.countable.max_borrow - self.borrowed - self.tokens_in_flight)

    def record(self, time: float) -> None:
        """Note the current use and borrowing at `time` (countable pools only)."""
        if self.countable is None:
            return
        history = self.history
        time = max(time, history[-1][0])  # events may arrive slightly out of order
        history.append((time, self.used, self.borrowed))
        horizon = time - self.countable.idle_time
        # Keep the snapshot in effect at the horizon and everything after it.
        drop = 0
        while drop + 1 < len(history) and history[drop + 1][0] <= horizon:
            drop += 1
        if drop:
            del history[:drop]

    def idle_tokens(self, now: float, free_now: float) -> float:
        """Borrowed tokens that stayed unallocated for at least the idle time."""
        if self.countable is None or self.borrowed <= 0:
            return 0.0
        horizon = now - self.countable.idle_time
        idle = min(self.borrowed, free_now)
        for index, (time, used, borrowed) in enumerate(self.history):
            later = self.history[index + 1][0] if index + 1 < len(self.history) else now
            if later <= horizon and index + 1 < len(self.history):
                continue  # superseded before the window began
            if time > now:
                break
            idle = min(idle, borrowed, self.base + borrowed - used)
        return max(0.0, idle)
