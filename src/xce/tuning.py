"""Process tuning for the drivers that hold a scheduler state (simulator, controller,
benchmarks). Not part of the pure core.

A large scheduler state is hundreds of thousands of long-lived objects. CPython's
full (generation 2) collections rescan all of them and, triggered by a session's
short-lived allocations, can cost more than the session itself. Drivers freeze what
exists after loading (moved to a permanent generation, never rescanned) and collect
the young generation less often.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def settle_heap(collect: bool = True) -> None:
    """Collect once, then freeze every object that exists now (call after loading
    the state, and again after large batches of events). `collect=False` freezes
    without collecting, for a batch that ran with the collector paused and leaves
    next to no garbage: a recovery (bench_controller.py: after 1,000,000 facts a full
    collection took 1.3 s, 13 % of the recovery, to find 43 unreachable objects
    among 1.4 million; those few stay, frozen). Call it before the collector runs
    again: enabled, its first collection would be a full one."""
    if collect:
        gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def release_heap() -> None:
    """Undo `settle_heap`'s freeze once a run is over, so that a process making many
    runs one after the other (a sweep's worker) collects each finished run's objects
    instead of keeping them frozen for ever."""
    gc.unfreeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector while a batch builds many long-lived objects and
    next to no reference cycles (a simulation run, a recovery replaying the log):
    collections would only rescan them."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
