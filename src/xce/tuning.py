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


def settle_heap() -> None:
    """Collect once, then freeze every object that exists now (call after loading
    the state, and again after large batches of events)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
