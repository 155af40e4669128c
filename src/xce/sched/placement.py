"""Where a job's slots go: candidate hosts, `order[]` preference, `span[]` rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xce.resreq import OrderKey
from xce.sched.capacity import Capacity

HostKey = Callable[[int], tuple[float, ...]]


def host_key(cap: Capacity, order: tuple[OrderKey, ...], name_rank: list[int]) -> HostKey:
    """Preference of a host, smaller first. Default (no `order[]`): the most free
    slots, then name. `order[r]` puts the most free (or largest) `r` first,
    `order[-r]` the least; ties by name."""
    free_slots = cap.free_slots
    if not order:
        return lambda i: (-free_slots[i], name_rank[i])
    getters: list[Callable[[int], float]] = []
    for key in order:
        sign = -1.0 if key.descending else 1.0
        if key.name == "slots":
            getters.append(lambda i, s=sign: s * free_slots[i])
        elif key.name in cap.free_res:
            column = cap.free_res[key.name]
            getters.append(lambda i, s=sign, c=column: s * c[i])
        else:
            hosts, name = cap.hosts, key.name
            getters.append(lambda i, s=sign, n=name: s * _static(hosts[i], n))
    return lambda i: (*(g(i) for g in getters), name_rank[i])


def _static(host: object, name: str) -> float:
    value = getattr(host, "attrs", {}).get(name, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def place(
    cap: Capacity,
    candidates: Iterable[int],
    n: int,
    per_slot: tuple[tuple[str, float], ...],
    span_hosts: int | None,
    ptile: int | None,
    key: HostKey,
) -> dict[int, int] | None:
    """A placement {host index: slots} for `n` slots, or None if none fits."""
    usable = cap.usable
    if span_hosts == 1 or n == 1 or (ptile is not None and ptile >= n):
        best = -1
        best_key: tuple[float, ...] = ()
        for index in candidates:
            if usable(index, per_slot) >= n:
                k = key(index)
                if best < 0 or k < best_key:
                    best, best_key = index, k
        return {best: n} if best >= 0 else None
    room = [(key(i), i, u) for i in candidates if (u := usable(i, per_slot)) > 0]
    if sum(u for _k, _i, u in room) < n:
        return None
    room.sort()
    placement: dict[int, int] = {}
    left = n
    for _k, index, free in room:
        if ptile is None:
            take = min(free, left)
        else:
            take = min(ptile, left)
            if free < take:
                continue
        placement[index] = take
        left -= take
        if left == 0:
            return placement
    return None


def shortfall(
    cap: Capacity,
    candidates: list[int],
    n: int,
    per_slot: tuple[tuple[str, float], ...],
) -> tuple[str, str]:
    """Why `n` slots did not fit on `candidates`: (check, pend reason)."""
    free = sum(cap.free_slots[i] for i in candidates)
    if free < n:
        return "slots", f"Not enough job slots: {n} needed, {free} free on eligible hosts"
    if per_slot:
        fits = sum(cap.usable(i, per_slot) for i in candidates)
        if fits < n:
            # Name the consumable that leaves the least room.
            res, amount = min(
                per_slot,
                key=lambda item: sum(cap.usable(i, (item,)) for i in candidates),
            )
            return (
                "consumable",
                f"Not enough {res}: {n} slots x {amount:g} needed, room for {fits} slots "
                "on eligible hosts",
            )
    return "span", "Not enough hosts to meet the span requirement"
