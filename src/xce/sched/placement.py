"""Where a job's slots go: candidate hosts, `order[]` preference, `span[]` rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from xce.resreq import OrderKey
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.hosts import by_label
from xce.sched.usage import NGPUS, Use


class Room:
    """How many slots of a job of one use (per-slot consumables, GPUs per host: see
    sched/usage.py) each candidate host can take now."""

    __slots__ = ("cands", "free", "most", "per_slot", "total", "usable", "use")

    def __init__(self, cap: Capacity, cands: list[int], use: Use) -> None:
        free_slots = cap.free_slots
        self.cands = cands
        self.use = use
        per_slot, gpus = use
        self.per_slot = per_slot
        if not per_slot and not gpus:  # slots only: what is usable is what is free
            self.usable = [free_slots[i] for i in cands]
            self.free = self.total = sum(self.usable)
        else:
            if len(per_slot) == 1 and not gpus:  # the common case, inlined
                (res, amount), = per_slot
                column = cap.free_res[res]
                self.usable = [
                    min(free_slots[i], int((column[i] + EPSILON) // amount)) for i in cands
                ]
            else:
                usable = cap.usable
                self.usable = [usable(i, use) for i in cands]
            self.free = sum([free_slots[i] for i in cands])
            self.total = sum(self.usable)
        self.most = max(self.usable, default=0)


class HostOrder:
    """Preference of real hosts, smaller first. Default (no `order[]`): the most free
    slots, then name. `order[r]` puts the most free (or largest) `r` first,
    `order[-r]` the least; ties by name (host names are unique: no two hosts tie).
    Names are compared as sort labels (sched/labels.py: static hosts first)."""

    __slots__ = ("_free_slots", "_getters", "_label_order", "_labels", "_widest")

    def __init__(self, cap: Capacity, order: tuple[OrderKey, ...]) -> None:
        self._free_slots = cap.free_slots
        self._labels = cap.labels
        self._label_order = cap.label_order
        self._widest = cap.widest
        self._getters = [_getter(cap, key) for key in order]

    def __call__(self, i: int) -> tuple[float | str, ...]:
        if not self._getters:
            return (-self._free_slots[i], self._labels[i])
        return (*(g(i) for g in self._getters), self._labels[i])

    def best(self, indices: list[int]) -> int:
        """The most preferred of `indices` (not empty)."""
        if self._getters:
            return min(indices, key=self)
        free = self._free_slots
        most = max([free[i] for i in indices])
        tied = [i for i in indices if free[i] == most]
        if len(tied) == 1:
            return tied[0]
        # (the least label without a key: compiled, each key call is a slow generic
        # call; one-slot jobs on hosts alike meet this in bench_easy.py)
        labels = self._labels
        tied_labels = [labels[i] for i in tied]
        return tied[tied_labels.index(min(tied_labels))]

    def ranked(self, indices: list[int]) -> list[int]:
        """`indices` in preference order."""
        if self._getters:
            return sorted(indices, key=self)
        return default_ranked(indices, self._free_slots, self._labels, self._label_order)

    def widest(self, members: set[int]) -> int | None:
        """`best` of `members`, the real hosts with a free slot, when it is found in
        label order before `best` would cost more (a few times as many hosts as
        `members`): the first with every slot free and as many slots as any host has
        had (none has more free). None: not found so, or an `order[]`. (Hot in
        simulations of big machines of one-slot hosts: a job that starts at once would
        rank every free host, while busy ones fill the start of the label order;
        bench_easy.py, RICC-2010-2.)"""
        if self._getters:
            return None
        free, widest = self._free_slots, self._widest
        order = self._label_order
        for index in order[: 3 * len(members) + 64] if len(order) > 4 * len(members) else order:
            if index in members and free[index] >= widest:
                return index
        return None


class RequestedFirst(HostOrder):
    """The preference of a job some hosts were requested for (`HostAdded`'s
    requested_for; ARCHITECTURE.md 2a: hosts requested for a job go to that job): as
    HostOrder, with those hosts before the others among equals, then by name."""

    __slots__ = ("_requested",)

    def __init__(self, cap: Capacity, order: tuple[OrderKey, ...], requested: set[int]) -> None:
        super().__init__(cap, order)
        self._requested = requested

    def __call__(self, i: int) -> tuple[float | str, ...]:
        ranked = super().__call__(i)
        return (*ranked[:-1], 0 if i in self._requested else 1, ranked[-1])

    def best(self, indices: list[int]) -> int:
        return min(indices, key=self)

    def ranked(self, indices: list[int]) -> list[int]:
        return sorted(indices, key=self)

    def widest(self, members: set[int]) -> int | None:
        return None  # (the requested hosts come first: HostOrder's shortcut does not hold)


def most_room_first(indices: Iterable[int], room: dict[int, int], labels: list[str]) -> list[int]:
    """`indices` by most `room` first, then by label: a sort by label, then a stable
    one by room (both with C keys: compiled, a key of two values is a generic call
    per host, hot in elastic simulations' holds; bench_traces.py)."""
    ranked = by_label(indices, labels)
    ranked.sort(key=room.__getitem__, reverse=True)  # (stable, also reversed)
    return ranked


def default_ranked(
    indices: list[int], free_slots: list[int], labels: list[str], label_order: list[int]
) -> list[int]:
    """Hosts in the default preference order: the most free slots first, then by name
    (in label order, then stably by free slots: sched/labels.py). `label_order`: the
    real hosts' indices by label; taken instead of sorting labels when `indices` are
    many of them."""
    ranked: list[int] | None = None
    if len(indices) * 8 >= len(label_order):
        wanted = set(indices)
        ranked = [i for i in label_order if i in wanted]
        if len(ranked) != len(indices):  # not all real hosts (virtual ones have no label)
            ranked = None
    if ranked is None:
        ranked = by_label(indices, labels)
    if ranked:
        # (no sort when every host has as many free: compiled, each key call is a slow
        # generic call; reservations on hosts alike meet this in bench_easy.py)
        same = free_slots[ranked[0]]
        for index in ranked:
            if free_slots[index] != same:
                ranked.sort(key=free_slots.__getitem__, reverse=True)
                break
    return ranked


def spread_everywhere(
    cands: list[int],
    members: set[int],
    free_slots: list[int],
    labels: list[str],
    label_order: list[int],
    n: int,
    widest: int,
) -> dict[int, int] | None:
    """What `spread(default_ranked(cands, ...), free_slots.__getitem__, n)` finds, for
    candidates that are exactly the set `members` (not empty): every open host with a
    free slot. When they all have the same free slots (always, where no host has more
    than `widest` <= 1), the first ones by label take the job, found without ranking
    them all."""
    same = 1
    if widest > 1:
        same = free_slots[cands[0]]
        for index in cands:
            if free_slots[index] != same:
                return spread(
                    default_ranked(cands, free_slots, labels, label_order),
                    free_slots.__getitem__, n,
                )
    wanted = -(-n // same)  # hosts that take the job
    if wanted > len(cands):
        return None
    chosen: list[Any]
    if len(cands) * 4 < len(label_order):  # few candidates: sort their labels
        chosen = by_label(cands, labels)[:wanted]
    else:  # many: the first of them in label order
        chosen = []
        # (taken as objects: compiled, an int read from a list is unboxed, then boxed
        # anew for the set, an allocation for each host past 256; RICC-2010-2)
        for index in cast("list[Any]", label_order):
            if index in members:
                chosen.append(index)
                if len(chosen) == wanted:
                    break
    placement = dict.fromkeys(chosen, same)  # (in C, the indices as they are: RICC-2010-2)
    placement[chosen[-1]] = n - same * (wanted - 1)
    return placement


def spread(ranked: list[int], usable: Callable[[int], int], n: int) -> dict[int, int] | None:
    """`n` slots over hosts in preference order, as many on each as it can take (no
    span), or None if they do not add up."""
    placement: dict[int, int] = {}
    left = n
    for index in ranked:
        free = usable(index)
        if free >= left:
            placement[index] = left
            return placement
        placement[index] = free
        left -= free
    return None


def host_key(cap: Capacity, order: tuple[OrderKey, ...]) -> HostOrder:
    """The host preference of a requirement's `order[]` on this capacity."""
    return HostOrder(cap, order)


def _getter(cap: Capacity, key: OrderKey) -> Callable[[int], float]:
    """The sort value of one `order[]` key for a host index (smaller first)."""
    sign = -1.0 if key.descending else 1.0
    if key.name == "slots":
        free_slots = cap.free_slots
        return lambda i: sign * free_slots[i]
    if key.name in cap.free_res:
        column = cap.free_res[key.name]
        return lambda i: sign * column[i]
    name = key.name
    # (the capacity's host list as it is when called: virtual hosts may be added later)
    return lambda i: sign * _static(cap.hosts[i], name)


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
        return {key.best([i for i, u in zip(room.cands, room.usable, strict=True) if u >= n]): n}
    if room.total < n:
        return None
    usable = dict(zip(room.cands, room.usable, strict=True))
    ranked = key.ranked([i for i, u in usable.items() if u > 0])
    if ptile is not None:
        return _place_ptile(ranked, usable, n, ptile)
    return spread(ranked, usable.__getitem__, n)


def _place_ptile(
    ranked: list[int], usable: dict[int, int], n: int, ptile: int
) -> dict[int, int] | None:
    """Exactly `ptile` slots on each of the first hosts that have room for them, in
    preference order; the remainder on the next preferred host with room for it."""
    chunks, remainder = divmod(n, ptile)
    placement: dict[int, int] = {}
    for index in ranked:
        if len(placement) == chunks:
            break
        if usable[index] >= ptile:
            placement[index] = ptile
    if len(placement) < chunks:
        return None
    if remainder:
        spare = next(
            (i for i in ranked if usable[i] >= remainder and i not in placement), None
        )
        if spare is None:
            return None
        placement[spare] = remainder
    return placement


def shortfall(
    cap: Capacity, room: Room, n: int, span_hosts: int | None = None,
    ptile: int | None = None, key: HostOrder | None = None,
) -> tuple[str, str]:
    """Why `n` slots (under this span and host preference: `key`, needed only for a
    job with GPUs) did not fit in `room`: (check, pend reason). Free slots first, then
    per-slot consumables and the span as if the job asked for no GPUs, then its GPUs:
    it fits but for them."""
    if room.free < n:
        return "slots", f"Not enough job slots: {n} needed, {room.free} free on eligible hosts"
    per_slot, gpus = room.use
    if gpus:
        assert key is not None
        bare = Room(cap, room.cands, (per_slot, 0))  # the room but for the GPUs
        if place(bare, n, span_hosts, ptile, key) is not None:
            column = cap.free_res[NGPUS]
            most = max([column[i] for i in room.cands], default=0.0)
            return (
                "gpus",
                f"Not enough GPUs: {gpus} per host needed, {max(most, 0.0):g} free on "
                "eligible hosts",
            )
        room = bare
    if per_slot and room.total < n:
        res, amount = per_slot[0]
        if len(per_slot) > 1:  # name the consumable that leaves the least room
            res, amount = min(
                per_slot,
                key=lambda item: sum(cap.usable(i, ((item,), 0)) for i in room.cands),
            )
        return (
            "consumable",
            f"Not enough {res}: {n} slots x {amount:g} needed, room for {room.total} slots "
            "on eligible hosts",
        )
    return "span", "Not enough hosts to meet the span requirement"
