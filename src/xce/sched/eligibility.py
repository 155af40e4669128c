"""Which hosts a bucket may use: the queue's host list and `select[]`, cached per
host-set version. Hosts with identical attributes share one select evaluation."""

from __future__ import annotations

from xce.model.cluster import Queue
from xce.resreq import Select
from xce.sched.hosts import HostRecord, pattern_matches
from xce.sched.pools import PoolRecord
from xce.sched.state import HostIndex, SchedulerState


class Eligible(HostIndex):
    """Hosts of a queue that satisfy a select: all of them, and the open ones. Kept up
    to date as hosts join, change state and leave."""

    __slots__ = (
        "cands", "class_cache", "exclusive", "job_hosts", "matching", "open", "others",
        "patterns", "queue", "select",
    )

    def __init__(
        self, queue: Queue, select: Select | None, job_hosts: tuple[str, ...] = (),
        exclusive: bool = False,
    ) -> None:
        self.queue = queue
        self.patterns = queue.hosts  # the queue's host list (read once: a model field)
        self.job_hosts = job_hosts or None  # the jobs' own (-m), intersected with it
        self.exclusive = exclusive  # its candidates: hosts running nothing (-x)
        self.select = select
        self.class_cache: dict[object, bool] = {}
        self.matching: set[int] = set()  # whatever their state
        self.open: set[int] = set()
        self.others: set[int] = set()  # hosts present that are not eligible
        # A session's view of these hosts: (its capacity, the capacity's version, the
        # open ones with a free slot, their free slots in all or -1 until summed); see
        # Evaluator.candidates and Evaluator.free_on.
        self.cands: tuple[object, int, list[int], int] | None = None

    def host_changed(self, host: HostRecord, present: bool) -> None:
        index = host.index
        if not present or not pattern_matches(self.patterns, host) or (
            self.job_hosts is not None and not pattern_matches(self.job_hosts, host)
        ) or (
            self.select is not None and not _selects(self.select, host, self.class_cache)
        ):
            self.matching.discard(index)
            self.open.discard(index)
            if present:
                self.others.add(index)
            else:
                self.others.discard(index)
            return
        self.others.discard(index)
        self.matching.add(index)
        if host.is_open:
            self.open.add(index)
        else:
            self.open.discard(index)


def eligible(
    state: SchedulerState, queue: Queue, select: Select | None,
    job_hosts: tuple[str, ...] = (), exclusive: bool = False,
) -> Eligible:
    """The hosts `queue` (and the jobs' `-m` list) may use that satisfy `select` (kept
    incrementally); for exclusive jobs a view of their own (see Evaluator.candidates)."""
    key: tuple[object, ...] = ("eligible", queue.name, select.text if select else "")
    if job_hosts or exclusive:
        key = (*key, job_hosts, exclusive)
    found = state.indexes.get(key)
    if isinstance(found, Eligible):
        return found
    result = Eligible(queue, select, job_hosts, exclusive)
    for host in state.hosts:
        if host is not None:
            result.host_changed(host, True)
    state.indexes[key] = result
    return result


def _selects(select: Select, host: HostRecord, class_cache: dict[object, bool]) -> bool:
    if select.uses_hname:
        return select(host.attrs)
    verdict = class_cache.get(host.class_key)
    if verdict is None:
        verdict = class_cache[host.class_key] = select(host.attrs)
    return verdict


class Reach(HostIndex):
    """Hosts that can take tokens from a pool, kept up to date."""

    __slots__ = ("hosts", "pool")

    def __init__(self, pool: PoolRecord) -> None:
        self.pool = pool
        self.hosts: set[int] = set()

    def host_changed(self, host: HostRecord, present: bool) -> None:
        if present and self.pool.reaches(host):
            self.hosts.add(host.index)
        else:
            self.hosts.discard(host.index)


def reach(state: SchedulerState, pool: PoolRecord) -> set[int] | None:
    """Indices of hosts that can take tokens from `pool` (None: every host)."""
    if pool.hosts is None:
        return None
    key = ("reach", pool.resource, pool.name)
    found = state.indexes.get(key)
    if not isinstance(found, Reach):
        found = Reach(pool)
        for host in state.hosts:
            if host is not None:
                found.host_changed(host, True)
        state.indexes[key] = found
    return found.hosts
