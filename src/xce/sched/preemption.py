"""The preemption pass (LSF's PREEMPTION=PREEMPTIVE[...]): after the real pass, each
job of a preempting queue that pends on resources may take the slots of running jobs
of the queues it preempts (docs/scheduling.md, "Preemption").

Victims are the running jobs of those queues (preemptable, not being preempted
already, not preempted within their queue's `preempt_delay`) that hold slots on the
job's eligible open hosts, lowest priority first (queue priority, then job priority),
then the most recently started. They are added one by one until the job fits, then
any whose slots turn out not to be needed is left running: never more victims than
needed. What the job takes is booked for the rest of the session. A job whose victims
are still stopping (requeue, kill) waits for them and preempts nothing more.
"""

from __future__ import annotations

from typing import Final

from xce.model.result import Preemption, TraceEntry
from xce.sched.buckets import Bucket, PendingJob
from xce.sched.capacity import Capacity
from xce.sched.eligibility import Eligible
from xce.sched.failure import Failure, Settled
from xce.sched.hosts import CLOSED_STATE, OPEN_STATE
from xce.sched.preempted import REQUEUE
from xce.sched.realpass import Evaluator, Placement
from xce.sched.reasons import RESOURCE
from xce.sched.running import RunningJob
from xce.sched.state import SchedulerState
from xce.sched.usage import host_use
from xce.sched.virtual import template_verdict

PREEMPTING = "preempting"  # the kind of a job's failure once preemption serves it
# The failures victims' slots can end (not a closed host, a select nothing matches,
# shared tokens, a reservation the job would delay, -x)
CAPACITY: Final = frozenset({"slots", "consumable", "gpus", "span"})
# Where a suspended job resumes: a drained (closed) host keeps the jobs on it, a
# suspended one too (no new job starts there; resuming one is no start), and is
# given back only once they have ended
RESUMES_ON: Final = frozenset({OPEN_STATE, CLOSED_STATE})
# What a victim frees on one host: (host index, slots, consumables by column)
Freed = list[tuple[int, int, tuple[float, ...]]]


class PreemptionPass:
    """Finds victims for the jobs the real pass settled; keeps what it decided."""

    def __init__(
        self, state: SchedulerState, cap: Capacity, evaluator: Evaluator,
        trace: list[TraceEntry] | None, now: float,
    ) -> None:
        self.state, self.cap, self.evaluator, self.trace, self.now = (
            state, cap, evaluator, trace, now
        )
        self.preemptions: list[Preemption] = []
        self._taken: set[int] = set()  # victims chosen this session
        self._victims: list[RunningJob] | None = None  # candidates, first victim first

    def run(self, settled: list[Settled]) -> list[Settled]:
        """`settled` with the jobs preemption serves in groups of their own (kind
        PREEMPTING: the catalog pass and demand leave them out)."""
        found: list[Settled] = []
        for group in settled:
            bucket = group.bucket
            if (
                not bucket.queue.preempt or group.failure.kind != RESOURCE
                or group.failure.check not in CAPACITY or bucket.exclusive
                or not isinstance(bucket.eligible, Eligible) or self._buys(bucket)
            ):
                found.append(group)
                continue
            rest: list[PendingJob] = []
            hopeless = False  # (no victims for one job: none for its twins either)
            for job in group.members:
                served = None if hopeless else self._serve(bucket, job)
                if served is None:
                    hopeless = True
                    rest.append(job)
                else:
                    found.append(Settled(bucket, [job], served, self._traced(job, served)))
            if rest:
                found.append(
                    group if len(rest) == len(group.members)
                    else Settled(bucket, rest, group.failure, group.trace)
                )
        return found

    def _buys(self, bucket: Bucket) -> bool:
        """Whether the job waits for supply instead (`preempt_before_burst: false`, the
        default): a template could host it, with room for a host of it."""
        state = self.state
        if state.config.preempt_before_burst or not state.ranked:
            return False
        for template in state.ranked:
            virtual = state.virtual.get(template.name)
            if virtual is None or not (
                state.new_hosts_allowed(template) or state.in_flight.get(template.name, 0)
            ):
                continue
            if template_verdict(state, bucket, template, virtual[0])[0] is None:
                return True
        return False

    def _serve(self, bucket: Bucket, job: PendingJob) -> Failure | None:
        """Why `job` waits when preemption serves it (None: it cannot)."""
        waited = self.state.preemptions.waited_for(job.id)
        if waited:
            return Failure(PREEMPTING, "preempt",
                           f"Waiting for preempted job(s) {_ids(waited)} to stop")
        self.evaluator.for_job(job.id)
        chosen = self._choose(bucket)
        if chosen is None:
            return None
        victims, placement = chosen
        action = bucket.queue.preempt_action
        for victim, _freed in victims:
            self._taken.add(victim.spec.id)
            self.preemptions.append(Preemption(victim.spec.id, job.id, action))
        self._book(bucket, job, victims, placement)
        ids = [victim.spec.id for victim, _freed in victims]
        return Failure(PREEMPTING, "preempt", f"Preempting job(s) {_ids(ids)} ({action})")

    def _choose(
        self, bucket: Bucket
    ) -> tuple[list[tuple[RunningJob, Freed]], Placement] | None:
        """The fewest victims, in order, that let the bucket's next job fit, and where
        it would go; None when even all of them would not do."""
        cap, evaluator = self.cap, self.evaluator
        elig = bucket.eligible
        assert isinstance(elig, Eligible)
        # Slots the job could have at most: free ones and all its candidates'. It is
        # placed (evaluated) only once they add up to its slots: most tries end here.
        have = sum([cap.free_slots[i] for i in elig.open if cap.free_slots[i] > 0])
        offered = [(v, f) for v in self._candidates(bucket) if (f := self._freed(v, bucket))]
        if have + sum(slots for _v, f in offered for _i, slots, _r in f) < bucket.n:
            return None
        chosen: list[tuple[RunningJob, Freed]] = []
        outcome: Placement | Failure | None = None
        for victim, freed in offered:
            cap.hold_back(freed, +1)
            chosen.append((victim, freed))
            have += sum(slots for _i, slots, _r in freed)
            if have < bucket.n:
                continue
            outcome = evaluator.evaluate(bucket)
            if not isinstance(outcome, Failure):
                break
        if outcome is None or isinstance(outcome, Failure):
            for _victim, freed in chosen:
                cap.hold_back(freed, -1)
            return None
        for at in range(len(chosen) - 2, -1, -1):  # (the last one made it fit)
            freed = chosen[at][1]
            cap.hold_back(freed, -1)
            without = evaluator.evaluate(bucket)
            if isinstance(without, Failure):
                cap.hold_back(freed, +1)
            else:
                del chosen[at]
                outcome = without
        for _victim, freed in chosen:
            cap.hold_back(freed, -1)
        return chosen, outcome

    def _book(
        self, bucket: Bucket, job: PendingJob, victims: list[tuple[RunningJob, Freed]],
        placement: Placement,
    ) -> None:
        """Keep what the job takes beyond its victims' slots (free now) from the jobs
        after it in this session."""
        freed: dict[int, int] = {}
        for _victim, items in victims:
            for index, slots, _res in items:
                freed[index] = freed.get(index, 0) + slots
        beyond = {
            index: slots - freed.get(index, 0)
            for index, slots in placement[0].items()
            if slots > freed.get(index, 0)
        }
        self.cap.take(beyond, bucket.use, placement[1], job.limit_refs)

    def _candidates(self, bucket: Bucket) -> list[RunningJob]:
        state, now = self.state, self.now
        if self._victims is None:
            targets = {t for q in state.queues.values() for t in q.preempt}
            self._victims = sorted(
                (
                    run for run in state.running.values()
                    if run.spec.queue in targets and state.queues[run.spec.queue].preemptable
                ),
                key=lambda r: (
                    state.queues[r.spec.queue].priority, r.spec.priority, -r.start, -r.spec.id
                ),
            )
        book, preempts = state.preemptions, bucket.queue.preempt
        return [
            run for run in self._victims
            if run.spec.queue in preempts and run.spec.id not in self._taken
            and not book.busy(run.spec.id)
            and now - book.last.get(run.spec.id, -1e300)
            >= state.queues[run.spec.queue].preempt_delay
        ]

    def _freed(self, victim: RunningJob, bucket: Bucket) -> Freed:
        """What `victim` would free on the bucket's eligible open hosts."""
        elig = bucket.eligible
        assert isinstance(elig, Eligible)
        columns = list(self.cap.free_res)
        hosts = self.state.hosts
        freed: Freed = []
        for index, slots in victim.held.items():
            host = hosts[index]
            if index not in elig.open or host is None or host.state != OPEN_STATE:
                continue
            used = dict(host_use(victim.use, victim.hosts.get(index, 0)))
            freed.append((index, slots, tuple(used.get(c, 0.0) for c in columns)))
        return freed

    def _traced(self, job: PendingJob, failure: Failure) -> int:
        trace = self.trace
        if trace is None:
            return -1
        trace.append(TraceEntry(job.id, "preempt", failure.check, failure.reason))
        return len(trace) - 1


