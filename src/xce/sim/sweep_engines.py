"""Where a sweep's cells run: a pool of processes on the local cores (`local`), or Ray
tasks (`ray`, `xce.sim.sweep_ray`). Either way each workload is read once by the
sweep and shipped once to each worker (the pool's initializer; Ray's object store),
each cell runs `xce.sim.sweep_cells.run_cell`, and its outcome comes back to the
sweep, which keeps it (`xce.sim.sweep_store`) as soon as it arrives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from xce.sim.sweep_cells import CellOutcome, run_cell
from xce.sim.sweep_grid import Cell
from xce.sim.workload import Workload

Report = Callable[[CellOutcome], None]

_installed: dict[str, Workload] = {}  # a pool worker's workloads, by name


def local_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _install(workloads: Mapping[str, Workload]) -> None:
    _installed.update(workloads)


def _run_installed(cell: Cell, record: str | None) -> CellOutcome:
    return run_cell(cell, _installed[cell.workload], record)


def run_local(cells: Sequence[Cell], workloads: Mapping[str, Workload],
              records: Mapping[int, str], jobs: int, report: Report) -> None:
    """Run `cells` on a pool of `jobs` processes, reporting each outcome as it comes
    (a worker that dies fails the cells it had not finished, not the sweep)."""
    with ProcessPoolExecutor(max_workers=jobs, initializer=_install,
                             initargs=(dict(workloads),)) as pool:
        futures: dict[Future[CellOutcome], Cell] = {
            pool.submit(_run_installed, cell, records.get(cell.n)): cell for cell in cells
        }
        try:
            for future in as_completed(futures):
                try:
                    outcome = future.result()
                except BrokenProcessPool as err:
                    outcome = CellOutcome(futures[future].n, None,
                                          f"a worker process died (killed, or out of "
                                          f"memory): {err}", 0.0)
                report(outcome)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
