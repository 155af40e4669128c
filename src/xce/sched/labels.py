"""Sort labels: the order of hosts with as many free slots (FORMATS.md, `order[]`'s
default: "the most free slots, then name"), with provisioned hosts placed by what
they have done (docs/scheduling.md, "Static hosts first").

With `catalog.static_first` (the default), a provisioned host that has been idle
since it joined comes before every static host (it was obtained for waiting work;
given none, it would go back unused), and one that has run a job comes after them
(its work done, static hosts take the new work and it goes idle and back). The job a
host was requested for still takes it first (sched/placement.py RequestedFirst), and
holds it while the rest of its supply comes (sched/holds.py). Static hosts are
labelled by name, so a cluster without provisioned hosts, or with `static_first:
false`, orders hosts by name alone. The hosts present are kept in label order
(`state.label_order`), so that placements read it instead of sorting; while hosts
are numbered in that order (`state.indexed_labels`, as configured hosts are), sorting
indices sorts by label.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from xce.sched.hosts import HostRecord

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState

FRESH: Final = "\x00"  # before every name: provisioned, idle since it joined
WORKED: Final = "\U0010ffff"  # after every name: provisioned, has run a job


def label_of(state: SchedulerState, host: HostRecord) -> str:
    """The host's sort label as it is now."""
    if host.template is None or not state.config.catalog.static_first:
        return host.name
    if host.running or host.idle_since != host.joined:
        return WORKED + host.name
    return FRESH + host.name


def place_label(state: SchedulerState, host: HostRecord) -> None:
    """Put a host that has just come in label order."""
    label = label_of(state, host)
    state.labels[host.index] = label
    at = _position(state, label)
    order, index = state.label_order, host.index
    order.insert(at, index)
    if (at > 0 and order[at - 1] > index) or (at + 1 < len(order) and order[at + 1] < index):
        state.indexed_labels = False  # (kept so: True says label order is index order)
    state._label_hint = at + 1  # (hosts that join one after the other sort so, mostly)
    state.label_changes += 1
    if label[0] == FRESH:
        state.fresh.add(host.index)


def drop_label(state: SchedulerState, host: HostRecord) -> None:
    """Take a host that leaves (or is relabelled) out of label order."""
    index = host.index
    at = _position(state, state.labels[index])
    assert state.label_order[at] == index
    del state.label_order[at]
    state._label_hint = at
    state.label_changes += 1
    state.labels[index] = ""
    state.fresh.discard(index)


def relabel(state: SchedulerState, host: HostRecord) -> None:
    """Move a host whose label may have changed (it joined with a past, it started
    its first job) to where its label now goes."""
    if label_of(state, host) != state.labels[host.index]:
        drop_label(state, host)
        place_label(state, host)


def _position(state: SchedulerState, label: str) -> int:
    """Where `label` is or would go in label_order: where the last host went in or
    left when that is the place (hosts join and leave in label order, mostly), else
    by bisection."""
    order, labels = state.label_order, state.labels
    hint = state._label_hint
    if hint <= len(order) and (hint == 0 or labels[order[hint - 1]] < label) and (
        hint == len(order) or not labels[order[hint]] < label
    ):
        return hint
    # (bisection written out: compiled, bisect with a key calls the key generically
    # at every step; hot in elastic simulations, where hosts join, start their first
    # job and leave by the hundred thousand)
    low, high = 0, len(order)
    while low < high:
        middle = (low + high) // 2
        if labels[order[middle]] < label:
            low = middle + 1
        else:
            high = middle
    return low
