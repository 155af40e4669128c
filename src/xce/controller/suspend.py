"""Running jobs stopped by `xce stop` (LSF's USUSP), rebuilt from `JobSuspended` facts.

A stopped job keeps its slots (the scheduler never hears of it: to the scheduler it
runs); its agent holds it stopped (SIGSTOP to its process group) while the heartbeat
reply lists it (`HeartbeatReply.suspended`). Its run limit keeps counting while it is
stopped (wall-clock time since its start, as the agent and the controller's limit
watch count it, and as the scheduler's plan expects its end).
"""

from __future__ import annotations

from xce.model.events import Event, JobFinished, JobKilled, JobRequeued, JobSuspended

USUSP = "USUSP"  # the state a stopped running job shows (JobInfo.state)


class SuspendBook:
    """Job -> the fact that stopped it, for the running jobs that are stopped."""

    # The facts `apply` follows (the kernel hands it no other: controller/kernel.py)
    FOLLOWS: tuple[type[Event], ...] = (JobSuspended, JobFinished, JobKilled, JobRequeued)

    def __init__(self) -> None:
        self.stopped: dict[int, JobSuspended] = {}

    def apply(self, event: Event) -> None:
        """Follow one fact (others are ignored): a stop, a resume, or the end or
        requeue of a job (a requeued job starts again running, not stopped)."""
        match event:
            case JobSuspended(job=job, suspended=True):
                self.stopped[job] = event
            case JobSuspended(job=job) | JobFinished(job=job) | JobKilled(job=job):
                self.stopped.pop(job, None)
            case JobRequeued(job=job):
                self.stopped.pop(job, None)
            case _:
                pass

    def on_host(self, jobs: dict[int, int]) -> list[int]:
        """Of a host's jobs (job -> slots), those stopped, in id order."""
        return sorted(job for job in jobs if job in self.stopped)

    def snapshot(self) -> list[JobSuspended]:
        return list(self.stopped.values())

    def restore(self, facts: list[JobSuspended]) -> None:
        self.stopped = {fact.job: fact for fact in facts}
