"""`GET /queues`: each queue with its job counts and, for `xce queues -l` (bqueues -l),
its configuration: access, hosts as configured, run limits and the limits that count
its jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from xce.controller.view import PEND, PSUSP, RUN, JobRecord
from xce.model.api import QueueInfo
from xce.model.cluster import ClusterConfig, Limit, Queue


def queue_infos(
    config: ClusterConfig, jobs: Iterable[JobRecord], stopped: Callable[[JobRecord], bool]
) -> list[QueueInfo]:
    """Every configured queue, in configuration order: slots of its unfinished jobs,
    pending (PSUSP included), running and, of those, stopped (SUSP)."""
    counts: dict[str, list[int]] = {q.name: [0, 0, 0] for q in config.queues}
    for job in jobs:
        count = counts.get(job.spec.queue)
        if count is None or job.state not in (PEND, PSUSP, RUN):
            continue
        if job.state != RUN:
            count[0] += job.spec.n
        elif stopped(job):
            count[2] += job.spec.n
        else:
            count[1] += job.spec.n
    return [_info(q, counts[q.name], config.limits) for q in config.queues]


def _info(queue: Queue, count: list[int], limits: tuple[Limit, ...]) -> QueueInfo:
    pend, run, susp = count
    return QueueInfo(
        name=queue.name, priority=queue.priority, status="Open:Active",
        njobs=pend + run + susp, pend=pend, run=run + susp, susp=susp,
        hosts=None if queue.hosts is None else list(queue.hosts),
        users=None if queue.users is None else list(queue.users_as_written or queue.users),
        hosts_as_written=list(queue.hosts_as_written) or None,
        run_limit=queue.run_limit, max_run_limit=queue.max_run_limit,
        backfill=queue.backfill, requeue_on_host_loss=queue.requeue_on_host_loss,
        limits=[_limit(limit) for limit in limits if _counts(limit, queue.name)],
        fairshare=None if queue.fairshare is None else list(queue.fairshare),
        demand_after=queue.demand_after,
        preempt=list(queue.preempt), preempt_action=queue.preempt_action,
        preemptable=queue.preemptable, preempt_delay=queue.preempt_delay,
    )


def _counts(limit: Limit, queue: str) -> bool:
    """Whether a limit counts the jobs of `queue` (every queue, each, or named)."""
    return limit.queues is None or limit.queues == "each" or queue in limit.queues


def _limit(limit: Limit) -> dict[str, Any]:
    found: dict[str, Any] = msgspec.to_builtins(limit)
    return {key: value for key, value in found.items() if value is not None}
