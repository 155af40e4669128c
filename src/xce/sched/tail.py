"""`Tail`: a view of the end of a list, not a copy. Here, in a compiled module, and
not beside the session result's types: made for each pend group of each session, its
construction costs an interpreted frame there (bench_demand.py: a tenth of a session
where nothing is provisionable)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

T_co = TypeVar("T_co", covariant=True)


class Tail(Sequence[T_co]):
    """`items[start:stop]` of a list that is not changed before `stop` (a bucket's
    jobs in scheduling order), not copied: a session's pend groups hold their jobs
    so (sched/failure.py `Settled.pending`), and in a simulation most are never
    read, while a copy of thousands of jobs every session was a tenth of a big
    machine's run (RICC-2010-2, bench/RESULTS.md)."""

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[T_co], start: int, stop: int) -> None:
        self._items, self._start, self._stop = items, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, at: int) -> T_co: ...

    @overload
    def __getitem__(self, at: slice) -> list[T_co]: ...

    def __getitem__(self, at: int | slice) -> T_co | list[T_co]:
        if isinstance(at, slice):
            return self._items[self._start : self._stop][at]
        return self._items[range(self._start, self._stop)[at]]  # (one item: no copy)

    def __iter__(self) -> Iterator[T_co]:
        return iter(self._items[self._start : self._stop])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tail | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (a sequence compared by its items)