def _ids(jobs: list[int]) -> str:
    return " ".join(str(job) for job in jobs)


def requeued_victims(
    state: SchedulerState, evaluator: Evaluator, preemptions: list[Preemption]
) -> list[Settled]:
    """The victims being requeued (chosen this session or before and not stopped yet),
    each settled alone as pending on the slots it gives up: the catalog pass then
    finds their own demand in this session, not in the one after their requeue (and
    the demand does not come and go while they stop). They are running still: no pend
    group is made of them (session.py)."""
    victims = state.preemptions.requeuing()
    victims.extend((p.job, p.by) for p in preemptions if p.action == REQUEUE)
    found: list[Settled] = []
    for victim, by in victims:
        run = state.running[victim]
        bucket = state.bucket_of(run.spec)
        evaluator.candidates(bucket)  # (its eligible hosts: the plan reads them)
        job = PendingJob(run.spec, run.key, bucket, run.limit_refs)
        failure = Failure(RESOURCE, "slots", f"Preempted by job {by} (requeue)")
        found.append(Settled(bucket, [job], failure, -1))
    return found


def resumable(state: SchedulerState, cap: Capacity) -> list[int]:
    """The jobs suspended by a preemption whose preemptor has ended (finished or
    killed), or still pends while a host the job is on was drained (closed: the
    preemptor could never start on the slots it was given, and both would wait for
    ever), and whose hosts have their slots free now, in id order; their slots are
    booked in `cap` before any pending job is considered."""
    found: list[int] = []
    hosts = state.hosts
    for victim, (by, _since) in sorted(state.preemptions.suspended.items()):
        run = state.running[victim]
        if by in state.running:
            continue  # its preemptor runs
        if (by in state.pending or by in state.held or by in state.waiting) and all(
            (host := hosts[index]) is not None and host.state == OPEN_STATE
            for index in run.held
        ):
            continue  # its preemptor pends, and may still start on its slots
        if all(
            (host := hosts[index]) is not None and host.state in RESUMES_ON
            and cap.usable(index, run.use) >= slots
            for index, slots in run.held.items()
        ):
            cap.take(run.held, run.use, {}, run.limit_refs)
            found.append(victim)
    return found
