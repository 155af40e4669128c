"""Scheduler state, fed by events and kept incrementally.

Every input arrives as an event (`apply`); a session only reads this state (and may
refresh its caches). Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from xce.model.cluster import ClusterConfig, HostTemplate, Queue, ResourceValue
from xce.model.events import (
    ConfigLoaded,
    HostAdded,
    HostRemoved,
    HostStateChanged,
    JobFinished,
    JobHeld,
    JobKilled,
    JobRequeued,
    JobStarted,
    JobSubmitted,
    PoolHistoryRestored,
    SchedulerEvent,
    SharedTotalChanged,
    SupplyChanged,
)
from xce.model.jobs import JobSpec
from xce.model.result import SortKey
from xce.resreq import ResReqError, parse, validate
from xce.sched.buckets import Bucket, BucketKey, LimitRef, PendingJob
from xce.sched.hosts import OPEN_STATE, HostRecord
from xce.sched.limits import limit_key
from xce.sched.pools import PoolRecord
from xce.sched.room import template_room
from xce.sched.runlimit import run_limit

# The most frequent event types as constants: compiled, a Final name is read directly
# where an imported class is looked up in the module's dictionary at every use.
_SUBMITTED: Final = JobSubmitted
_STARTED: Final = JobStarted
_FINISHED: Final = JobFinished
_HOST_ADDED: Final = HostAdded
_HOST_STATE: Final = HostStateChanged
_HOST_REMOVED: Final = HostRemoved
_SUPPLY: Final = SupplyChanged
# s a new host is expected to take to join when nothing else says (FORMATS.md)
DEFAULT_LEAD_TIME: Final = 300.0


class HostIndex:
    """A derived index over hosts that follows host changes incrementally (a base
    class, not a protocol: compiled, its method is called directly)."""

    __slots__ = ()

    def host_changed(self, host: HostRecord, present: bool) -> None:
        raise NotImplementedError


class SubmitError(ValueError):
    """A job the scheduler cannot accept (unknown queue, bad requirement, ...)."""


class SchedulerInputError(ValueError):
    """An event that contradicts the state (unknown job or host), or that is not a
    scheduler event at all (a lease, a provisioning request: the controller's own)."""


class RunningJob:
    """A running job and what it holds."""

    __slots__ = (
        "end", "hosts", "key", "limit_refs", "pools", "shared", "spec", "start", "usage"
    )

    def __init__(
        self,
        spec: JobSpec,
        key: SortKey,
        hosts: dict[int, int],
        pools: dict[str, PoolRecord],
        start: float,
        end: float,
    ) -> None:
        self.spec = spec
        self.key = key
        self.hosts = hosts  # host index -> slots
        self.pools = pools  # shared resource -> pool its tokens come from
        self.start = start
        self.end = end  # start + run limit (inf: no limit); planned: plan.Plan.planned
        self.usage: dict[str, float] = {}  # per-slot host consumables
        self.shared: dict[str, float] = {}
        self.limit_refs: tuple[LimitRef, ...] = ()


class SchedulerState:
    """The cluster as the scheduler sees it."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = ClusterConfig()
        self.version = 0  # bumped by every event
        self.capacity_version = 0  # bumped by every event that may change what fits
        self.hosts: list[HostRecord | None] = []
        self.names: list[str] = []  # host names by index ("" where none)
        self.name_order: list[int] = []  # indices of the hosts present, by name
        self._name_hint = 0  # where the last host went in or left name_order
        self.host_by_name: dict[str, HostRecord] = {}
        self.free_slots: list[int] = []
        self.free_res: dict[str, list[float]] = {}
        self.open_free: set[int] = set()  # open hosts with a free slot
        self._free_drops = 0  # removals from open_free since it was last rebuilt
        self.provisioned: dict[int, HostRecord] = {}  # hosts that came from a template
        self.idle_provisioned: dict[int, HostRecord] = {}  # ... running nothing
        # Whether idle_provisioned is in order of idle_since (it is when events come in
        # time order, as the simulator feeds them): then the host idle the longest of
        # a template is the first of it.
        self.idle_in_order = True
        self._idle_latest = -math.inf  # the latest idle_since of a host that went idle
        self.busy_slots = 0  # slots held by running jobs
        self.pools: dict[str, list[PoolRecord]] = {}
        self.queues: dict[str, Queue] = {}
        self.templates: dict[str, HostTemplate] = {}
        self.ranked: tuple[HostTemplate, ...] = ()  # templates by (rank, name)
        # template -> how long its hosts stay idle before they are reclaimable
        self.idle_times: dict[str, float] = {}
        self.one_idle_time = True  # every template's idle time is the catalog's
        self.countable_pools: tuple[PoolRecord, ...] = ()  # pools tokens can be borrowed for
        self.limit_used: list[dict[tuple[str, str], list[int]]] = []  # [slots, jobs]
        self._limit_refs_cache: dict[tuple[str, str], tuple[LimitRef, ...]] = {}
        self.pending: dict[int, PendingJob] = {}
        self.held: dict[int, PendingJob] = {}
        self.buckets: dict[BucketKey, Bucket] = {}  # buckets with pending jobs
        self._bucket_cache: dict[BucketKey, Bucket] = {}  # every bucket made, for reuse
        self.running: dict[int, RunningJob] = {}
        # (start + run limit, job, its record) of the running jobs that have a limit,
        # sorted (ids are unique: records are never compared): the plan's change
        # points (sched/plan.py), the record at hand for its sweep
        self.ends: list[tuple[float, int, RunningJob]] = []
        self.indexes: dict[object, HostIndex] = {}  # derived views kept up to date
        self.alive: dict[str, int] = {}  # template -> hosts of it present
        # template -> the host record its virtual hosts share, and its consumables
        self.virtual: dict[str, tuple[HostRecord, dict[str, float]]] = {}
        self._free_indices: list[int] = []  # indices of removed hosts, to reuse
        self.in_flight: dict[str, int] = {}  # template -> expected hosts not yet joined
        # template -> when its in-flight hosts were requested, sorted (see arrivals)
        self.requested: dict[str, list[float]] = {}
        self.lead_times: dict[str, float] = {}  # template -> runtime lead-time estimate
        self.allowance: dict[str, int] = {}  # template -> runtime cap on new hosts
        self._submitted: dict[int, JobSpec] = {}  # pending, held and running specs
        self._valid_res: set[str] = set()  # requirement strings checked against config
        # (slots, free) -> the shared "not enough job slots" failure (realpass.Failure)
        self.slot_failures: dict[tuple[int, int], object] = {}
        # Bucket failures reused from an earlier session (Bucket.failure), over every
        # session on this state: counted by the real pass, read-only for the rest (tests,
        # the controller's GET /demand). Equal live and simulated on the same events.
        self.failure_cache_hits = 0
        if config is not None:
            self.apply(ConfigLoaded(config=config))

    # ------------------------------------------------------------------ events
    def apply(self, event: SchedulerEvent) -> None:
        """Apply one event. Raises SubmitError / SchedulerInputError, changing nothing:
        also for an event that is not a SchedulerEvent (the drivers pass on only these,
        xce.model.events.is_scheduler_event)."""
        if type(event) is _SUBMITTED:  # the most frequent events, without `match`
            self._submit(event.job)
            self.version += 1
            return
        if type(event) is _STARTED:
            self._start(event.job, event.hosts, event.pools, event.time)
            self.version += 1
            self.capacity_version += 1
            return
        if type(event) is _FINISHED:
            self._finish(event.job, event.time)
            self.version += 1
            self.capacity_version += 1
            return
        if type(event) is _HOST_ADDED:
            self._add_host(event)
        elif type(event) is _HOST_STATE:
            self._set_host_state(self._host(event.name), event.state)
        elif type(event) is _HOST_REMOVED:
            self._remove_host(self._host(event.name))
        elif type(event) is _SUPPLY:
            self._supply(event)
        else:
            self._apply_other(event)
            return
        self.version += 1
        self.capacity_version += 1

    def _apply_other(self, event: SchedulerEvent) -> None:
        """The scheduler events apply() has no fast path for."""
        match event:
            case JobKilled(job=job_id, time=time):
                self._finish(job_id, time)
            case JobRequeued(job=job_id, time=time):
                self._requeue(job_id, time)
            case JobHeld(job=job_id, held=held):
                self._hold(job_id, held)
                self.version += 1  # what fits is the same: only who is queued changed
                return
            case SharedTotalChanged(resource=resource, total=total, pool=pool):
                self._pool(resource, pool).base = total
            case PoolHistoryRestored(pool=key, history=history):
                if history:
                    self.pool_by_key(key).history = [(t, u, b) for t, u, b in history]
            case ConfigLoaded(config=config):
                self._load_config(config)
            case _:
                # Not a scheduler event (a lease, a provisioning request or instance, an
                # expected host, a token step: the controller's records), or a subclass
                # the fast path does not know. Refused rather than taken as a change of
                # what fits, which would void the cross-session failure cache.
                raise SchedulerInputError(
                    f"{type(event).__name__} is not a scheduler event: the scheduler "
                    "state takes only xce.model.events.SchedulerEvent"
                )
        self.version += 1
        self.capacity_version += 1  # anything else may change what fits

    def apply_all(self, events: Iterable[SchedulerEvent]) -> None:
        for event in events:
            self.apply(event)

    # ------------------------------------------------------------------ config
    def _load_config(self, config: ClusterConfig) -> None:
        """(Re)build every index from a configuration, keeping jobs, the state of static
        hosts that stay, and every host that is not static (provisioned, or joined)."""
        static = {spec.name for spec in config.hosts}
        states = {h.name: h.state for h in self.hosts if h is not None and h.name in static}
        was_static = {spec.name for spec in self.config.hosts}
        provisioned = [
            h for h in self.hosts
            if h is not None and h.name not in static and h.name not in was_static
        ]
        running = list(self.running.values())
        queued = sorted(
            [*self.pending.values(), *self.held.values()], key=lambda j: j.key
        )
        self.config = config
        self._valid_res = set()
        self.queues = {q.name: q for q in config.queues}
        self._load_templates(config)
        self._limit_refs_cache = {}
        self._clear_hosts(config)
        self._load_pools(config)
        self._keep_supply(config)
        self.limit_used = [{} for _ in config.limits]
        self.pending, self.held, self.buckets, self.running = {}, {}, {}, {}
        self.ends = []
        self._bucket_cache = {}
        self._submitted = {}
        self._restore_hosts(config, states, provisioned)
        self._restore_jobs(queued, running)
        self.idle_in_order, self._idle_latest = True, -math.inf
        for record in self.idle_provisioned.values():
            self._went_idle(record)
        self._hosts_changed()

    def _load_templates(self, config: ClusterConfig) -> None:
        """The catalog's templates: by name, by (rank, name), and their idle times."""
        self.templates = {t.name: t for t in config.catalog.templates}
        self.ranked = tuple(sorted(config.catalog.templates, key=lambda t: (t.rank, t.name)))
        self.idle_times = {
            t.name: config.catalog.idle_time if t.idle_time is None else t.idle_time
            for t in config.catalog.templates
        }
        self.one_idle_time = len({config.catalog.idle_time, *self.idle_times.values()}) == 1

    def _clear_hosts(self, config: ClusterConfig) -> None:
        """No hosts: every per-host index empty, a column for each host consumable."""
        self.virtual = {}
        self.hosts, self.host_by_name, self.free_slots, self.open_free = [], {}, [], set()
        self.names, self.name_order = [], []
        self.provisioned, self.busy_slots, self.alive = {}, 0, {}
        self.idle_provisioned = {}
        self._free_indices = []
        self.free_res = {
            name: [] for name, r in config.resources.items() if r.consumable and not r.shared
        }

    def _load_pools(self, config: ClusterConfig) -> None:
        """The shared resources' pools, with the countables that apply to them."""
        countables = {(c.resource, c.pool): c for c in config.catalog.countables}
        # Tokens borrowed or asked for stay with a pool that stays (a changed
        # configuration does not give them back); `used` is rebuilt as jobs restart.
        before = {(p.resource, p.name): p for pools in self.pools.values() for p in pools}
        self.pools = {
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
        for pools in self.pools.values():
            for fresh in pools:
                kept = before.get((fresh.resource, fresh.name))
                if kept is not None:
                    fresh.borrowed, fresh.tokens_in_flight = kept.borrowed, kept.tokens_in_flight
                    fresh.history = kept.history
                    if fresh.countable is not None:
                        fresh.headroom = kept.headroom
        self.countable_pools = tuple(
            pool for pools in self.pools.values() for pool in pools if pool.countable is not None
        )

    def _keep_supply(self, config: ClusterConfig) -> None:
        """The supply facts (hosts in flight, when requested, lead times) of the
        templates that stay."""
        self.in_flight = {
            name: count for name, count in self.in_flight.items()
            if any(t.name == name for t in config.catalog.templates)
        }
        self.requested = {n: t for n, t in self.requested.items() if n in self.in_flight}
        self.lead_times = {n: t for n, t in self.lead_times.items() if n in self.templates}

    def _restore_hosts(
        self, config: ClusterConfig, states: dict[str, str], provisioned: list[HostRecord]
    ) -> None:
        """Add the configured static hosts (in their kept `states`, else "ok"), then
        the `provisioned` ones kept from before, as they were."""
        for spec in config.hosts:
            self._add_host_record(
                spec.name, spec.slots, spec.type, spec.model, spec.resources, None,
                states.get(spec.name, "ok"), 0,
            )
        for host in provisioned:
            record = self._add_host_record(
                host.name, host.slots, host.type, host.model, host.resources,
                host.template, host.state, host.joined,
            )
            record.idle_since = host.idle_since

    def _restore_jobs(self, queued: list[PendingJob], running: list[RunningJob]) -> None:
        """Submit the `queued` jobs again (held ones held), then the `running` ones,
        started again where they ran."""
        for job in queued:
            self._submit(job.spec, hold=job.bucket is None)
        for run in running:
            self._submit(run.spec)
            names = {self._host_at(i).name: n for i, n in run.hosts.items()}
            self._start(run.spec.id, names, {r: p.name for r, p in run.pools.items()}, run.start)

    def _went_idle(self, host: HostRecord) -> None:
        """`host` was just added at the end of idle_provisioned."""
        if host.idle_since < self._idle_latest:
            self.idle_in_order = False
        else:
            self._idle_latest = host.idle_since

    def _hosts_changed(self, host: HostRecord | None = None, present: bool = True) -> None:
        """Hosts changed: drop the derived views, or update them for `host`."""
        if host is None:
            self.indexes.clear()
        else:
            for index in self.indexes.values():
                index.host_changed(host, present)

    # ------------------------------------------------------------------ hosts
    def _host(self, name: str) -> HostRecord:
        host = self.host_by_name.get(name)
        if host is None:
            raise SchedulerInputError(f"unknown host '{name}'")
        return host

    def _host_at(self, index: int) -> HostRecord:
        host = self.hosts[index]
        assert host is not None
        return host

    def _add_host_record(
        self,
        name: str,
        slots: int,
        type_: str,
        model: str,
        resources: dict[str, ResourceValue],
        template: str | None,
        state: str,
        time: float,
    ) -> HostRecord:
        if name in self.host_by_name:
            raise SchedulerInputError(f"host '{name}' already exists")
        for res in resources:
            if res not in self.config.resources:
                raise SchedulerInputError(f"host '{name}': unknown resource '{res}'")
        # Reuse the index of a removed host, so that the index space (and every
        # per-host array a session copies) stays as large as the cluster, not its history.
        index = self._free_indices.pop() if self._free_indices else len(self.hosts)
        host = HostRecord(index, name, slots, type_, model, resources, template, state, time)
        if index == len(self.hosts):
            self.hosts.append(host)
            self.names.append(name)
            self.free_slots.append(slots)
            for column in self.free_res.values():
                column.append(0.0)
        self.hosts[index] = host
        self.names[index] = name
        at = self._name_position(name)
        self.name_order.insert(at, index)
        self._name_hint = at + 1  # (hosts that join one after the other sort so, mostly)
        self.free_slots[index] = slots
        for res, column in self.free_res.items():
            value = resources.get(res, 0)
            column[index] = 0.0 if isinstance(value, bool) else float(value)
        self.host_by_name[name] = host
        if host.is_open and slots > 0:
            self.open_free.add(index)
        if template is not None:
            self.provisioned[index] = host
            self.idle_provisioned[index] = host
            self.alive[template] = self.alive.get(template, 0) + 1
        return host

    def _name_position(self, name: str) -> int:
        """Where `name` is or would go in name_order: where the last host went in or
        left, if it is there (provisioned hosts join and leave in order of their
        names, mostly), else by bisection (written out, as compiled code calls bisect's
        functions with a key by a slow generic call)."""
        order, names = self.name_order, self.names
        low, high = 0, len(order)
        hint = self._name_hint
        if hint <= high and (hint == 0 or names[order[hint - 1]] < name) and (
            hint == high or not names[order[hint]] < name
        ):
            return hint
        while low < high:
            middle = (low + high) // 2
            if names[order[middle]] < name:
                low = middle + 1
            else:
                high = middle
        return low

    def _drop_free(self, index: int) -> None:
        """Host `index` is no longer open with a free slot.

        A set never shrinks its table: one that held most hosts and now holds a few
        costs its whole table on every walk (a session walks it), so after many
        removals it is rebuilt, compact, in place (views share it)."""
        open_free = self.open_free
        if index not in open_free:
            return
        open_free.remove(index)
        self._free_drops += 1
        if self._free_drops > 32 + 4 * len(open_free):
            self._free_drops = 0
            kept = list(open_free)
            open_free.clear()
            open_free.update(kept)

    def _add_host(self, event: HostAdded) -> None:
        template = event.template
        if template is not None and template not in self.templates:
            raise SchedulerInputError(f"host '{event.name}': unknown template '{template}'")
        host = self._add_host_record(
            event.name, event.slots, event.type, event.model, event.resources,
            template, event.state, event.time,
        )
        if event.idle_since is not None:
            host.idle_since = event.idle_since
        if template is not None:
            self._went_idle(host)
        self._hosts_changed(host)


    def _set_host_state(self, host: HostRecord, state: str) -> None:
        host.state = state
        if host.is_open and self.free_slots[host.index] > 0:
            self.open_free.add(host.index)
        else:
            self._drop_free(host.index)
        self._hosts_changed(host)

    def _remove_host(self, host: HostRecord) -> None:
        if host.running:
            raise SchedulerInputError(
                f"host '{host.name}' still runs jobs {sorted(host.running)}: requeue or "
                "finish them first"
            )
        index = host.index
        self.hosts[index] = None
        at = self._name_position(host.name)
        assert self.name_order[at] == index
        del self.name_order[at]
        self._name_hint = at
        self.names[index] = ""
        del self.host_by_name[host.name]
        if index in self.provisioned:
            del self.provisioned[index]
            if host.template is not None:
                self.alive[host.template] -= 1
        if index in self.idle_provisioned:
            del self.idle_provisioned[index]
        self._drop_free(index)
        self.free_slots[index] = 0
        self._free_indices.append(index)
        self._hosts_changed(host, present=False)

    def _pool(self, resource: str, pool: str) -> PoolRecord:
        pools = self.pools.get(resource)
        if not pools:
            raise SchedulerInputError(f"unknown shared resource '{resource}'")
        if not pool:
            if len(pools) > 1:
                raise SchedulerInputError(f"shared resource '{resource}' has several pools")
            return pools[0]
        for record in pools:
            if record.name == pool:
                return record
        raise SchedulerInputError(f"unknown pool '{pool}' of '{resource}'")

    def pool_by_key(self, key: str) -> PoolRecord:
        """A pool named as in scenarios and demand: `vcs` (the only pool, or the pool
        of the resource's countable) or `hspice/cloud`."""
        resource, _, pool = key.partition("/")
        if not pool:
            pools = self.pools.get(resource, [])
            for record in pools:
                if record.countable is not None and len(pools) > 1:
                    return record
        return self._pool(resource, pool)

    def _supply(self, event: SupplyChanged) -> None:
        templates = self.templates
        in_flight, allowances = event.in_flight, event.allowance
        requested, lead_times = event.requested, event.lead_time
        for names in (in_flight, allowances, requested, lead_times):
            for name in names:
                if name not in templates:
                    raise SchedulerInputError(f"unknown template '{name}'")
        tokens, borrowed, headroom = event.tokens_in_flight, event.borrowed, event.headroom
        resolved = [
            (self.pool_by_key(key), field, value)
            for field, values in (
                ("tokens_in_flight", tokens), ("borrowed", borrowed), ("headroom", headroom),
            )
            for key, value in values.items()
        ] if tokens or borrowed or headroom else []
        self.in_flight.update(in_flight)
        for name, times in requested.items():
            self.requested[name] = sorted(times)
        for name, lead in lead_times.items():
            if lead < 0:
                self.lead_times.pop(name, None)
            else:
                self.lead_times[name] = float(lead)
        for name, allowance in allowances.items():
            if allowance < 0:  # a negative allowance lifts the runtime cap
                self.allowance.pop(name, None)
            else:
                self.allowance[name] = allowance
        for pool, field, value in resolved:
            if field == "headroom" and value < 0:  # a negative headroom lifts the runtime one
                pool.headroom = None
                continue
            setattr(pool, field, float(value))
            if field == "borrowed":
                pool.record(event.time)

    def lead_time(self, template: str) -> float:
        """How long a new host of `template` is expected to take to join: the runtime
        estimate, else the template's expected_lead_time, else 300 s."""
        found = self.lead_times.get(template)
        if found is not None:
            return found
        configured = self.templates[template].expected_lead_time
        return DEFAULT_LEAD_TIME if configured is None else configured

    def arrivals(self, template: str, now: float) -> list[float]:
        """When each in-flight host of `template` is expected to join, earliest first:
        its request time plus the lead time, one second from now when overdue; hosts
        in flight without a known request time, now plus the lead time."""
        count = max(0, self.in_flight.get(template, 0))
        if not count:
            return []
        lead = self.lead_time(template)
        soonest = now + 1.0
        times = self.requested.get(template, [])
        found = [max(soonest, t + lead) for t in times[:count]]
        found.extend([now + lead] * (count - len(found)))
        return found

    def new_hosts_allowed(self, template: HostTemplate) -> int:
        """How many new hosts of `template` may be requested now: its `max` less the
        hosts of it present and in flight, lowered by a runtime allowance (>= 0)
        (`xce.sched.room`)."""
        name = template.name
        return template_room(
            template.max, self.alive.get(name, 0), max(0, self.in_flight.get(name, 0)),
            allowance=self.allowance.get(name),
        )

    def template_alive(self, template: str) -> int:
        """Hosts of `template` present now (joined, whatever their state)."""
        return self.alive.get(template, 0)

    # ------------------------------------------------------------------ jobs
    def sort_key(self, spec: JobSpec) -> SortKey:
        queue = self.queues[spec.queue]
        return (-queue.priority, -spec.priority, spec.submit, spec.id)

    def resolve(self, spec: JobSpec) -> JobSpec:
        """Check a submission and fill defaults (the first queue). Raises SubmitError."""
        if spec.id in self._submitted:
            raise SubmitError(f"job {spec.id} already exists")
        queue = spec.queue or self.config.queues[0].name
        if queue not in self.queues:
            raise SubmitError(f"unknown queue '{queue}'")
        if spec.n < 1:
            raise SubmitError(f"job {spec.id}: -n must be at least 1")
        self._check_run_limit(spec, self.queues[queue])
        if spec.res not in self._valid_res:
            try:
                req = parse(spec.res)
                validate(req, self.config.resources)
            except ResReqError as err:
                raise SubmitError(str(err)) from err
            # (A span[ptile=N] larger than -n is accepted, as LSF does: all on one host.)
            self._valid_res.add(spec.res)
        if queue != spec.queue:
            spec = msgspec.structs.replace(spec, queue=queue)
        return spec

    @staticmethod
    def _check_run_limit(spec: JobSpec, queue: Queue) -> None:
        limit = spec.run_limit
        if limit is None:
            return
        if limit < 0 or math.isnan(limit):
            raise SubmitError(f"run limit must be >= 0 seconds, not {limit:g}")
        if queue.max_run_limit is not None and limit > queue.max_run_limit:
            raise SubmitError(
                f"run limit {limit:g} s exceeds queue {queue.name}'s "
                f"max_run_limit {queue.max_run_limit:g} s"
            )

    def _bucket_for(self, spec: JobSpec) -> Bucket:
        # The run limit makes twins only where a plan reads it: with reservations, or,
        # with templates (holds on supply being obtained), as the backfill window of a
        # queue that backfills. Else jobs alike but for their limits stay one bucket
        # (today's decisions exactly).
        queue = self.queues[spec.queue]
        planned = self.config.reserve_depth or (queue.backfill and self.config.catalog.templates)
        limit = run_limit(spec, queue) if planned else None
        key: BucketKey = (spec.queue, spec.n, spec.res, math.inf if limit is None else limit)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self._bucket_cache.get(key)
            if bucket is not None:  # emptied before: the same requirements again
                self.buckets[key] = bucket
                return bucket
            req = parse(spec.res)
            resources = self.config.resources
            per_slot = tuple(
                (r, a) for r, a in req.rusage if a > 0 and not resources[r].shared
            )
            shared = tuple((r, a) for r, a in req.rusage if a > 0 and resources[r].shared)
            bucket = Bucket(key, self.queues[spec.queue], req, per_slot, shared)
            self.buckets[key] = bucket
            self._bucket_cache[key] = bucket
        return bucket

    def limit_refs(self, user: str, queue: str) -> tuple[LimitRef, ...]:
        """The limit counters a job of `user` in `queue` counts against."""
        found = self._limit_refs_cache.get((user, queue))
        if found is None:
            refs = []
            for index, limit in enumerate(self.config.limits):
                key = limit_key(limit, user, queue)
                if key is not None:
                    refs.append((index, key))
            found = self._limit_refs_cache[(user, queue)] = tuple(refs)
        return found

    def _submit(self, spec: JobSpec, hold: bool | None = None) -> None:
        spec = self.resolve(spec)
        self._submitted[spec.id] = spec
        self._enqueue(spec, self.sort_key(spec), spec.hold if hold is None else hold)

    def _enqueue(self, spec: JobSpec, key: SortKey, hold: bool) -> None:
        refs = self.limit_refs(spec.user, spec.queue)
        if hold:
            self.held[spec.id] = PendingJob(spec, key, None, refs)
            return
        bucket = self._bucket_for(spec)
        job = PendingJob(spec, key, bucket, refs)
        bucket.add(job)
        self.pending[spec.id] = job

    def _dequeue(self, job_id: int) -> PendingJob:
        # (get and del, not pop: compiled, a dict's pop is a method call by name)
        job = self.pending.get(job_id)
        if job is None:
            held = self.held.get(job_id)
            if held is None:
                raise SchedulerInputError(f"job {job_id} is not pending")
            del self.held[job_id]
            return held
        del self.pending[job_id]
        assert job.bucket is not None
        job.bucket.remove(job_id)
        if not job.bucket.members:
            del self.buckets[job.bucket.key]
            job.bucket.clear()
        return job

    def _hold(self, job_id: int, held: bool) -> None:
        if (job_id in self.held) == held:
            return
        job = self._dequeue(job_id)
        self._enqueue(job.spec, job.key, held)

    def _start(
        self, job_id: int, hosts: dict[str, int], pools: dict[str, str], time: float
    ) -> None:
        job = self.pending.get(job_id)
        if job is None:
            raise SchedulerInputError(f"job {job_id} is not pending")
        bucket = job.bucket
        assert bucket is not None
        # One walk over the hosts: their slots add up to the job's, each positive (else
        # that error first), and each host is known.
        by_name = self.host_by_name
        placed: dict[int, int] = {}
        total, low = 0, 1
        unknown: str | None = None
        for name, slots in hosts.items():
            total += slots
            if slots < low:
                low = slots
            host = by_name.get(name)
            if host is not None:
                placed[host.index] = slots
            elif unknown is None:
                unknown = name
        if total != job.spec.n or low <= 0:
            raise SchedulerInputError(
                f"job {job_id}: hosts {hosts} do not add up to its {job.spec.n} slots"
            )
        if unknown is not None:
            raise SchedulerInputError(f"unknown host '{unknown}'")
        chosen: dict[str, PoolRecord] = {}
        for res, _amount in bucket.shared:
            chosen[res] = (
                self._pool(res, pools[res]) if res in pools else self._infer_pool(res, placed)
            )
        self._dequeue(job_id)
        limit = run_limit(job.spec, bucket.queue)
        run = RunningJob(
            job.spec, job.key, placed, chosen, time, math.inf if limit is None else time + limit
        )
        if run.end != math.inf:
            insort(self.ends, (run.end, job_id, run))
        if bucket.per_slot:  # (else the empty ones it was made with)
            run.usage = dict(bucket.per_slot)
        if bucket.shared:
            run.shared = dict(bucket.shared)
        run.limit_refs = job.limit_refs
        self.running[job_id] = run
        self._hold_capacity(run, +1, time)

    def _infer_pool(self, resource: str, placed: dict[int, int]) -> PoolRecord:
        """The first pool reachable from every host of the job (FORMATS.md)."""
        pools = self.pools[resource]
        for pool in pools:
            if all(pool.reaches(self._host_at(i)) for i in placed):
                return pool
        return pools[0]

    def _hold_capacity(self, run: RunningJob, sign: int, time: float) -> None:
        hosts, free_slots, open_free = self.hosts, self.free_slots, self.open_free
        idle, usage = self.idle_provisioned, run.usage
        # The job id as the object the spec holds: compiled, an int key is made anew
        # for every dictionary operation (hosts x 2 per job), an Any one is not.
        job_id: Any = run.spec.id
        placed = run.hosts
        slots_total = 0
        if usage:
            free_res = self.free_res
            for res, per_slot in usage.items():
                column = free_res[res]
                for index, slots in placed.items():
                    column[index] -= sign * per_slot * slots
        for index, slots in placed.items():
            slots_total += slots
            host = hosts[index]
            free = free_slots[index] - sign * slots
            free_slots[index] = free
            if host is None:
                continue
            running = host.running
            if sign > 0:
                running[job_id] = slots
                if host.template is not None and index in idle:
                    del idle[index]
            else:
                del running[job_id]  # (set when it started: the host cannot have left)
                if not running:
                    host.idle_since = time
                    if host.template is not None:
                        idle[index] = host
                        self._went_idle(host)
            if free > 0 and host.state == OPEN_STATE:
                open_free.add(index)
            else:
                self._drop_free(index)
        self.busy_slots += sign * slots_total
        for res, pool in run.pools.items():
            pool.used += sign * run.shared[res]
            pool.record(time)
        for limit_index, key in run.limit_refs:
            counter = self.limit_used[limit_index].setdefault(key, [0, 0])
            counter[0] += sign * slots_total
            counter[1] += sign

    def _finish(self, job_id: int, time: float) -> None:
        run = self.running.get(job_id)
        if run is None:
            self._dequeue(job_id)
        else:
            del self.running[job_id]
            self._hold_capacity(run, -1, time)
            self._drop_end(run)
        del self._submitted[job_id]

    def _drop_end(self, run: RunningJob) -> None:
        """A running job with a limit left: its planned end is no change point now."""
        if run.end != math.inf:
            ends = self.ends
            at = bisect_left(ends, (run.end, run.spec.id))
            del ends[at]

    def _requeue(self, job_id: int, time: float) -> None:
        run = self.running.get(job_id)
        if run is None:
            raise SchedulerInputError(f"job {job_id} is not running")
        del self.running[job_id]
        self._hold_capacity(run, -1, time)
        self._drop_end(run)
        self._enqueue(run.spec, run.key, False)

    # ------------------------------------------------------------------ queries
    def live_hosts(self) -> list[HostRecord]:
        return [h for h in self.hosts if h is not None]
