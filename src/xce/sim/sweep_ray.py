"""The Ray engine of a sweep (`xce sim sweep --engine ray [--address ADDR]`): each cell
a Ray task, each workload put once in the object store and passed by reference to
every cell of it (Ray moves it once to each node). Without an address `ray.init()`
starts a local Ray instance of `jobs` CPUs, stopped when the sweep ends.

`ray` is an optional dependency: `pip install 'xce[ray]'`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xce.sim.sweep_cells import CellOutcome, run_cell
from xce.sim.sweep_engines import Report
from xce.sim.sweep_grid import Cell
from xce.sim.workload import Workload


class RayMissing(RuntimeError):
    """Ray is not installed."""


def run_ray(cells: Sequence[Cell], workloads: Mapping[str, Workload],
            records: Mapping[int, str], jobs: int, address: str | None,
            report: Report) -> None:
    """Run `cells` as Ray tasks on the cluster at `address` (None: a local one of
    `jobs` CPUs), reporting each outcome as it comes."""
    try:
        import ray
    except ImportError:
        raise RayMissing("--engine ray needs Ray: pip install 'xce[ray]'") from None
    ray.init(address=address, num_cpus=jobs if address is None else None,
             include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        shipped = {name: ray.put(workload) for name, workload in workloads.items()}
        # A workload's reference stands for the workload (Ray passes the value).
        task: Any = ray.remote(num_cpus=1)(run_cell)
        pending = {task.remote(cell, shipped[cell.workload], records.get(cell.n)): cell
                   for cell in cells}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(ready[0])
            try:
                outcome: CellOutcome = ray.get(ready[0])
            except Exception as err:  # the task's worker died; Ray says why
                outcome = CellOutcome(cell.n, None, f"ray: {err}", 0.0)
            report(outcome)
    finally:
        ray.shutdown()
