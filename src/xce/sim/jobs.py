"""The simulator's jobs from arrival to end: the workload's jobs that could ever run
submitted at their submit times, started as sessions dispatch them, ended after their
recorded run time (or at their run limit when `simulation.enforce_run_limits` says
so), and ended or requeued with a host the provider takes back.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Final

import msgspec

from xce.model.api import RUN_LIMIT_REACHED
from xce.model.cluster import Queue
from xce.model.events import (
    JobFinished,
    JobKilled,
    JobPreempted,
    JobRequeued,
    JobResumed,
    JobStarted,
    JobSubmitted,
)
from xce.model.jobs import JobSpec
from xce.model.result import Dispatch, Preemption
from xce.resreq import parse
from xce.sched.errors import SubmitError
from xce.sched.loss import LOST_EXIT_CODE, lost_job
from xce.sched.reasons import ORPHAN_ENDED
from xce.sched.runlimit import run_limit
from xce.sched.suspended import jobs_on
from xce.sim.supply import Supply
from xce.sim.workload import Workload, WorkloadJob

if TYPE_CHECKING:
    from xce.sim.driver import Simulator

# A job ended at its run limit, as the live agent ends it (TERM first).
LIMIT_SIGNAL: Final = 15
# Knuth's multiplicative hash of a job id onto [0, 1): where `queue_mix` puts it
HASH_MULTIPLIER: Final = 2654435761
HASH_SPAN: Final = 1 << 32


def queue_mix(shares: dict[str, float]) -> list[tuple[str, float]]:
    """`simulation.queue_mix` as (queue, upper end of its part of [0, 1)), in the
    order written."""
    total = sum(shares.values())
    found: list[tuple[str, float]] = []
    upto = 0.0
    for queue, share in shares.items():
        upto += share / total
        found.append((queue, upto))
    return found


class JobLifecycle:
    """The jobs of one simulation run, as the scheduler is told of them."""

    def __init__(self, sim: Simulator, supply: Supply, workload: Workload) -> None:
        config = sim.config
        self.sim, self.supply = sim, supply
        self.loop, self.state, self.metrics = sim.loop, sim.state, sim.metrics
        # running job -> the number of its start among all starts: a finish scheduled
        # for an earlier run of a job since requeued is stale (numbers never repeat)
        self._run_gen: dict[int, int] = {}
        self._starts = 0
        # job -> how long it runs here: its recorded run time, or its run limit when
        # that is shorter and limits are enforced (those jobs are in `_cut`)
        self._runs: dict[int, float] = {}
        self._cut: set[int] = set()
        self._exits: dict[int, int] = {}  # job -> the nonzero exit code it ends with
        self._enforce = config.simulation.enforce_run_limits
        self._queue_of: dict[str, Queue] = {q.name: q for q in config.queues}
        self._first_queue = config.queues[0].name
        self._queues = {q.name for q in config.queues}
        # queues with users: (LSF USERS): their submissions are checked on arrival
        self._checks_users = any(q.users is not None for q in config.queues)
        # With preemption: when each running job ends here, and what a suspended job
        # has left to run
        self._preempts = any(q.preempt for q in config.queues)
        self._ends: dict[int, float] = {}
        self._left: dict[int, float] = {}
        self._mix = queue_mix(config.simulation.queue_mix)
        self._admit(workload)

    def _queue_for(self, job: WorkloadJob) -> str:
        """The queue a workload job goes to: its own if configured, else by the
        simulation's `queue_mix`, else the first queue."""
        if job.queue in self._queues:
            return job.queue
        if self._mix:
            point = (job.id * HASH_MULTIPLIER) % HASH_SPAN / HASH_SPAN
            for queue, upto in self._mix:
                if point < upto:
                    return queue
            return self._mix[-1][0]
        return self._first_queue

    def _admit(self, workload: Workload) -> None:
        """The workload's jobs that could ever run (the others are too large), as the
        stream of arrivals."""
        # Admission depends on the job's queue, slots, requirement, GPUs and host list
        # only: once per shape (sched/admission.py, as the live controller refuses a
        # submission).
        verdicts: dict[tuple[str, int, str, int, tuple[str, ...], bool], bool] = {}
        arrivals: list[WorkloadJob] = []
        memory = self._counts_memory()
        for job in workload.jobs:
            if memory and job.mem_per_proc_mb:
                job = msgspec.structs.replace(job, res=with_memory(job.res, job.mem_per_proc_mb))
            queue = self._queue_for(job)
            shape = (queue, job.procs, job.res, job.gpus, job.hosts, job.exclusive)
            fits = verdicts.get(shape)
            if fits is None:
                fits = verdicts[shape] = self._admits(*shape)
            if not fits:
                self.metrics.too_large.append(job.id)
                continue
            arrivals.append(job)
        # Arrivals are a sorted stream merged into the event loop (each as an input
        # scheduled before anything else), not hundreds of thousands of heap entries.
        # (A stable sort by time: the order the heap would pop them in.)
        now = self.loop.now
        arrivals.sort(key=lambda j: max(j.submit, now))
        self._arrivals = arrivals
        self.loop.stream([max(j.submit, now) for j in arrivals], self._arrive)

    def _counts_memory(self) -> bool:
        """Whether jobs ask for their requested memory (SWF field 10, YAML
        `mem_per_proc_mb`): when the cluster has `mem` as a per-host consumable."""
        mem = self.sim.config.resources.get(MEM)
        return mem is not None and mem.consumable and not mem.shared

    def _admits(
        self, queue: str, n: int, res: str, gpus: int, hosts: tuple[str, ...],
        exclusive: bool,
    ) -> bool:
        """Whether some configured host or template could ever run a job of this shape
        (one whose host list is refused is left to its submission: `refused`)."""
        probe = JobSpec(id=0, user="", queue=queue, n=n, res=res, gpus=gpus, hosts=hosts,
                        exclusive=exclusive)
        if hosts:
            try:
                probe = self.state.resolve(probe)
            except SubmitError:
                return True
        return self.state.refusal(probe) is None

    def _arrive(self, index: int) -> None:
        job = self._arrivals[index]
        spec = JobSpec(
            id=job.id, user=job.user or "nobody", queue=self._queue_for(job),
            n=job.procs, res=job.res, submit=job.submit, run=job.run,
            run_limit=job.run_limit, gpus=job.gpus,
        )
        if (
            job.name or job.array or job.depend or job.exit_code or job.end_orphan
            or job.hosts or job.exclusive or job.priority
        ):
            spec = msgspec.structs.replace(
                spec, name=job.name, array=job.array, index=job.index,
                array_limit=job.array_limit, depend=job.depend, end_orphan=job.end_orphan,
                hosts=job.hosts, exclusive=job.exclusive, priority=job.priority,
            )
            if job.exit_code:
                self._exits[job.id] = job.exit_code
        run = job.run
        if self._enforce:
            limit = run_limit(spec, self._queue_of[spec.queue])
            if limit is not None and run > limit:
                run = limit
                self._cut.add(job.id)
        self._runs[job.id] = run
        self._submit(spec)

    def _submit(self, spec: JobSpec) -> None:
        if spec.depend or spec.array or spec.hosts or self._checks_users:
            try:  # (checked as the live controller checks a submission)
                self.state.resolve(spec)
            except SubmitError:
                self.metrics.refused.append(spec.id)
                return
        self.sim.apply(JobSubmitted(job=spec))
        self.metrics.submitted[spec.id] = spec.submit
        self.metrics.slots[spec.id] = spec.n
        if self.metrics.queue_of is not None:
            self.metrics.queue_of[spec.id] = spec.queue or self._first_queue
        self.sim.dirty()

    def start(self, dispatch: list[Dispatch], tick: float) -> None:
        """A session's dispatches start: each job ends after its run here."""
        sim, supply = self.sim, self.supply
        started, used_hosts, run_gen = self.metrics.started, supply.used_hosts, self._run_gen
        runs, loop, finish = self._runs, self.loop, self._finish
        for d in dispatch:
            job = d.job
            sim.apply(JobStarted(job=job, hosts=d.hosts, time=tick, pools=d.pools))
            started.setdefault(job, tick)
            used_hosts.update(d.hosts)
            if supply.provisioned:
                supply.busy_start(job, d.hosts, tick)
            self._starts += 1
            run_gen[job] = self._starts
            loop.at(tick + runs[job], partial(finish, job, self._starts))
            if self._preempts:
                self._ends[job] = tick + runs[job]

    def _finish(self, job: int, generation: int) -> None:
        if self._run_gen.get(job) != generation:
            return  # requeued meanwhile
        del self._run_gen[job]
        if self._preempts:
            self._ends.pop(job, None)
        if job in self.supply.busy:
            self.supply.busy_end(job)
        now = self.loop.now
        if self._cut and job in self._cut:  # ended at its run limit
            self._cut.discard(job)
            self.metrics.jobs_killed_at_limit += 1
            self.sim.apply(JobFinished(job=job, time=now, signal=LIMIT_SIGNAL,
                                       reason=RUN_LIMIT_REACHED))
        else:
            self.sim.apply(JobFinished(job=job, time=now, exit_code=self._exits.get(job, 0)))
        self.metrics.finish(job, now)
        self.sim.freed()

    def preempt(self, preemptions: list[Preemption], tick: float) -> None:
        """A session's preemptions, carried out at once: a suspended job stops its
        clock, a requeued one starts again from the beginning when it is dispatched
        again, a killed one ends (EXIT)."""
        for found in preemptions:
            job = found.job
            self.sim.apply(JobPreempted(job=job, by=found.by, action=found.action, time=tick))
            self.metrics.preempted(found.action)
            self._run_gen.pop(job, None)  # (its scheduled end is stale)
            end = self._ends.pop(job, tick)
            if job in self.supply.busy:  # (a suspended job's slots are its preemptor's)
                self.supply.busy_end(job)
            if found.action == "suspend":
                self._left[job] = end - tick
                continue
            if found.action == "kill":
                self.sim.apply(JobKilled(job=job, time=tick))
                self.metrics.finish(job, tick)
            else:
                self.sim.apply(
                    JobRequeued(job=job, time=tick, reason=f"preempted by job {found.by}")
                )
        self.sim.freed()

    def resume(self, jobs: list[int], tick: float) -> None:
        """Jobs suspended by a preemption go on: they end after what they had left."""
        hosts = self.state.hosts
        for job in jobs:
            self.sim.apply(JobResumed(job=job, time=tick))
            placed = {  # (its hosts are there: resumable() saw them)
                host.name: slots for index, slots in self.state.running[job].hosts.items()
                if (host := hosts[index]) is not None
            }
            self.supply.busy_start(job, placed, tick)
            left = self._left.pop(job)
            self._starts += 1
            self._run_gen[job] = self._starts
            self._ends[job] = tick + left
            self.loop.at(tick + left, partial(self._finish, job, self._starts))

    def end_orphans(self, jobs: list[int], tick: float) -> None:
        """Pending jobs whose dependency condition can never be satisfied, ended as
        the session says (-ti, orphan_job_term_timeout): EXIT without running."""
        for job in jobs:
            self.sim.apply(JobFinished(job=job, time=tick, exit_code=LOST_EXIT_CODE,
                                       reason=ORPHAN_ENDED))
            self.metrics.orphans_ended += 1
        self.sim.dirty()  # (their own dependents may be orphans now)

    def lost(self, host: str) -> None:
        """The jobs on a host the provider took back, running or suspended by a
        preemption (sched/suspended.py): requeued (or exited, as their queue says)."""
        state, now = self.state, self.loop.now
        for job in jobs_on(state, state.host_by_name[host]):
            self._run_gen.pop(job, None)
            self._left.pop(job, None)
            if job in self.supply.busy:
                self.supply.busy_end(job)
            ended = lost_job(state, state.running[job].spec, now, f"host {host} reclaimed")
            self.sim.apply(ended)
            if isinstance(ended, JobFinished):  # (exited: it ended, as a killed job does)
                self.metrics.finish(job, now)


MEM: Final = "mem"  # the resource a workload's requested memory is asked for as


def with_memory(res: str, mb_per_slot: float) -> str:
    """A requirement string that also asks for `mb_per_slot` MB of `mem` per slot
    (rusage is per slot, as the trace's memory is per processor), unless it asks for
    `mem` already."""
    if res and any(name == MEM for name, _amount in parse(res).rusage):
        return res
    amount = f"{MEM}={mb_per_slot:g}"
    if "rusage[" in res:
        return res.replace("rusage[", f"rusage[{amount}:", 1)
    return f"{res} rusage[{amount}]".strip()
