"""Clusters sized from a workload's header, for runs that have no cluster file."""

from __future__ import annotations

from xce.model.cluster import Catalog, ClusterConfig, HostSpec, HostTemplate, Queue
from xce.model.policy import LeadTime, ProviderModel, SimulationConfig
from xce.sim.workload import Workload


def machine_shape(workload: Workload) -> tuple[int, int]:
    """(hosts, slots per host) of the traced machine: MaxNodes hosts sharing MaxProcs
    processors; without a header, one host per processor of the largest job."""
    procs = workload.max_procs or max((j.procs for j in workload.jobs), default=1)
    nodes = workload.max_nodes or procs
    nodes = max(1, min(nodes, procs))
    return nodes, max(1, procs // nodes)


def sized_cluster(
    workload: Workload,
    elastic: float = 0.0,
    lead_time: float = 120,
    idle_time: float = 600,
    session_interval: float = 10,
    *,
    template_max: int | None = None,
    backfill: bool = False,
    reserve_depth: int = 0,
) -> ClusterConfig:
    """The traced machine as a static cluster, or with the `elastic` fraction of its
    hosts as one template (`cloud`) that the policy provisions on demand, at most
    `template_max` hosts of it (default: that fraction). `backfill` (the queue's) and
    `reserve_depth` (the cluster's) are the plan's settings (EASY: true and 1)."""
    nodes, slots = machine_shape(workload)
    cloud = round(nodes * elastic)
    static = nodes - cloud
    width = len(str(max(nodes, 1)))
    hosts = tuple(HostSpec(name=f"n{i:0{width}d}", slots=slots) for i in range(1, static + 1))
    templates: tuple[HostTemplate, ...] = ()
    simulation = SimulationConfig()
    if cloud:
        most = cloud if template_max is None else template_max
        templates = (
            HostTemplate(name="cloud", provider="sim", slots=slots, max=most, rank=0),
        )
        simulation = SimulationConfig(
            providers={"sim": ProviderModel(lead_time=LeadTime(mean=lead_time))}
        )
    return ClusterConfig(
        cluster=workload.name,
        session_interval=session_interval,
        hosts=hosts,
        queues=(Queue(name="normal", priority=30, backfill=backfill),),
        catalog=Catalog(idle_time=idle_time, templates=templates),
        simulation=simulation,
        reserve_depth=reserve_depth,
    )
