"""Admission: a job no host and no template could ever hold is refused at submission."""

from __future__ import annotations

from collections.abc import Mapping

from xce.model.cluster import ClusterConfig, ResourceValue
from xce.resreq import parse
from xce.sched.hosts import HostRecord


def _largest(config: ClusterConfig, hosts: list[HostRecord], one_host: bool) -> tuple[int, str]:
    """The most slots one job can ask for, and what offers them: one host (or one
    template's host) when `one_host`, else all hosts together or one template at its
    maximum (a job is placed wholly on static hosts or on hosts of one template)."""
    templates = [t for t in config.catalog.templates if t.max > 0]
    if one_host:
        sizes = [(h.slots, f"host {h.name}") for h in hosts]
        sizes += [(t.slots, f"a host of template {t.name}") for t in templates]
    else:
        sizes = [(sum(h.slots for h in hosts if h.template is None), "all hosts")]
        sizes += [(t.max * t.slots, f"template {t.name} (max {t.max})") for t in templates]
    return max(sizes, default=(0, "no host"))


def _holds(slots: int, resources: Mapping[str, ResourceValue], piece: int,
           need: list[tuple[str, float]]) -> bool:
    """Whether an empty host of this shape takes `piece` slots of the job."""
    if slots < piece:
        return False
    for res, amount in need:
        have = resources.get(res, 0)
        if isinstance(have, bool) or float(have) < amount * piece:
            return False
    return True


def oversize(
    config: ClusterConfig, hosts: list[HostRecord], n: int, res: str, gpus: int = 0
) -> str | None:
    """Why a job of `n` slots with requirement `res` and `gpus` GPUs per host can
    never run here, or None: more slots than any host (span[hosts=1]) or than the
    cluster or any one template can give, more GPUs than any host or template has, or
    a per-slot consumable (rusage) that no empty host or template has."""
    if gpus:
        offered = [h.gpus for h in hosts]
        offered += [t.gpus for t in config.catalog.templates if t.max > 0]
        most = max(offered, default=0)
        if gpus > most:
            return (
                f"job requests {gpus} GPUs per host; the most any host or template has "
                f"is {most}"
            )
    req = parse(res)
    one_host = req.span_hosts == 1
    largest, where = _largest(config, hosts, one_host)
    if n > largest:
        shape = " on one host" if one_host else ""
        return f"job requests {n} slots{shape}; the most this cluster offers is {largest} ({where})"
    piece = n if one_host else min(req.span_ptile or 1, n)
    need = [
        (r, a) for r, a in req.rusage
        if a > 0 and r in config.resources and config.resources[r].consumable
        and not config.resources[r].shared
    ]
    if not need:
        return None
    shapes = [(h.slots, h.resources) for h in hosts]
    shapes += [(t.slots, t.resources) for t in config.catalog.templates if t.max > 0]
    if any(_holds(slots, resources, piece, need) for slots, resources in shapes):
        return None
    asked = ", ".join(f"{r}={a * piece:g}" for r, a in need)
    return f"no host or template can hold {piece} slot(s) of this job with {asked}"
