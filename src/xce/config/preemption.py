"""A queue's preemption keys (LSF's PREEMPTION=PREEMPTIVE[...] and PREEMPTABLE) and
the check of the whole `queues:` section: no queue preempts itself or an unknown
queue, and preemption has no cycle."""

from __future__ import annotations

from collections.abc import Mapping

from xce.config.fields import MapReader, Place, as_list, as_text
from xce.model.cluster import PREEMPT_ACTIONS, PreemptAction

PREEMPT_KEYS = ("preempt", "preempt_action", "preemptable", "preempt_delay")

# A queue's `preempt:` entries with their places, by queue
Targets = dict[str, list[tuple[str, Place]]]


def read_targets(entry: MapReader) -> list[tuple[str, Place]]:
    """The queues a queue's `preempt:` names, with their places (checked later,
    once every queue is known: `check_targets`)."""
    if "preempt" not in entry:
        return []
    items = as_list(entry.get("preempt"), entry.value_place("preempt"))
    if not items:
        entry.value_place("preempt").fail("must not be empty (omit preempt for none)")
    return [(as_text(item, place), place) for item, place in items]


def read_action(entry: MapReader) -> PreemptAction:
    action = entry.text("preempt_action", "requeue")
    for known in PREEMPT_ACTIONS:
        if action == known:
            return known
    entry.value_place("preempt_action").fail(
        f"preempt_action must be {', '.join(PREEMPT_ACTIONS)}, got {action!r}"
    )


def check_targets(targets: Targets, preemptable: Mapping[str, bool]) -> None:
    """Every named queue exists, is not the queue itself and is preemptable, and no
    queue preempts, directly or not, a queue that preempts it."""
    for queue, named in targets.items():
        for target, place in named:
            if target == queue:
                place.fail(f"queue {queue!r} cannot preempt itself")
            if target not in preemptable:
                place.fail(f"unknown queue {target!r}")
            if not preemptable[target]:
                place.fail(f"queue {target!r} is not preemptable (preemptable: false)")
    done: set[str] = set()

    def visit(queue: str, path: tuple[str, ...]) -> None:
        for target, place in targets.get(queue, []):
            if target in path or target == queue:
                place.fail(f"preemption cycle: {' -> '.join((*path, queue, target))}")
            if target not in done:
                visit(target, (*path, queue))
        done.add(queue)

    for queue in targets:
        if queue not in done:
            visit(queue, ())
