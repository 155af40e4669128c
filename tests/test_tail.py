"""`sched/tail.py` `Tail`: pend groups hold the rest of a bucket's scheduling order
without copying it (sched/failure.py `Settled.pending`); read, it is that slice."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xce.sched.tail import Tail


def test_a_tail_reads_as_its_slice() -> None:
    jobs = ["a", "b", "c", "d", "e"]
    tail = Tail(jobs, 1, 4)
    assert len(tail) == 3
    assert list(tail) == ["b", "c", "d"]
    assert (tail[0], tail[-1], tail[1:]) == ("b", "d", ["c", "d"])
    assert tail == ["b", "c", "d"] and tail != ["b", "c"]
    jobs.append("f")  # (a job queued after the session: not in its groups)
    assert list(tail) == ["b", "c", "d"]


@given(st.lists(st.integers(), max_size=8), st.data())
def test_any_tail_is_its_slice(items: list[int], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(items)))
    stop = data.draw(st.integers(start, len(items)))
    tail, copied = Tail(items, start, stop), items[start:stop]
    assert len(tail) == len(copied) and list(tail) == copied and tail == copied
    for at in range(-len(copied), len(copied)):
        assert tail[at] == copied[at]
