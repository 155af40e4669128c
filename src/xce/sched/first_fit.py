"""First-fit packing of a job on a template's virtual hosts in the catalog pass: on
the hosts opened so far, then on hosts opened for it (in flight first, then new)."""

from __future__ import annotations

from collections.abc import Callable

from xce.sched.buckets import Bucket
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.usage import Use
from xce.sched.virtual import TemplateSupply


class FirstFit:
    """The first-fit packing of one catalog pass, on the session's capacity."""

    def __init__(self, cap: Capacity, now: float) -> None:
        self.cap = cap
        self.now = now
        # First-fit state is shared by buckets of one shape (slots, per-slot
        # consumables, GPUs, span): whether a host can take such a job does not
        # depend on the queue, user or select.
        self._cursor: dict[
            tuple[tuple[tuple[str, float], ...], int, int, int, bool], int
        ] = {}
        self._usable_fns: dict[tuple[Use, bool], Callable[[int], int]] = {}

    def place(
        self, bucket: Bucket, supply: TemplateSupply, need: int, pieces: tuple[int, ...]
    ) -> tuple[dict[int, int], list[int], int]:
        """`need` slots of a job of `bucket` (in `pieces`, each on its own host, if it
        has a span) first-fit on the template's hosts opened so far: (host -> slots,
        pieces none of them can take, slots left over)."""
        hosts_list = supply.hosts
        limit = len(hosts_list)
        chosen: dict[int, int] = {}
        if not limit:
            return chosen, list(pieces), need
        unplaced: list[int] = []
        left = 0
        usable = self._usable_fn(bucket)
        # First-fit fills hosts in order: hosts before the template's frontier are
        # full; hosts before this shape's cursor cannot take its smallest piece.
        free_slots = self.cap.free_slots
        frontier = supply.frontier
        while frontier < limit and free_slots[hosts_list[frontier]] <= 0:
            frontier += 1
        supply.frontier = frontier
        # Whether a host can take `smallest` slots depends only on the per-slot
        # consumables and GPUs: every shape with the same ones shares the cursor.
        smallest = bucket.smallest
        cursor_key = (bucket.per_slot, bucket.gpus, smallest, supply.index, bucket.exclusive)
        cursor = self._cursor.get(cursor_key, 0)
        if cursor < frontier:
            cursor = frontier
        while cursor < limit and usable(hosts_list[cursor]) < smallest:
            cursor += 1
        self._cursor[cursor_key] = cursor
        if pieces:
            for piece in pieces:
                for position in range(cursor, limit):
                    index = hosts_list[position]
                    if index not in chosen and usable(index) >= piece:
                        chosen[index] = piece
                        break
                else:
                    unplaced.append(piece)
                    left += piece
            return chosen, unplaced, left
        left = need
        for position in range(cursor, limit):
            index = hosts_list[position]
            take = usable(index)
            if take > 0:
                if take >= left:
                    chosen[index] = left
                    return chosen, unplaced, 0
                chosen[index] = take
                left -= take
        return chosen, unplaced, left

    def open_hosts(
        self, supply: TemplateSupply, sizes: list[int], bucket: Bucket
    ) -> tuple[bool, int, float]:
        """Open one host per entry of `sizes` with that many of the job's slots on it:
        in-flight hosts first, then new ones. Returns whether new hosts were opened,
        the slots on them all and when the last of them is expected."""
        count = len(sizes)
        expected = min(count, supply.in_flight)
        first = self.cap.add_hosts(
            supply.empty, supply.resources, sizes, bucket.use, bucket.exclusive
        )
        supply.free_total += count * supply.template.slots
        hosts_list, arrival = supply.hosts, supply.arrival
        arrivals = supply.arrivals
        taken = supply.in_flight_total - supply.in_flight  # in-flight hosts opened before
        new_at = self.now + supply.lead
        latest = 0.0
        # (loops: compiled, extending by a range is a generic call; bench_demand.py)
        for offset in range(count):
            index = first + offset
            hosts_list.append(index)
            if offset < expected:
                supply.expected.add(index)
                at = arrivals[taken + offset]
            else:
                at = new_at
            arrival[index] = at
            if at > latest:
                latest = at
        supply.in_flight -= expected
        supply.new += count - expected
        supply.allowance -= count - expected
        opened = 0
        for size in sizes:
            opened += size
        return count > expected, opened, latest

    def _usable_fn(self, bucket: Bucket) -> Callable[[int], int]:
        """How many slots of this bucket fit on a host now (inlined for one consumable)."""
        use = bucket.use
        found = self._usable_fns.get((use, bucket.exclusive))
        if found is not None:
            return found
        cap, (per_slot, gpus) = self.cap, use
        free_slots = cap.free_slots
        if bucket.exclusive:  # (-x) only a host with every slot free
            hosts = cap.hosts

            def found(i: int) -> int:
                host = hosts[i]
                if host is None or free_slots[i] != host.slots:
                    return 0
                return cap.usable(i, use)
        elif not per_slot and not gpus:
            found = free_slots.__getitem__
        elif len(per_slot) == 1 and not gpus:
            (res, amount), = per_slot
            column = cap.free_res[res]

            def found(i: int) -> int:
                return min(free_slots[i], int((column[i] + EPSILON) // amount))
        else:
            def found(i: int) -> int:
                return cap.usable(i, use)
        self._usable_fns[(use, bucket.exclusive)] = found
        return found
