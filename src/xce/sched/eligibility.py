"""Which hosts a bucket may use: the queue's host list and `select[]`, cached per
host-set version. Hosts with identical attributes share one select evaluation."""

from __future__ import annotations

from xce.model.cluster import Queue
from xce.resreq import Select
from xce.sched.hosts import HostRecord, queue_allows
from xce.sched.pools import PoolRecord
from xce.sched.state import SchedulerState


class Eligible:
    """Hosts of a queue that satisfy a select: all of them, and the open ones."""

    __slots__ = ("matching", "open")

    def __init__(self, matching: list[int], open_: set[int]) -> None:
        self.matching = matching  # whatever their state
        self.open = open_


def eligible(state: SchedulerState, queue: Queue, select: Select | None) -> Eligible:
    """The hosts `queue` may use that satisfy `select` (cached until hosts change)."""
    cache_key = ("eligible", queue.name, select.text if select else "")
    found = state.cache.get(cache_key)
    if isinstance(found, Eligible):
        return found
    matching: list[int] = []
    open_: set[int] = set()
    class_cache: dict[object, bool] = {}
    for host in state.hosts:
        if host is None or not queue_allows(queue, host):
            continue
        if select is not None and not _selects(select, host, class_cache):
            continue
        matching.append(host.index)
        if host.is_open:
            open_.add(host.index)
    result = Eligible(matching, open_)
    state.cache[cache_key] = result
    return result


def _selects(select: Select, host: HostRecord, class_cache: dict[object, bool]) -> bool:
    if select.uses_hname:
        return select(host.attrs)
    verdict = class_cache.get(host.class_key)
    if verdict is None:
        verdict = class_cache[host.class_key] = select(host.attrs)
    return verdict


def reach(state: SchedulerState, pool: PoolRecord) -> set[int] | None:
    """Indices of hosts that can take tokens from `pool` (None: every host)."""
    if pool.hosts is None:
        return None
    cache_key = ("reach", pool.resource, pool.name)
    found = state.cache.get(cache_key)
    if isinstance(found, set):
        return found
    hosts = {h.index for h in state.hosts if h is not None and pool.reaches(h)}
    state.cache[cache_key] = hosts
    return hosts


def name_rank(state: SchedulerState) -> list[int]:
    """Each host index's rank in name order (the final tie-break of placement)."""
    found = state.cache.get("name_rank")
    if isinstance(found, list):
        return found
    ranks = [0] * len(state.hosts)
    named = sorted((h.name, h.index) for h in state.hosts if h is not None)
    for rank, (_name, index) in enumerate(named):
        ranks[index] = rank
    state.cache["name_rank"] = ranks
    return ranks
