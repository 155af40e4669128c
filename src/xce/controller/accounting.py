"""Job accounting in the live controller (LSF's lsb.acct and bacct).

Every fact that ends a job (finished, exited, killed) brings its accounting record
(`JobAccounted`) into the same commit (FactKernel.emit): who, where, when, how it ended,
why it failed on its host and the CPU time it used, as its agent reported them. The
store keeps the records in a table of their own (store.py), which `GET /acct` reads
over a window of end times and sums up per user and queue (`summary`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from xce.controller.view import JobRecord
from xce.model.api import MAX_FAILURE, AcctRow, AcctSummary
from xce.model.events import Event, JobAccounted, JobFinished, JobKilled


class Usage(NamedTuple):
    """What a job's agent reported of its end beyond its exit status."""

    failure: str
    cpu_time: float


def failure_text(reported: str) -> str:
    """An agent's failure reason as the controller keeps it: one line of printable
    text, at most MAX_FAILURE characters."""
    line = " ".join("".join(c if c.isprintable() else " " for c in reported).split())
    return line[:MAX_FAILURE]


def ended_job(event: Event) -> int | None:
    """The job a fact ends (finished, exited or killed), else None."""
    match event:
        case JobFinished(job=job) | JobKilled(job=job):
            return job
    return None


def accounted(job: JobRecord, time: float, usage: Usage | None) -> JobAccounted:
    """The accounting record of `job`, which just ended (its record says how)."""
    spec = job.spec
    return JobAccounted(
        job=spec.id, user=spec.user, queue=spec.queue, state=job.state,
        submit=spec.submit, end=job.end_time if job.end_time is not None else time,
        start=job.start_time, n=spec.n, hosts=dict(job.hosts), exit_code=job.exit_code,
        signal=job.signal, reason=job.exit_reason,
        failure=usage.failure if usage is not None else "",
        cpu_time=max(0.0, usage.cpu_time) if usage is not None else None, time=time,
    )


class _Sums:
    """The running sums of one row."""

    def __init__(self) -> None:
        self.done = self.exited = self.started = 0
        self.cpu = self.wall = self.wait = self.turnaround = 0.0
        self.wait_max: float | None = None
        self.turnaround_max = 0.0

    def add(self, record: JobAccounted) -> None:
        if record.state == "DONE":
            self.done += 1
        else:
            self.exited += 1
        self.cpu += record.cpu_time or 0.0
        turnaround = max(0.0, record.end - record.submit)
        self.turnaround += turnaround
        self.turnaround_max = max(self.turnaround_max, turnaround)
        if record.start is not None:
            self.started += 1
            self.wall += max(0.0, record.end - record.start)
            wait = max(0.0, record.start - record.submit)
            self.wait += wait
            self.wait_max = wait if self.wait_max is None else max(self.wait_max, wait)

    def row(self, user: str, queue: str) -> AcctRow:
        jobs = self.done + self.exited
        return AcctRow(
            user, queue, self.done, self.exited, self.cpu, self.wall,
            self.wait / self.started if self.started else None, self.wait_max,
            self.turnaround / jobs if jobs else 0.0, self.turnaround_max,
        )


def summary(records: Iterable[JobAccounted], since: float | None, until: float | None,
            queue: str | None = None) -> AcctSummary:
    """The records (of jobs that ended in the window) summed per user and queue, in
    that order, and in all; only `queue`'s when given."""
    rows: dict[tuple[str, str], _Sums] = {}
    total = _Sums()
    for record in records:
        if queue is not None and record.queue != queue:
            continue
        rows.setdefault((record.user, record.queue), _Sums()).add(record)
        total.add(record)
    return AcctSummary(since, until, [rows[key].row(*key) for key in sorted(rows)],
                       total.row("", ""))
