"""A session's working copy of free capacity: host slots and consumables, pool
tokens and limit counters. Reservations made during the session go here, never into
the state.

A session's own capacity (`journaled`) changes the state's free slots and open
hosts in place, noting each host's values before its first change, and `restore`
puts them back when the session is done: run_session then leaves the state as it
found it without copying a list and a set of every host each session (hot on big
machines: 8,192 hosts in RICC-2010-2, bench_easy.py). Any other capacity copies them.
Neither is part of what the live controller's event loop reads while a session runs
on its own thread (xce.sched.queries), and no fact is applied meanwhile.
"""

from __future__ import annotations

from typing import Final

from xce.model.amounts import EPSILON as AMOUNT_EPSILON
from xce.sched.buckets import LimitRef
from xce.sched.hosts import HostRecord
from xce.sched.pools import PoolRecord
from xce.sched.state import SchedulerState
from xce.sched.usage import NGPUS, Use, host_use

# Float consumables: a shortfall below this is rounding, not a shortage. A compiled
# module's own Final, read in every fit test (bench_session, bench_easy).
EPSILON: Final = AMOUNT_EPSILON


class Capacity:
    """Free capacity as reserved so far in this session."""

    __slots__ = (
        "_journal",
        "_owned",
        "_owned_free",
        "_start_free",
        "_start_open",
        "_state_hosts",
        "free_res",
        "free_slots",
        "hosts",
        "label_order",
        "labels",
        "limit_delta",
        "limit_used",
        "names",
        "open_free",
        "pool_free",
        "version",
        "widest",
    )

    def __init__(self, state: SchedulerState, journaled: bool = False) -> None:
        # The state's host list and set of open hosts with a free slot are shared until
        # a virtual host or a reservation changes them (they are read only through this
        # object, never kept: see _own); journaled, the set and the free slots are
        # changed in place, and restored.
        self.hosts: list[HostRecord | None] = state.hosts
        self.open_free = state.open_free
        self._owned = False  # hosts copied
        self._owned_free = journaled  # open_free copied (or journaled)
        # Journaled: (host, its free slots, whether open with a free slot) before each
        # change, and how many hosts the state has (those after are virtual)
        self._journal: list[tuple[int, int, bool]] | None = [] if journaled else None
        self._state_hosts = len(state.free_slots)
        self._start_free, self._start_open = state.free_slots, state.open_free
        self.names = state.names  # names of real hosts by index (not of virtual hosts)
        self.labels = state.labels  # their sort labels (sched/labels.py)
        self.label_order = state.label_order  # real hosts in label order
        self.widest = state.widest  # no real host has more slots
        self.free_slots = state.free_slots if journaled else list(state.free_slots)
        self.free_res = {res: list(col) for res, col in state.free_res.items()}
        self.pool_free: dict[PoolRecord, float] = (
            {pool: pool.total - pool.used for pools in state.pools.values() for pool in pools}
            if state.pools else {}
        )
        self.limit_used = state.limit_used
        self.limit_delta: dict[LimitRef, list[int]] = {}
        self.version = 0  # bumped by every reservation: keys caches of derived views

    def usable(self, index: int, use: Use) -> int:
        """How many slots of a job of this use (sched/usage.py) fit on a host now: its
        free slots, as far as each per-slot consumable reaches, and none unless its
        free GPUs cover the job's GPUs per host."""
        per_slot, gpus = use
        slots = self.free_slots[index]
        for res, amount in per_slot:
            fit = int((self.free_res[res][index] + EPSILON) // amount)
            if fit < slots:
                slots = fit
        if gpus and self.free_res[NGPUS][index] + EPSILON < gpus:
            return 0
        return slots

    def take(
        self,
        placement: dict[int, int],
        use: Use,
        pools: dict[PoolRecord, float],
        limit_refs: tuple[LimitRef, ...],
        opened: int = 0,
        whole: bool = False,
    ) -> None:
        """Reserve a placement of a job of this use for the rest of the session (and
        `opened` more slots on hosts opened already reserved: see add_hosts). `whole`
        (an exclusive job, -x): its hosts keep no free slot for any other job."""
        self.version += 1
        if not self._owned_free:
            self._own_free()
        free_slots, free_res, open_free = self.free_slots, self.free_res, self.open_free
        journal = self._journal
        slots_total = opened
        per_slot, gpus = use
        for index, slots in placement.items():
            if journal is not None:
                journal.append((index, free_slots[index], index in open_free))
            slots_total += slots
            left = 0 if whole else free_slots[index] - slots
            free_slots[index] = left
            if gpus:
                for res, amount in host_use(use, slots):
                    free_res[res][index] -= amount
            else:  # (host_use without GPUs, inlined: hot in the catalog pass)
                for res, amount in per_slot:
                    free_res[res][index] -= amount * slots
            if left <= 0:
                open_free.discard(index)
        for pool, amount in pools.items():
            self.pool_free[pool] -= amount
        for ref in limit_refs:
            delta = self.limit_delta.get(ref)
            if delta is None:
                delta = self.limit_delta[ref] = [0, 0]
            delta[0] += slots_total
            delta[1] += 1

    def whole_free(self, cands: list[int]) -> list[int]:
        """The hosts of `cands` with every slot free (an exclusive job's candidates:
        no job running, none dispatched or held back this session)."""
        free_slots, hosts = self.free_slots, self.hosts
        return [i for i in cands if free_slots[i] == _slots_of(hosts[i])]

    def whole_hosts(self, placed: dict[int, int]) -> dict[int, int]:
        """What an exclusive job placed so holds: every slot of each of its hosts."""
        hosts = self.hosts
        return {i: _slots_of(hosts[i]) for i in placed}

    def hold_back(self, held: list[tuple[int, int, tuple[float, ...]]], sign: int) -> None:
        """Lower (sign -1) or raise again (+1) free capacity by what the plan holds
        back on reserved hosts (sched/plan.py `holdback`: never more than is free)."""
        self.version += 1
        if not self._owned_free:
            self._own_free()
        free_slots, open_free = self.free_slots, self.open_free
        journal = self._journal
        columns = list(self.free_res.values())
        width = len(columns)
        for index, slots, res in held:
            if journal is not None:
                journal.append((index, free_slots[index], index in open_free))
            free = free_slots[index] + slots if sign > 0 else free_slots[index] - slots
            free_slots[index] = free
            # (indices, not zip: compiled, zip is a slow generic call; bench_easy.py)
            for k in range(width):
                columns[k][index] += sign * res[k]
            if free <= 0:
                open_free.discard(index)
            elif sign > 0 and slots > 0:
                open_free.add(index)

    def _own(self) -> None:
        """Copy what is still shared with the state before adding virtual hosts."""
        self.hosts = list(self.hosts)
        self._owned = True
        if not self._owned_free:
            self._own_free()

    def _own_free(self) -> None:
        """Copy the open hosts with a free slot before the first reservation."""
        self.open_free = set(self.open_free)
        self._owned_free = True

    def restore(self) -> None:
        """Undo a journaled capacity's changes to the state: each changed host's free
        slots and place among the open hosts with a free slot as the session found
        them, and no virtual host (the last of a host's notes is its first change)."""
        journal = self._journal
        if journal is None:
            return
        free_slots, open_free, real = self.free_slots, self.open_free, self._state_hosts
        for index, free, member in reversed(journal):
            free_slots[index] = free
            if member:
                open_free.add(index)
            else:
                open_free.discard(index)
        journal.clear()
        if len(free_slots) > real:
            for index in range(real, len(free_slots)):
                open_free.discard(index)
            del free_slots[real:]

    def free_at_start(self) -> int:
        """The free slots of the open hosts as the session found them (before any
        reservation: the state's, once restored)."""
        free_slots, real = self._start_free, self._state_hosts
        first: dict[int, tuple[int, bool]] = {}
        for index, free, member in self._journal or ():
            if index not in first:
                first[index] = (free, member)
        total = 0
        for index in self._start_open:
            if index < real and index not in first:
                total += free_slots[index]
        for index, (free, member) in first.items():
            if member and index < real:
                total += free
        return total

    def limit_counts(self, ref: LimitRef) -> tuple[int, int]:
        """(slots, jobs) counted against a limit counter, reservations included."""
        index, key = ref
        base = self.limit_used[index].get(key)
        delta = self.limit_delta.get(ref)
        slots = (base[0] if base else 0) + (delta[0] if delta else 0)
        jobs = (base[1] if base else 0) + (delta[1] if delta else 0)
        return slots, jobs

    def add_hosts(
        self,
        host: HostRecord,
        resources: dict[str, float],
        sizes: list[int],
        use: Use,
        whole: bool = False,
    ) -> int:
        """Append virtual hosts sharing one record, one per entry of `sizes`, each with
        that many slots of a job of this use already reserved (the job's `take` then
        counts them as `opened`); returns the first index."""
        self.version += 1
        if not self._owned:
            self._own()
        first = len(self.hosts)
        count = len(sizes)
        slots = host.slots
        self.hosts.extend([host] * count)
        self.free_slots.extend([0 if whole else slots - size for size in sizes])
        free_res = self.free_res
        per_slot, gpus = use
        amounts = dict(per_slot)
        for res, column in free_res.items():
            have = resources.get(res, 0.0)
            amount = amounts.get(res)
            if amount is None or gpus:
                column.extend([have] * count)
            else:  # (host_use without GPUs, inlined: hot in the catalog pass)
                column.extend([have - amount * size for size in sizes])
        if gpus:
            for index, size in enumerate(sizes, first):
                for res, amount in host_use(use, size):
                    free_res[res][index] -= amount
        if not whole:
            self.open_free.update(
                [index for index, size in enumerate(sizes, first) if slots - size > 0]
            )
        return first


def _slots_of(host: HostRecord | None) -> int:
    return -1 if host is None else host.slots
