"""(Re)loading a configuration into the scheduler state (ConfigLoaded): every index
rebuilt from it, keeping the jobs, the state of static hosts that stay and every
host that is not static."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xce.model.cluster import ClusterConfig
from xce.sched.buckets import PendingJob
from xce.sched.host_changes import add_host_record, hosts_changed, went_idle
from xce.sched.hosts import HostRecord, host_at
from xce.sched.labels import relabel
from xce.sched.pools import PoolRecord
from xce.sched.running import RunningJob, start_job
from xce.sched.supply_state import keep_supply
from xce.sched.usage import NGPUS

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState


def load_config(state: SchedulerState, config: ClusterConfig) -> None:
    """(Re)build every index from a configuration, keeping jobs, the state of static
    hosts that stay, and every host that is not static (provisioned, or joined)."""
    static = {spec.name for spec in config.hosts}
    states = {h.name: h.state for h in state.hosts if h is not None and h.name in static}
    was_static = {spec.name for spec in state.config.hosts}
    provisioned = [
        h for h in state.hosts
        if h is not None and h.name not in static and h.name not in was_static
    ]
    running = list(state.running.values())
    queued = sorted(
        [*state.pending.values(), *state.held.values(), *state.waiting.values()],
        key=lambda j: j.key,
    )
    held = set(state.held)
    state.config = config
    state._valid_res = set()
    state.queues = {q.name: q for q in config.queues}
    state.fairshare.configure(config)
    _load_templates(state, config)
    state._limit_refs_cache = {}
    _clear_hosts(state, config)
    _load_pools(state, config)
    keep_supply(state, config)
    state.limit_used = [{} for _ in config.limits]
    state.pending, state.held, state.buckets, state.running = {}, {}, {}, {}
    state.waiting = {}
    state.ends = []
    state._bucket_cache = {}
    state._submitted = {}
    _restore_hosts(state, config, states, provisioned)
    _restore_jobs(state, queued, held, running)
    state.idle_in_order, state._idle_latest = True, -math.inf
    for record in state.idle_provisioned.values():
        went_idle(state, record)
    hosts_changed(state)


def _load_templates(state: SchedulerState, config: ClusterConfig) -> None:
    """The catalog's templates: by name, by (rank, name), and their idle times."""
    state.templates = {t.name: t for t in config.catalog.templates}
    state.ranked = tuple(sorted(config.catalog.templates, key=lambda t: (t.rank, t.name)))
    state.idle_times = {
        t.name: config.catalog.idle_time if t.idle_time is None else t.idle_time
        for t in config.catalog.templates
    }
    state.one_idle_time = len({config.catalog.idle_time, *state.idle_times.values()}) == 1


def _clear_hosts(state: SchedulerState, config: ClusterConfig) -> None:
    """No hosts: every per-host index empty, a column for each host consumable, and
    one for GPUs when some host or template has them (else made when first needed:
    host_changes.gpu_column)."""
    state.virtual = {}
    state.hosts, state.host_by_name, state.free_slots, state.open_free = [], {}, [], set()
    state.names, state.labels, state.label_order, state.fresh = [], [], [], set()
    state.indexed_labels = True
    state.provisioned, state.busy_slots, state.alive = {}, 0, {}
    state.idle_provisioned = {}
    state._free_indices = []
    state.label_changes += 1  # (indices found before name other hosts: running.Placed)
    state.free_res = {
        name: [] for name, r in config.resources.items() if r.consumable and not r.shared
    }
    if any(h.gpus for h in config.hosts) or any(t.gpus for t in config.catalog.templates):
        state.free_res[NGPUS] = []


def _load_pools(state: SchedulerState, config: ClusterConfig) -> None:
    """The shared resources' pools, with the countables that apply to them."""
    countables = {(c.resource, c.pool): c for c in config.catalog.countables}
    # Tokens borrowed or asked for stay with a pool that stays (a changed
    # configuration does not give them back); `used` is rebuilt as jobs restart.
    before = {(p.resource, p.name): p for pools in state.pools.values() for p in pools}
    state.pools = {
        res: [
            PoolRecord(
                p,
                len(pools) == 1,
                countables.get((res, p.pool))
                or (countables.get((res, None)) if len(pools) == 1 else None),
            )
            for p in pools
        ]
        for res, pools in config.shared.items()
    }
    for pools in state.pools.values():
        for fresh in pools:
            kept = before.get((fresh.resource, fresh.name))
            if kept is not None:
                fresh.borrowed, fresh.tokens_in_flight = kept.borrowed, kept.tokens_in_flight
                fresh.history = kept.history
                if fresh.countable is not None:
                    fresh.headroom = kept.headroom
    state.countable_pools = tuple(
        pool for pools in state.pools.values() for pool in pools if pool.countable is not None
    )


def _restore_hosts(
    state: SchedulerState, config: ClusterConfig, states: dict[str, str],
    provisioned: list[HostRecord],
) -> None:
    """Add the configured static hosts (in their kept `states`, else "ok"), then
    the `provisioned` ones kept from before, as they were."""
    for spec in config.hosts:
        add_host_record(
            state, spec.name, spec.slots, spec.type, spec.model, spec.resources, None,
            states.get(spec.name, "ok"), 0, spec.gpus,
        )
    for host in provisioned:
        record = add_host_record(
            state, host.name, host.slots, host.type, host.model, host.resources,
            host.template, host.state, host.joined, host.gpus,
        )
        record.idle_since = host.idle_since
        relabel(state, record)


def _restore_jobs(
    state: SchedulerState, queued: list[PendingJob], held: set[int],
    running: list[RunningJob],
) -> None:
    """Submit the `queued` jobs again (`held` ones held), then the `running` ones,
    started again where they ran. Conditions and arrays keep what they know; the jobs
    that wait on them wait again (sched/waiting.py)."""
    state.waits.reload([run.spec for run in running])
    for job in queued:
        state._submit(job.spec, hold=job.id in held)
    state.waits.restoring = True  # (running jobs come back whatever waits)
    for run in running:
        state._submit(run.spec)
        names = {host_at(state.hosts, i).name: n for i, n in run.hosts.items()}
        start_job(
            state, run.spec.id, names, {r: p.name for r, p in run.pools.items()}, run.start
        )
    state.waits.restoring = False
