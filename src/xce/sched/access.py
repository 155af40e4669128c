"""Submission checks of where a job may go: its queue's users (LSF USERS) and its
host list (`bsub -m`: host names, host groups, `template:GLOB`), resolved into the
patterns the scheduler matches hosts against (sched/hosts.py pattern_matches)."""

from __future__ import annotations

from collections.abc import Collection

from xce.model.cluster import ClusterConfig, Queue
from xce.model.jobs import JobSpec
from xce.sched.errors import SubmitError

TEMPLATE_PREFIX = "template:"


def check_queue_user(spec: JobSpec, queue: Queue) -> None:
    """Refuse a job whose user may not use its queue (the check is on the job's user,
    also when an admin submits for another)."""
    users = queue.users
    if users is not None and spec.user not in users:  # (None: everyone, most queues)
        shown = ", ".join(queue.users_as_written or users)
        raise SubmitError(
            f"User {spec.user} cannot use queue {queue.name} (queue users: {shown})"
        )


def resolve_hosts(
    entries: tuple[str, ...], config: ClusterConfig, present: Collection[str],
    strict: bool = True,
) -> tuple[str, ...]:
    """A job's `-m` entries as host patterns: host groups expanded, host names checked
    against the hosts configured or `present`, `template:GLOB` and `all` kept.
    Raises SubmitError naming an unknown host or group; not `strict` (a job taken
    again from a log or a rebuilt state, checked when it was submitted), an unknown
    name is kept (a provisioned host that has left since)."""
    groups = config.host_groups
    known: Collection[str] = present
    if not strict:
        return tuple(dict.fromkeys(p for e in entries for p in groups.get(e, (e,))))
    if any(entry not in present and entry not in groups for entry in entries):
        known = {h.name for h in config.hosts} | set(present)
    patterns: dict[str, None] = {}
    for entry in entries:
        found = groups.get(entry)
        if found is not None:
            patterns.update(dict.fromkeys(found))
        elif entry == "all" or (
            entry.startswith(TEMPLATE_PREFIX) and entry[len(TEMPLATE_PREFIX):].strip()
        ) or entry in known:
            patterns[entry] = None
        else:
            raise SubmitError(f"-m: unknown host or host group '{entry}'")
    if not patterns:
        raise SubmitError("-m: no host named")
    return tuple(patterns)
