"""Jobs as submitted."""

from __future__ import annotations

import msgspec


class JobSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """A job as submitted: who, where, how many slots and what requirement string.
    Encoded without its default fields (`omit_defaults`): a third of the bytes of the
    fact log, recordings and snapshots, and 40 % less decoding in recovery
    (bench/bench_controller.py recovery, bench/RESULTS.md)."""

    id: int
    user: str = "nobody"
    queue: str = ""  # empty: the first configured queue
    n: int = 1
    res: str = ""
    submit: float = 0
    priority: int = 0  # user priority (`bsub -sp`, 0: none), 1..MAX_USER_PRIORITY
    name: str = ""
    hold: bool = False
    run: float | None = None  # recorded run time, used by the simulator
    # Run limit in seconds (`bsub -W`, scenario `run_limit`, SWF requested time);
    # None: the queue's `run_limit`, else no limit (ARCHITECTURE.md section 2a).
    run_limit: float | None = None
    # GPUs per host the job runs on (`bsub -gpu "num=N"`, scenario `gpus`); the
    # scheduler counts each as taken on every host of the job. The mode is for the
    # agent: "shared" | "exclusive_process"; gpu_exclusive is LSF's j_exclusive
    # (exclusive_process implies it).
    gpus: int = 0
    gpu_mode: str = "shared"
    gpu_exclusive: bool = False
    # Hosts it may run on (`bsub -m`): host names and `template:GLOB` (host groups
    # resolved at submission); empty: no restriction beyond its queue's. `exclusive`
    # (`bsub -x`): it runs only on hosts running no other job, and takes them whole.
    hosts: tuple[str, ...] = ()
    exclusive: bool = False
    # What the live controller runs (the scheduler ignores these):
    command: list[str] = []
    cwd: str = ""
    env: dict[str, str] = {}
    output: str = ""  # stdout file (%J: job id, %I: array index)
    error: str = ""  # stderr file (empty: with stdout)
    # Job arrays (`-J "name[1-1000]%10"`, docs/cli.md): an element has `array`, the
    # array's id (which no job has), its `index` (>= 1) and its own id, array + index
    # (shown as `ARRAY[INDEX]`); `array_limit`: elements of the array that may run at
    # once (0: no limit). All 0 for a job of no array.
    array: int = 0
    index: int = 0
    array_limit: int = 0
    # Dependency condition (`-w`, xce.resreq.depend): the job pends until it holds;
    # `end_orphan` (LSF's -ti): end the job once the condition can never hold.
    depend: str = ""
    end_orphan: bool = False
    # Its place among jobs of the same queue and priority (`xce top` / `bottom`, LSF's
    # btop / bbot: sched/modify.py); None: its submit time orders it.
    order: float | None = None


# The highest user priority a job may be given (`-sp`: LSF's MAX_USER_PRIORITY, as
# commonly set); 0 is no user priority.
MAX_USER_PRIORITY = 100
