"""Hosts joining, changing state and leaving the scheduler state, with the per-host
indexes kept beside them (hosts in label order, open hosts with a free slot, idle
provisioned hosts, derived views)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xce.model.cluster import ResourceValue
from xce.model.events import HostAdded
from xce.sched.errors import SchedulerInputError
from xce.sched.hosts import HostRecord
from xce.sched.labels import drop_label, place_label, relabel
from xce.sched.suspended import jobs_on
from xce.sched.usage import NGPUS

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState


def add_host_record(
    state: SchedulerState,
    name: str,
    slots: int,
    type_: str,
    model: str,
    resources: dict[str, ResourceValue],
    template: str | None,
    host_state: str,
    time: float,
    gpus: int = 0,
) -> HostRecord:
    if name in state.host_by_name:
        raise SchedulerInputError(f"host '{name}' already exists")
    for res in resources:
        if res not in state.config.resources:
            raise SchedulerInputError(f"host '{name}': unknown resource '{res}'")
    # Reuse the index of a removed host, so that the index space (and every
    # per-host array a session copies) stays as large as the cluster, not its history.
    index = state._free_indices.pop() if state._free_indices else len(state.hosts)
    host = HostRecord(
        index, name, slots, type_, model, resources, template, host_state, time, gpus
    )
    if gpus and NGPUS not in state.free_res:
        gpu_column(state)
    state.widest = max(state.widest, slots)
    if index == len(state.hosts):
        state.hosts.append(host)
        state.names.append(name)
        state.labels.append("")
        state.free_slots.append(slots)
        for column in state.free_res.values():
            column.append(0.0)
    state.hosts[index] = host
    state.names[index] = name
    place_label(state, host)
    state.free_slots[index] = slots
    for res, column in state.free_res.items():
        value = resources.get(res, 0)
        column[index] = 0.0 if isinstance(value, bool) else float(value)
    if gpus:
        state.free_res[NGPUS][index] = float(gpus)
    state.host_by_name[name] = host
    if host.is_open and slots > 0:
        state.open_free.add(index)
    if template is not None:
        state.provisioned[index] = host
        state.idle_provisioned[index] = host
        state.alive[template] = state.alive.get(template, 0) + 1
    return host


def gpu_column(state: SchedulerState) -> None:
    """Count free GPUs from now on (the first host with GPUs, or the first job asking
    for some, on a cluster configured without any): a column of free capacity with
    each present host's GPUs. None of them is taken yet: a running job asks for GPUs
    only through a bucket, and the first bucket asking for some makes the column."""
    state.free_res[NGPUS] = [
        0.0 if host is None else float(host.gpus) for host in state.hosts
    ]


def drop_free(state: SchedulerState, index: int) -> None:
    """Host `index` is no longer open with a free slot."""
    state.open_free.discard(index)
    dropped_free(state, 1)


def dropped_free(state: SchedulerState, count: int) -> None:
    """`count` hosts were just discarded from the open hosts with a free slot (some
    may not have been there).

    A set never shrinks its table: one that held most hosts and now holds a few
    costs its whole table on every walk (a session walks it), so after many
    removals it is rebuilt, compact, in place (views share it). (Discards of hosts
    that were not there count too: at most one rebuild per 32 + 4 x its size, each
    a walk of its size.)"""
    open_free = state.open_free
    state._free_drops += count
    if state._free_drops > 32 + 4 * len(open_free):
        state._free_drops = 0
        kept = list(open_free)
        open_free.clear()
        open_free.update(kept)


def went_idle(state: SchedulerState, host: HostRecord) -> None:
    """`host` was just added at the end of idle_provisioned."""
    if host.idle_since < state._idle_latest:
        state.idle_in_order = False
    else:
        state._idle_latest = host.idle_since


def hosts_changed(
    state: SchedulerState, host: HostRecord | None = None, present: bool = True
) -> None:
    """Hosts changed: drop the derived views, or update them for `host`."""
    if host is None:
        state.indexes.clear()
    else:
        for index in state.indexes.values():
            index.host_changed(host, present)


def add_host(state: SchedulerState, event: HostAdded) -> None:
    template = event.template
    if template is not None and template not in state.templates:
        raise SchedulerInputError(f"host '{event.name}': unknown template '{template}'")
    # A host of a template has the template's GPUs unless it says how many it has.
    gpus = event.gpus or (state.templates[template].gpus if template is not None else 0)
    host = add_host_record(
        state, event.name, event.slots, event.type, event.model, event.resources,
        template, event.state, event.time, gpus,
    )
    if event.idle_since is not None:
        host.idle_since = event.idle_since
    if template is not None:
        went_idle(state, host)
    if event.requested_for:
        host.requested_for = event.requested_for
        for job in event.requested_for:
            state.requested_for.setdefault(job, []).append(host.index)
    if template is not None:
        relabel(state, host)  # (it may join with a past: it has run jobs)
    hosts_changed(state, host)


def forget_requested(state: SchedulerState, host: HostRecord) -> None:
    """`host` leaves: no job has it requested for it any more."""
    requested = state.requested_for
    for job in host.requested_for:
        indices = requested.get(job)
        if indices is not None and host.index in indices:
            indices.remove(host.index)
            if not indices:
                del requested[job]
    host.requested_for = ()


def set_host_state(state: SchedulerState, host: HostRecord, host_state: str) -> None:
    host.state = host_state
    if host.is_open and state.free_slots[host.index] > 0:
        state.open_free.add(host.index)
    else:
        drop_free(state, host.index)
    hosts_changed(state, host)


def remove_host(state: SchedulerState, host: HostRecord) -> None:
    jobs = jobs_on(state, host)  # (a job suspended there resumes there)
    if jobs:
        raise SchedulerInputError(
            f"host '{host.name}' still runs jobs {jobs}: requeue or finish them first"
        )
    index = host.index
    if host.requested_for:
        forget_requested(state, host)
    drop_label(state, host)
    state.hosts[index] = None
    state.names[index] = ""
    del state.host_by_name[host.name]
    if index in state.provisioned:
        del state.provisioned[index]
        if host.template is not None:
            state.alive[host.template] -= 1
    if index in state.idle_provisioned:
        del state.idle_provisioned[index]
    drop_free(state, index)
    state.free_slots[index] = 0
    state._free_indices.append(index)
    hosts_changed(state, host, present=False)
