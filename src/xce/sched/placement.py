"""Where a job's slots go: candidate hosts, `order[]` preference, `span[]` rules."""

from __future__ import annotations

from collections.abc import Callable

from xce.resreq import OrderKey
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.hosts import HostRecord


class Room:
    """How many slots of one per-slot shape each candidate host can take now."""

    __slots__ = ("cands", "free", "most", "per_slot", "total", "usable")

    def __init__(
        self, cap: Capacity, cands: list[int], per_slot: tuple[tuple[str, float], ...]
    ) -> None:
        free_slots = cap.free_slots
        self.cands = cands
        self.per_slot = per_slot
        if len(per_slot) == 1:  # the common case, inlined
            (res, amount), = per_slot
            column = cap.free_res[res]
            self.usable = [
                min(free_slots[i], int((column[i] + EPSILON) // amount)) for i in cands
            ]
        elif per_slot:
            usable = cap.usable
            self.usable = [usable(i, per_slot) for i in cands]
        else:
            self.usable = [free_slots[i] for i in cands]
        self.free = sum(free_slots[i] for i in cands)
        self.total = sum(self.usable)
        self.most = max(self.usable, default=0)


class HostOrder:
    """Preference of hosts, smaller first. Default (no `order[]`): the most free
    slots, then name. `order[r]` puts the most free (or largest) `r` first,
    `order[-r]` the least; ties by name."""

    __slots__ = ("_free_slots", "_getters", "_hosts")

    def __init__(self, cap: Capacity, order: tuple[OrderKey, ...]) -> None:
        self._free_slots = cap.free_slots
        self._hosts = cap.hosts
        self._getters = [_getter(cap, key) for key in order]

    def __call__(self, i: int) -> tuple[float | str, ...]:
        if not self._getters:
            return (-self._free_slots[i], _name(self._hosts[i]))
        return (*(g(i) for g in self._getters), _name(self._hosts[i]))

    def keys(self, indices: list[int]) -> list[tuple[float | str, ...]]:
        """The keys of many hosts (the default order built column by column)."""
        if self._getters:
            return [self(i) for i in indices]
        free, hosts = self._free_slots, self._hosts
        return list(zip([-free[i] for i in indices], [_name(hosts[i]) for i in indices],
                        strict=True))


def host_key(cap: Capacity, order: tuple[OrderKey, ...]) -> HostOrder:
    """The host preference of a requirement's `order[]` on this capacity."""
    return HostOrder(cap, order)


def _name(host: HostRecord | None) -> str:
    return host.name if host is not None else ""


def _getter(cap: Capacity, key: OrderKey) -> Callable[[int], float]:
    """The sort value of one `order[]` key for a host index (smaller first)."""
    sign = -1.0 if key.descending else 1.0
    if key.name == "slots":
        free_slots = cap.free_slots
        return lambda i: sign * free_slots[i]
    if key.name in cap.free_res:
        column = cap.free_res[key.name]
        return lambda i: sign * column[i]
    hosts, name = cap.hosts, key.name
    return lambda i: sign * _static(hosts[i], name)


def _static(host: object, name: str) -> float:
    value = getattr(host, "attrs", {}).get(name, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def single_host(n: int, span_hosts: int | None, ptile: int | None) -> bool:
    """Whether all of a job's slots must (or will) go on one host."""
    return n == 1 or span_hosts == 1 or (ptile is not None and ptile >= n)


def place(
    room: Room, n: int, span_hosts: int | None, ptile: int | None, key: HostOrder
) -> dict[int, int] | None:
    """A placement {host index: slots} for `n` slots, or None if none fits."""
    if single_host(n, span_hosts, ptile):
        if room.most < n:
            return None
        fits = [i for i, u in zip(room.cands, room.usable, strict=True) if u >= n]
        best = min(zip(key.keys(fits), fits, strict=True))[1]
        return {best: n}
    if room.total < n:
        return None
    indices = [i for i, u in zip(room.cands, room.usable, strict=True) if u > 0]
    rooms = [u for u in room.usable if u > 0]
    ranked = sorted(zip(key.keys(indices), indices, rooms, strict=True))
    if ptile is not None:
        return _place_ptile(ranked, n, ptile)
    placement: dict[int, int] = {}
    left = n
    for _k, index, free in ranked:
        take = min(free, left)
        placement[index] = take
        left -= take
        if left == 0:
            return placement
    return None


def _place_ptile(
    ranked: list[tuple[tuple[float | str, ...], int, int]], n: int, ptile: int
) -> dict[int, int] | None:
    """Exactly `ptile` slots on each of the first hosts that have room for them, in
    preference order; the remainder on the next preferred host with room for it."""
    chunks, remainder = divmod(n, ptile)
    placement: dict[int, int] = {}
    for _k, index, free in ranked:
        if len(placement) == chunks:
            break
        if free >= ptile:
            placement[index] = ptile
    if len(placement) < chunks:
        return None
    if remainder:
        spare = next(
            (i for _k, i, free in ranked if free >= remainder and i not in placement), None
        )
        if spare is None:
            return None
        placement[spare] = remainder
    return placement


def shortfall(cap: Capacity, room: Room, n: int) -> tuple[str, str]:
    """Why `n` slots did not fit in `room`: (check, pend reason)."""
    if room.free < n:
        return "slots", f"Not enough job slots: {n} needed, {room.free} free on eligible hosts"
    if room.per_slot and room.total < n:
        res, amount = room.per_slot[0]
        if len(room.per_slot) > 1:  # name the consumable that leaves the least room
            res, amount = min(
                room.per_slot,
                key=lambda item: sum(cap.usable(i, (item,)) for i in room.cands),
            )
        return (
            "consumable",
            f"Not enough {res}: {n} slots x {amount:g} needed, room for {room.total} slots "
            "on eligible hosts",
        )
    return "span", "Not enough hosts to meet the span requirement"
