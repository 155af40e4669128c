"""Hosts as the scheduler keeps them, and which queues and pools can use them."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Final

from xce.model.cluster import ResourceValue
from xce.resreq import NGPUS

OPEN_STATE: Final = "ok"
CLOSED_STATE: Final = "closed"  # drained: no new job starts; the jobs on it go on


class HostRecord:
    """One host known to the scheduler (static or provisioned)."""

    __slots__ = (
        "attrs",
        "class_key",
        "gpus",
        "idle_since",
        "index",
        "joined",
        "model",
        "name",
        "requested_for",
        "resources",
        "running",
        "slots",
        "state",
        "template",
        "type",
    )

    def __init__(
        self,
        index: int,
        name: str,
        slots: int,
        type_: str,
        model: str,
        resources: dict[str, ResourceValue],
        template: str | None,
        state: str,
        joined: float,
        gpus: int = 0,
    ) -> None:
        self.index = index
        self.name = name
        self.slots = slots
        self.type = type_
        self.model = model
        self.resources = dict(resources)
        self.gpus = gpus  # GPUs on the host (select[] and order[] see them as ngpus)
        self.template = template
        self.state = state
        self.joined = joined
        self.idle_since = joined
        self.requested_for: tuple[int, ...] = ()  # the jobs it was requested for
        self.running: dict[int, int] = {}  # job id -> slots on this host
        self.attrs: dict[str, str | float | bool] = {
            "type": type_, "model": model, "hname": name, "slots": float(slots),
            NGPUS: float(gpus),
        }
        if resources:  # (no sort nor merge for a host without any: most hosts)
            for key, value in resources.items():
                self.attrs[key] = value if isinstance(value, bool) else float(value)
        # Hosts with the same class key answer every hname-free select the same way.
        self.class_key = (
            type_, model, slots, tuple(sorted(resources.items())) if resources else (), gpus
        )

    @property
    def is_open(self) -> bool:
        return self.state == OPEN_STATE


def pattern_matches(patterns: tuple[str, ...] | None, host: HostRecord) -> bool:
    """Whether a host list (queue or pool `hosts:`) includes `host`.

    `None` includes every host. `all` includes every static host; `template:GLOB`
    includes hosts provisioned from matching templates; other entries are host names.
    """
    if patterns is None:
        return True
    if host.template is None:
        return "all" in patterns or host.name in patterns
    return any(
        p.startswith("template:") and fnmatchcase(host.template, p[9:]) for p in patterns
    )


def template_allowed(patterns: tuple[str, ...] | None, template: str) -> bool:
    """Whether a host list lets a queue or pool use hosts of `template`."""
    if patterns is None:
        return True
    return any(p.startswith("template:") and fnmatchcase(template, p[9:]) for p in patterns)


def host_at(hosts: list[HostRecord | None], index: int) -> HostRecord:
    """The host at `index` of a state's hosts (one that is present)."""
    host = hosts[index]
    assert host is not None
    return host


def by_label(indices: Iterable[int], labels: list[str], indexed: bool = False) -> list[int]:
    """`indices` sorted by their labels (host names, or sort labels: sched/labels.py;
    equal labels, which hosts present never have, by index). Hosts are mostly
    numbered in label order, and compiled, indices sort several times faster than
    by a key (a generic call per host): sorted by index, then by label (stable) only
    when that order turns out not to be the labels' strict order, or not at all
    when the hosts are known to be numbered so (`indexed`: state.indexed_labels).
    (Hot in EASY simulations: bench_easy.py, RICC-2010-2.)"""
    ranked = sorted(indices)
    if indexed:
        return ranked
    last = ""
    for index in ranked:
        label = labels[index]
        if label <= last:
            return sorted(ranked, key=labels.__getitem__)
        last = label
    return ranked


def by_name(placed: dict[int, int], names: list[str]) -> dict[str, int]:
    """A placement (host index -> slots) by host name, in name order, as session
    results give hosts (dispatches, reservations)."""
    if len(placed) == 1:
        ((index, slots),) = placed.items()
        return {names[index]: slots}
    # Placements mostly come in name order (made from the label order, or sorted by
    # it): named in one walk, and sorted only when that turns out not to be so (hot
    # in EASY simulations: a dispatch and a reservation each, bench_easy.py).
    named: dict[str, int] = {}
    last = ""
    for index, slots in placed.items():
        name = names[index]
        if name <= last:
            return {names[index]: placed[index] for index in by_label(placed, names)}
        named[name] = slots
        last = name
    return named
