"""One cell of a sweep, run in a worker (a process of the local pool or a Ray task):
the simulation `xce sim run` makes (`xce.sim.single_run.simulate`) on the cell's
cluster, workload and seed, its summary or its error returned to the sweep.

Summaries of the same inputs are equal but for their timing fields (`TIMING_FIELDS`:
the wall-clock time the run took), which no two runs share.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from xce.model.recording import Recorder
from xce.sim.single_run import simulate
from xce.sim.sweep_grid import Cell
from xce.sim.workload import Workload
from xce.tuning import release_heap

TIMING_FIELDS: Final = frozenset({"wall_seconds"})


class CellOutcome(msgspec.Struct, frozen=True):
    """What a cell gave: its summary, or the error (a traceback) it failed with."""

    n: int
    summary: dict[str, Any] | None
    error: str | None
    seconds: float  # the cell's wall-clock time in its worker


def without_timing(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary without its timing fields: what equal runs agree on."""
    return {key: value for key, value in summary.items() if key not in TIMING_FIELDS}


def run_cell(cell: Cell, workload: Workload, record: str | None = None) -> CellOutcome:
    """Simulate the cell (recording to `record` when given: written to a temporary
    file, renamed when the run is over). Any exception is the cell's error."""
    started = time.perf_counter()
    try:
        temporary = None if record is None else _temporary(record)
        recorder = None if temporary is None else Recorder(temporary)
        simulator = simulate(cell.config, workload, seed=cell.seed, recorder=recorder)
        summary = simulator.summary()
        if record is not None and temporary is not None:
            os.replace(temporary, record)
    except Exception:
        return CellOutcome(cell.n, None, traceback.format_exc(), time.perf_counter() - started)
    finally:
        release_heap()
    return CellOutcome(cell.n, summary, None, time.perf_counter() - started)


def _temporary(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, f".tmp.{name}")  # same suffix: a .gz recording is gzipped
