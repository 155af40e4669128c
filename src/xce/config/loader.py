"""Whole-configuration loading: read, parse, validate, build the ClusterConfig."""

from __future__ import annotations

import os

from xce.config.catalog import read_catalog
from xce.config.fairshare import read_factors
from xce.config.fields import MapReader, Place, line_of
from xce.config.groups import read_host_groups, read_user_groups
from xce.config.hosts import read_hosts
from xce.config.limits import read_limits
from xce.config.marked_yaml import load_yaml, read_text
from xce.config.policy import read_policy, read_simulation
from xce.config.queues import read_queues
from xce.config.resources import read_resources
from xce.config.shared import read_shared
from xce.model.cluster import ClusterConfig, HostSpec, Limit, ResourceDef

TOP_LEVEL_KEYS = (
    "cluster",
    "session_interval",
    "resources",
    "hosts",
    "host_groups",
    "user_groups",
    "shared",
    "queues",
    "limits",
    "reserve_depth",
    "max_job_array_size",
    "orphan_job_term_timeout",
    "fairshare",
    "preempt_before_burst",
    "catalog",
    "policy",
    "simulation",
)


def build_config(
    doc: object, filename: str, field_prefix: str = "", *, line: int = 1
) -> ClusterConfig:
    """Validate a loaded document (or an inlined sub-mapping) and build the ClusterConfig.

    `doc` is what `load_yaml` returned (plain dicts and lists work too, without line
    numbers). `field_prefix` names where the mapping sits in its document (e.g.
    "cluster" for a scenario's inline cluster), so fields read `cluster.hosts[0]`.
    `line` is reported when `doc` itself is wrong and carries no line (null, a scalar).
    Raises one ConfigError: the first problem found, sections checked in dependency
    order (resources, hosts, host_groups, user_groups, shared, queues, limits, catalog,
    policy, simulation). A section set to null counts as absent, except `queues:`,
    which then has no queue.
    """
    root = Place(filename, line_of(doc, line), field_prefix)
    if doc is None:
        root.fail("the configuration is empty (expected a mapping)")
    top = MapReader(doc, root, TOP_LEVEL_KEYS)
    defaults = ClusterConfig()
    name = top.text("cluster", defaults.cluster)
    interval = top.number("session_interval", defaults.session_interval, positive=True)
    reserve_depth = top.integer("reserve_depth", defaults.reserve_depth, minimum=0)
    max_array = top.integer("max_job_array_size", defaults.max_job_array_size, minimum=1)
    orphan_timeout = top.optional_number("orphan_job_term_timeout", minimum=0)

    resources: dict[str, ResourceDef] = {}
    if (section := top.section("resources")) is not None:
        resources = read_resources(*section)
    hosts: tuple[HostSpec, ...] = ()
    if (section := top.section("hosts")) is not None:
        hosts = read_hosts(*section, resources)
    host_names = frozenset(host.name for host in hosts)
    host_groups: dict[str, tuple[str, ...]] = {}
    if (section := top.section("host_groups")) is not None:
        host_groups = read_host_groups(*section, host_names)
    user_groups: dict[str, tuple[str, ...]] = {}
    if (section := top.section("user_groups")) is not None:
        user_groups = read_user_groups(*section)
    shared = read_shared(
        top.get("shared"), top.value_place("shared"), resources, host_names, host_groups
    )
    queues = defaults.queues
    if "queues" in top:  # present but null is an empty list, not the default queue
        given = top.get("queues")
        queues = read_queues(
            [] if given is None else given, top.value_place("queues"), host_names,
            host_groups, user_groups,
        )
    limits: tuple[Limit, ...] = ()
    if (section := top.section("limits")) is not None:
        limits = read_limits(*section, frozenset(queue.name for queue in queues))
    catalog = read_catalog(top.get("catalog"), top.value_place("catalog"), resources, shared)
    return ClusterConfig(
        cluster=name,
        session_interval=interval,
        resources=resources,
        hosts=hosts,
        shared=shared,
        queues=queues,
        limits=limits,
        reserve_depth=reserve_depth,
        max_job_array_size=max_array,
        orphan_job_term_timeout=orphan_timeout,
        catalog=catalog,
        host_groups=host_groups,
        user_groups=user_groups,
        fairshare=read_factors(top.get("fairshare"), top.value_place("fairshare")),
        preempt_before_burst=top.flag("preempt_before_burst", False),
        policy=read_policy(top.get("policy"), top.value_place("policy"), catalog),
        simulation=read_simulation(
            top.get("simulation"), top.value_place("simulation"), catalog,
            frozenset(queue.name for queue in queues),
        ),
    )


def load_config_text(text: str, filename: str = "<string>") -> ClusterConfig:
    """Parse and validate a cluster configuration given as YAML text."""
    return build_config(load_yaml(text, filename), filename)


def load_config(path: str | os.PathLike[str]) -> ClusterConfig:
    """Read, parse and validate a cluster configuration file.

    An unreadable file (missing, a directory, not UTF-8) raises
    ConfigError(path, 0, "", "cannot read: ...").
    """
    return load_config_text(read_text(path), os.fspath(path))
