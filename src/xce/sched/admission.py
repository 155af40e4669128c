"""Admission: a job no host and no template could ever hold is refused at submission."""

from __future__ import annotations

from xce.model.cluster import ClusterConfig, HostTemplate
from xce.resreq import parse
from xce.sched.hosts import HostRecord


def largest_request(
    config: ClusterConfig, hosts: list[HostRecord], one_host: bool
) -> tuple[int, str]:
    """The most slots one job can ask for, and what offers them: one host (or one
    template's host) when `one_host`, else all hosts together or one template at its
    maximum (a job is placed wholly on static hosts or on hosts of one template)."""
    templates: tuple[HostTemplate, ...] = tuple(t for t in config.catalog.templates if t.max > 0)
    if one_host:
        sizes = [(h.slots, f"host {h.name}") for h in hosts]
        sizes += [(t.slots, f"a host of template {t.name}") for t in templates]
    else:
        sizes = [(sum(h.slots for h in hosts if h.template is None), "all hosts")]
        sizes += [(t.max * t.slots, f"template {t.name} (max {t.max})") for t in templates]
    return max(sizes, default=(0, "no host"))


def oversize(config: ClusterConfig, hosts: list[HostRecord], n: int, res: str) -> str | None:
    """Why a job of `n` slots with requirement `res` can never run here, or None."""
    one_host = parse(res).span_hosts == 1 if res else False
    largest, where = largest_request(config, hosts, one_host)
    if n <= largest:
        return None
    shape = " on one host" if one_host else ""
    return f"job requests {n} slots{shape}; the most this cluster offers is {largest} ({where})"
