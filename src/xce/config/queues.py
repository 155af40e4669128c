"""The `queues:` section."""

from __future__ import annotations

from collections.abc import Collection

from xce.config.fields import MapReader, Place, as_list
from xce.config.host_patterns import read_host_patterns
from xce.model.cluster import Queue

_QUEUE_KEYS = ("name", "priority", "hosts", "requeue_on_host_loss")


def read_queues(value: object, place: Place, static_hosts: Collection[str]) -> tuple[Queue, ...]:
    """Validate `queues:` (at least one queue, unique names) in config order."""
    items = as_list(value, place)
    if not items:
        place.fail("needs at least one queue (omit queues: for the default queue)")
    queues: list[Queue] = []
    names: set[str] = set()
    for item, item_place in items:
        entry = MapReader(item, item_place, _QUEUE_KEYS)
        name = entry.unique_text("name", names, "queue")
        priority = entry.integer("priority", 0)
        hosts = None
        if "hosts" in entry:
            hosts = read_host_patterns(entry.get("hosts"), entry.value_place("hosts"), static_hosts)
        requeue = entry.flag("requeue_on_host_loss", True)
        queues.append(
            Queue(name=name, priority=priority, hosts=hosts, requeue_on_host_loss=requeue)
        )
    return tuple(queues)
