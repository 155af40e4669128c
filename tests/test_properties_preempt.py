"""Property tests of preemption (docs/scheduling.md, "Preemption"), on simulator runs
of drawn workloads: three queues (`urgent` preempts `low` and `batch` with a drawn
action), two hosts. Read from the run's recording (every event the scheduler got),
never from the scheduler's own counters:

* a job never runs twice at once (no start of a job already running);
* no host ever has more slots taken than it has, counting every running job but those
  suspended by a preemption (their slots were handed over);
* every job ends exactly once, and a suspended job is resumed before it ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.model.cluster import ClusterConfig, HostSpec, Queue
from xce.model.events import (
    JobFinished,
    JobKilled,
    JobPreempted,
    JobRequeued,
    JobResumed,
    JobStarted,
)
from xce.model.recording import Recorder, read_recording
from xce.sim.driver import Simulator
from xce.sim.workload import Workload, WorkloadJob

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOTS = {"h1": 3, "h2": 2}
QUEUES = ("low", "batch", "urgent")


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, list[WorkloadJob]]:
    action = draw(st.sampled_from(["requeue", "suspend", "kill"]))
    count = draw(st.integers(2, 14))
    jobs = [
        WorkloadJob(
            id=i + 1, submit=float(draw(st.integers(0, 120))), run=float(draw(st.integers(1, 90))),
            procs=draw(st.integers(1, 3)), user="u", queue=draw(st.sampled_from(QUEUES)),
        )
        for i in range(count)
    ]
    return action, sorted(jobs, key=lambda j: (j.submit, j.id))


def config_of(action: str) -> ClusterConfig:
    return ClusterConfig(
        session_interval=1,
        hosts=tuple(HostSpec(name, slots) for name, slots in SLOTS.items()),
        queues=(
            Queue("low", priority=10),
            Queue("batch", priority=20, preempt_delay=30),
            Queue("urgent", priority=70, preempt=("low", "batch"), preempt_action=action),
        ),
    )


@PROPS
@given(runs())
def test_preemption_never_doubles_a_job_nor_a_slot(tmp_path_factory, drawn) -> None:
    action, jobs = drawn
    check(Path(tmp_path_factory.mktemp("preempt")) / "run.jsonl", action, jobs)


@pytest.mark.parametrize("action", ["requeue", "suspend", "kill"])
def test_the_check_sees_preemptions(tmp_path: Path, action: str) -> None:
    """(The property is not vacuous: a workload that preempts passes it too.)"""
    jobs = [
        WorkloadJob(id=1, submit=0, run=50, procs=3, user="u", queue="low"),
        WorkloadJob(id=2, submit=0, run=50, procs=2, user="u", queue="batch"),
        WorkloadJob(id=3, submit=5, run=10, procs=4, user="u", queue="urgent"),
    ]
    assert check(tmp_path / "run.jsonl", action, jobs) == 2


def check(path: Path, action: str, jobs: list[WorkloadJob]) -> int:
    """Run the workload, check the recording; the number of preemptions."""
    recorder = Recorder(path)
    sim = Simulator(config_of(action), Workload(name="drawn", jobs=jobs), recorder=recorder)
    sim.run()
    recorder.close()
    running: dict[int, dict[str, int]] = {}
    suspended: set[int] = set()
    ended: list[int] = []
    preempted = 0
    for _line, _time, item in read_recording(path):
        match item:
            case JobStarted(job=job, hosts=hosts):
                assert job not in running, f"job {job} started while it runs"
                running[job] = dict(hosts)
            case JobPreempted(job=job, action=done):
                assert job in running and job not in suspended
                preempted += 1
                if done == "suspend":
                    suspended.add(job)
            case JobResumed(job=job):
                suspended.remove(job)
            case JobRequeued(job=job):
                assert job not in suspended
                del running[job]
            case JobFinished(job=job) | JobKilled(job=job):
                assert job not in suspended, f"job {job} ended while suspended"
                running.pop(job, None)
                ended.append(job)
            case _:
                continue
        for host, slots in SLOTS.items():
            taken = sum(
                on.get(host, 0) for job, on in running.items() if job not in suspended
            )
            assert taken <= slots, f"{host}: {taken} slots taken of {slots}"
    assert sorted(ended) == [job.id for job in sorted(jobs, key=lambda j: j.id)]
    assert not running and not suspended
    return preempted
