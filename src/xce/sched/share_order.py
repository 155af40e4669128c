"""Scheduling order with fairshare queues, without touching a job's sort key.

A job's sort key is fixed when it is queued: (-queue priority, -job priority, submit
time, id). In a fairshare queue its user's dynamic priority comes between the queue
priority and the job priority, and it changes with usage and time; so a fairshare
queue keeps one bucket per user (`Bucket.key[7]`), each session ranks those users
(`Bucket.rank`) and the passes merge buckets by *merge keys*: the sort key of a
bucket's next job with its first field scaled and the bucket's rank added. Within a
bucket the rank is the same for every job, so the sort key orders it as before, and
nothing is re-keyed: a session costs one ranking per fairshare user, whatever the
number of pending jobs.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING

from xce.model.api import QueueShares
from xce.model.result import SortKey, TraceEntry
from xce.sched.buckets import Bucket
from xce.sched.fairshare import RANK_SPAN

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState


def merge_key(bucket: Bucket, key: SortKey) -> SortKey:
    """The merge key of `key`, the sort key of one of `bucket`'s jobs."""
    return (key[0] * RANK_SPAN + bucket.rank, key[1], key[2], key[3])


def local_until(
    bucket: Bucket, key: SortKey, until: SortKey | None, fair: bool = True
) -> SortKey | None:
    """`until`, the merge key of another bucket's next job (None: none), as the sort
    key `bucket`'s jobs (`key`: one of them, the next) are compared with: None when
    every job of `bucket` comes first (a higher queue priority or rank). Without
    fairshare queues (`fair` False) merge keys are sort keys: `until` as it is."""
    if not fair:
        return until
    if until is None or key[0] * RANK_SPAN + bucket.rank < until[0]:
        return None
    return (key[0], until[1], until[2], until[3])


def fairshare_table(state: SchedulerState, queue: str | None, now: float) -> list[QueueShares]:
    """The fairshare queues (or `queue`, if it is one) as of `now`: their users,
    shares, usage and dynamic priorities, with each user's pending jobs."""
    fair = state.fairshare
    pending: dict[str, dict[str, int]] = {}
    for job in state.pending.values():
        if job.spec.queue in fair.trees:
            users = pending.setdefault(job.spec.queue, {})
            users[job.spec.user] = users.get(job.spec.user, 0) + 1
    return [
        fair.table(name, pending.get(name, {}), now)
        for name in fair.trees
        if queue is None or name == queue
    ]


def rank_buckets(state: SchedulerState, now: float, trace: list[TraceEntry] | None) -> None:
    """Rank the users of each fairshare queue that have pending jobs, as of `now`
    (`Bucket.rank`), and trace, for each user after the first, who comes before."""
    fair = state.fairshare
    queued: dict[str, dict[str, list[Bucket]]] = {}
    for bucket in state.buckets.values():
        user = bucket.key[7]
        if user:
            queued.setdefault(bucket.key[0], {}).setdefault(user, []).append(bucket)
    for queue, users in queued.items():
        ranks = fair.ranks(queue, users, now)
        for user, buckets in users.items():
            for bucket in buckets:
                bucket.rank, bucket.share_trace = ranks[user], -1
        if trace is not None and len(users) > 1:
            _trace_order(state, queue, users, ranks, now, trace)


def _trace_order(
    state: SchedulerState,
    queue: str,
    users: dict[str, list[Bucket]],
    ranks: dict[str, int],
    now: float,
    trace: list[TraceEntry],
) -> None:
    """One entry per user ranked after another: the user just before, and both
    dynamic priorities (on the user's first pending job; its buckets' pend groups
    show it: `Bucket.share_trace`)."""
    order = sorted(users, key=lambda u: (ranks[u], u))
    fair = state.fairshare
    for before, user in pairwise(order):
        if ranks[user] == ranks[before]:
            continue
        first = min(
            (bucket.ordered() for bucket in users[user]),
            key=lambda o: o[0][o[1]].key,
        )
        job = first[0][first[1]]
        mine, theirs = fair.standing(queue, user, now), fair.standing(queue, before, now)
        tree = fair.trees[queue]
        account = tree.account(user).name
        # (members of one group: their own priorities within it decide)
        level = 1 if account == tree.account(before).name else 0
        within = f" within {account}" if level else ""
        trace.append(
            TraceEntry(
                job.id, "real", "fairshare",
                f"Fairshare in queue {queue}: user {user} (dynamic priority "
                f"{mine[level]:.3f}{within}) comes after user {before} ({theirs[level]:.3f})",
            )
        )
        for bucket in users[user]:
            bucket.share_trace = len(trace) - 1
