"""One simulation run as `xce sim run` makes it: the workload read and cut, the
requirements checked, the simulator built, the heap settled, the run.

`xce sim run`, `xce sim repl` and each cell of a sweep (`xce.sim.sweep_cells`) go
through these functions, so that a sweep's cell gives the summary `xce sim run`
gives on the same inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from xce.model.cluster import ClusterConfig
from xce.model.recording import Recorder
from xce.resreq import ResReqError, parse, validate
from xce.sim.driver import Simulator
from xce.sim.workload import Workload, load_workload, transform
from xce.tuning import settle_heap

if TYPE_CHECKING:
    from xce.sim.provider_kinds import ProviderKinds


def read_workload(path: str | os.PathLike[str], start: float | None = None,
                  end: float | None = None, first: int | None = None,
                  load: float = 1.0) -> Workload:
    """The workload file's jobs in the window `--start`, `--end`, `--first`, `--load`
    select (WorkloadError or ConfigError when it cannot be read)."""
    return transform(load_workload(path), start=start, end=end, first=first, load=load)


def requirement_problem(config: ClusterConfig, workload: Workload, path: str) -> str | None:
    """The first workload requirement string naming a resource the cluster lacks (its
    syntax was checked when it was read): `WORKLOAD: job 4: requirement error at
    column 8: unknown resource 'foo'`; None when there is none."""
    seen: set[str] = set()
    for job in workload.jobs:
        if job.res and job.res not in seen:
            seen.add(job.res)
            try:
                validate(parse(job.res), config.resources)
            except ResReqError as err:
                return f"{path}: job {job.id}: {err}"
    return None


def new_simulator(config: ClusterConfig, workload: Workload, kinds: ProviderKinds | None,
                  seed: int | None, recorder: Recorder | None = None,
                  reasons: bool = True, series: bool = True) -> Simulator:
    """The simulator of `config` (with `kinds`: its templates' real provider models)."""
    if kinds is None:
        return Simulator(config, workload, seed=seed, recorder=recorder, reasons=reasons,
                         series=series)
    return Simulator(kinds.cluster, workload, seed=seed, recorder=recorder,
                     host_providers=kinds.host_providers(), reasons=reasons, series=series)


def simulate(config: ClusterConfig, workload: Workload, *, seed: int | None = None,
             kinds: ProviderKinds | None = None, recorder: Recorder | None = None,
             progress: Callable[[float], None] | None = None,
             series: bool = False) -> Simulator:
    """Run the whole workload (no pend reasons kept unless recording; the time
    series only with `series`, for a report) and close the recording; the simulator's
    `summary()` is then the run's summary."""
    simulator = new_simulator(config, workload, kinds, seed, recorder, reasons=False,
                              series=series)
    settle_heap()
    simulator.run(progress=progress)
    if recorder is not None:
        recorder.close()
    return simulator
