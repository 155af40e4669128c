"""`xce queues -l`: one block per queue in the layout of LSF's `bqueues -l`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xce.cli.client_cmds import table
from xce.cli.runlimit import limit_text
from xce.model.api import QueueInfo
from xce.model.result import number as show_number

RULE = "-" * 78


def queues_long(queues: Sequence[QueueInfo]) -> list[str]:
    """Every queue's block, separated as bqueues -l separates them."""
    lines: list[str] = []
    for at, queue in enumerate(queues):
        if at:
            lines += ["", RULE, ""]
        lines += queue_long(queue)
    return lines


def queue_long(queue: QueueInfo) -> list[str]:
    """QUEUE, PARAMETERS/STATISTICS, the run limits, the limits that count its jobs,
    its scheduling policies, USERS and HOSTS."""
    lines = [
        f"QUEUE: {queue.name}",
        "",
        "PARAMETERS/STATISTICS",
        *table(
            ("PRIO", "STATUS", "NJOBS", "PEND", "RUN", "SUSP"),
            [[str(queue.priority), queue.status, str(queue.njobs), str(queue.pend),
              str(queue.run - queue.susp), str(queue.susp)]],
            ("PRIO", "NJOBS", "PEND", "RUN", "SUSP"),
        ),
    ]
    for title, limit in (("DEFAULT LIMITS:", queue.run_limit),
                         ("MAXIMUM LIMITS:", queue.max_run_limit)):
        if limit is not None:
            lines += ["", f" {title}", " RUNLIMIT", f" {limit_text(limit)}"]
    if queue.limits:
        lines += ["", " LIMITS (limits:):", *(f" {_limit(limit)}" for limit in queue.limits)]
    policies = (
        (["FAIRSHARE"] if queue.fairshare is not None else [])
        + (["BACKFILL"] if queue.backfill else [])
        + ([] if queue.requeue_on_host_loss else ["NO_REQUEUE_ON_HOST_LOSS"])
        + (["PREEMPTIVE"] if queue.preempt else [])
        + ([] if queue.preemptable else ["NO_PREEMPTABLE"])
    )
    hosts = queue.hosts_as_written or queue.hosts
    lines += [
        "",
        f"SCHEDULING POLICIES:  {'  '.join(policies) or '-'}",
        *([f"DEMAND_AFTER:  {limit_text(queue.demand_after)}"] if queue.demand_after else []),
        *([f"PREEMPTION:  PREEMPTIVE[{' '.join(queue.preempt)}] "
           f"(PREEMPT_ACTION: {queue.preempt_action})"] if queue.preempt else []),
        *([f"PREEMPT_DELAY:  {limit_text(queue.preempt_delay)}"] if queue.preempt_delay else []),
        *([f"USER_SHARES:  {share_list(queue.fairshare)}"] if queue.fairshare else []),
        "",
        f"USERS: {' '.join(queue.users) if queue.users is not None else 'all'}",
        f"HOSTS:  {' '.join(hosts) if hosts is not None else 'all'}",
    ]
    return lines


def share_list(shares: Sequence[tuple[str, float]]) -> str:
    """`[alice, 10] [group:eda, 20] [default, 1]`, as bqueues -l shows USER_SHARES."""
    return " ".join(f"[{name}, {show_number(amount)}]" for name, amount in shares)


def _limit(limit: dict[str, Any]) -> str:
    """`per-user: 64 slots, 10 jobs; users: each; queues: normal short`."""
    amounts = [f"{limit[key]} {key}" for key in ("slots", "jobs") if key in limit]
    parts = [f"{limit.get('name', '')}: {', '.join(amounts)}"]
    for key in ("users", "queues"):
        value = limit.get(key)
        if value is not None:
            parts.append(f"{key}: {value if isinstance(value, str) else ' '.join(value)}")
    return "; ".join(parts)
