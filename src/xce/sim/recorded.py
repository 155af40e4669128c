"""A recording as a workload: the jobs a live controller (or the simulator) was
given, with the run times (and own run limits) they had there, for
`xce sim run --workload run.jsonl`.

Submit times become relative to the first submission; a job's run time is from its
last start to its end. Jobs that never finished in the recording (still pending or
running when it ends, or killed) are skipped and counted by reason.
"""

from __future__ import annotations

import os
from pathlib import Path

from xce.model.events import JobFinished, JobKilled, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.model.recording import RecordingError, read_recording
from xce.sim.workload import Workload, WorkloadError, WorkloadJob

SUFFIXES = (".jsonl", ".jsonl.gz")


def read_recorded_jobs(path: str | os.PathLike[str]) -> Workload:
    specs: dict[int, JobSpec] = {}
    started: dict[int, float] = {}
    runs: dict[int, float] = {}
    skipped: dict[str, int] = {}
    try:
        for _line, _t, item in read_recording(path):
            match item:
                case JobSubmitted(job=spec):
                    specs.setdefault(spec.id, spec)
                case JobStarted(job=job, time=time):
                    started[job] = time
                case JobFinished(job=job, time=time) if job in started:
                    runs[job] = max(time - started[job], 1e-3)
                case JobKilled(job=job):
                    skipped["killed"] = skipped.get("killed", 0) + 1
                    specs.pop(job, None)
                case _:
                    pass
    except RecordingError as err:
        raise WorkloadError(str(path), 0, str(err)) from err
    unfinished = [j for j in specs if j not in runs]
    if unfinished:
        skipped["not finished in the recording"] = len(unfinished)
    origin = min((specs[j].submit for j in runs if j in specs), default=0.0)
    jobs = sorted(
        (
            WorkloadJob(
                id=spec.id, submit=spec.submit - origin, run=runs[spec.id], procs=spec.n,
                user=spec.user, queue=spec.queue, run_limit=spec.run_limit, res=spec.res,
                gpus=spec.gpus,
            )
            for spec in specs.values()
            if spec.id in runs
        ),
        key=lambda j: (j.submit, j.id),
    )
    name = Path(path).name
    for suffix in SUFFIXES:
        name = name.removesuffix(suffix)
    return Workload(name, jobs, sum(skipped.values()), skipped)
