"""The `queues:` section."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from xce.config.fairshare import read_shares
from xce.config.fields import MapReader, Place, as_entries, as_list, as_text, show_number
from xce.config.groups import expand_user_entries
from xce.config.host_patterns import NO_GROUPS, read_entry_hosts
from xce.config.preemption import PREEMPT_KEYS, Targets, check_targets, read_action, read_targets
from xce.model.cluster import Queue

_QUEUE_KEYS = (
    "name", "priority", "hosts", "requeue_on_host_loss", "backfill", "run_limit", "max_run_limit",
    "demand_after", "users", "fairshare", *PREEMPT_KEYS,
)


def read_queues(
    value: object,
    place: Place,
    static_hosts: Collection[str],
    host_groups: Mapping[str, tuple[str, ...]] = NO_GROUPS,
    user_groups: Mapping[str, tuple[str, ...]] = NO_GROUPS,
) -> tuple[Queue, ...]:
    """Validate `queues:` (at least one queue, unique names) in config order."""
    entries = as_entries(value, place, _QUEUE_KEYS,
                         empty="needs at least one queue (omit queues: for the default queue)")
    queues: list[Queue] = []
    names: set[str] = set()
    targets: Targets = {}
    for entry in entries:
        name = entry.unique_text("name", names, "queue")
        priority = entry.integer("priority", 0)
        hosts = read_entry_hosts(entry, static_hosts, host_groups)
        users: tuple[str, ...] | None = None
        users_written: tuple[str, ...] = ()
        if "users" in entry:
            users, users_written = expand_user_entries(
                entry.get("users"), entry.value_place("users"), user_groups
            )
        requeue = entry.flag("requeue_on_host_loss", True)
        run_limit, max_run_limit = _run_limits(entry)
        shares = None
        if (section := entry.section("fairshare")) is not None:
            shares = read_shares(*section, user_groups)
        targets[name] = read_targets(entry)
        queues.append(
            Queue(
                name=name, priority=priority, hosts=hosts, requeue_on_host_loss=requeue,
                backfill=entry.flag("backfill", False), run_limit=run_limit,
                max_run_limit=max_run_limit, users=users, users_as_written=users_written,
                hosts_as_written=_written(entry, "hosts", host_groups), fairshare=shares,
                preempt=tuple(name for name, _place in targets[name]),
                preempt_action=read_action(entry), preemptable=entry.flag("preemptable", True),
                preempt_delay=entry.number("preempt_delay", 0.0, minimum=0),
                demand_after=entry.number("demand_after", 0.0, minimum=0),
            )
        )
    check_targets(targets, {q.name: q.preemptable for q in queues})
    return tuple(queues)


def _written(
    entry: MapReader, key: str, groups: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """A list of names as written (already validated); () when absent or when it names
    none of `groups`."""
    if key not in entry:
        return ()
    written = tuple(as_text(v, p) for v, p in as_list(entry.get(key), entry.value_place(key)))
    return written if any(name in groups for name in written) else ()


def _run_limits(entry: MapReader) -> tuple[float | None, float | None]:
    """The queue's default `run_limit` and its `max_run_limit` (seconds, >= 0), the
    default within the maximum."""
    run_limit = entry.optional_number("run_limit", minimum=0)
    max_run_limit = entry.optional_number("max_run_limit", minimum=0)
    if run_limit is not None and max_run_limit is not None and run_limit > max_run_limit:
        entry.value_place("run_limit").fail(
            f"run_limit {show_number(run_limit)} is above max_run_limit "
            f"{show_number(max_run_limit)}"
        )
    return run_limit, max_run_limit
