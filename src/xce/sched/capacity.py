"""A session's working copy of free capacity: host slots and consumables, pool
tokens and limit counters. Reservations made during the session go here, never into
the state."""

from __future__ import annotations

from xce.sched.buckets import LimitRef
from xce.sched.hosts import HostRecord
from xce.sched.pools import PoolRecord
from xce.sched.state import SchedulerState

# Float consumables: treat a shortfall below this as rounding, not a shortage.
EPSILON = 1e-9


class Capacity:
    """Free capacity as reserved so far in this session."""

    __slots__ = (
        "free_res",
        "free_slots",
        "hosts",
        "limit_delta",
        "limit_used",
        "open_free",
        "pool_free",
        "version",
    )

    def __init__(self, state: SchedulerState) -> None:
        self.hosts: list[HostRecord | None] = list(state.hosts)
        self.free_slots = list(state.free_slots)
        self.free_res = {res: list(col) for res, col in state.free_res.items()}
        self.open_free = set(state.open_free)
        self.pool_free: dict[PoolRecord, float] = {
            pool: pool.total - pool.used for pools in state.pools.values() for pool in pools
        }
        self.limit_used = state.limit_used
        self.limit_delta: dict[LimitRef, list[int]] = {}
        self.version = 0  # bumped by every reservation: keys caches of derived views

    def usable(self, index: int, per_slot: tuple[tuple[str, float], ...]) -> int:
        """How many slots of a job with these per-slot consumables fit on a host now."""
        slots = self.free_slots[index]
        for res, amount in per_slot:
            fit = int((self.free_res[res][index] + EPSILON) // amount)
            if fit < slots:
                slots = fit
        return slots

    def take(
        self,
        placement: dict[int, int],
        per_slot: tuple[tuple[str, float], ...],
        pools: dict[PoolRecord, float],
        limit_refs: tuple[LimitRef, ...],
    ) -> None:
        """Reserve a placement for the rest of the session."""
        self.version += 1
        free_slots, free_res, open_free = self.free_slots, self.free_res, self.open_free
        for index, slots in placement.items():
            left = free_slots[index] - slots
            free_slots[index] = left
            for res, amount in per_slot:
                free_res[res][index] -= amount * slots
            if left <= 0:
                open_free.discard(index)
        for pool, amount in pools.items():
            self.pool_free[pool] -= amount
        slots_total = sum(placement.values())
        for ref in limit_refs:
            delta = self.limit_delta.get(ref)
            if delta is None:
                delta = self.limit_delta[ref] = [0, 0]
            delta[0] += slots_total
            delta[1] += 1

    def limit_counts(self, ref: LimitRef) -> tuple[int, int]:
        """(slots, jobs) counted against a limit counter, reservations included."""
        index, key = ref
        base = self.limit_used[index].get(key)
        delta = self.limit_delta.get(ref)
        slots = (base[0] if base else 0) + (delta[0] if delta else 0)
        jobs = (base[1] if base else 0) + (delta[1] if delta else 0)
        return slots, jobs

    def add_host(self, host: HostRecord, resources: dict[str, float]) -> int:
        """Append a virtual host (catalog pass); returns its index."""
        self.version += 1
        index = len(self.hosts)
        self.hosts.append(host)
        self.free_slots.append(host.slots)
        for res, column in self.free_res.items():
            column.append(resources.get(res, 0.0))
        if host.slots > 0:
            self.open_free.add(index)
        return index

    def drop_hosts(self, count: int) -> None:
        """Forget the last `count` virtual hosts (a catalog placement rolled back)."""
        self.version += 1
        for _ in range(count):
            index = len(self.hosts) - 1
            self.hosts.pop()
            self.free_slots.pop()
            for column in self.free_res.values():
                column.pop()
            self.open_free.discard(index)
