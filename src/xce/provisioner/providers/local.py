"""The `local` provider, built in: hosts on this machine, each an `xce agent` process
that joins as an expected host; and local token pools (docs/providers.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from xce.config.providers.file import ProviderSpec
from xce.config.providers.local import StartDelay, load_local_settings
from xce.model.amounts import EPSILON
from xce.model.cluster import ClusterConfig, HostTemplate, ResourceValue
from xce.provisioner.provider import (
    Description,
    HostGrant,
    Instance,
    PoolOffer,
    ProviderError,
    TemplateOffer,
    grant_names,
    lent_pool,
    offered_template,
)
from xce.provisioner.providers.local_files import InstanceRecord, LocalFiles
from xce.provisioner.providers.processes import Process, find, spawn, stop_groups
from xce.provisioner.registry import ProviderContext

PROVIDER = "local"
# The provisioner's own credentials are no business of the agents it starts.
PRIVATE_ENV = ("XCE_TOKEN", "XCE_TOKEN_FILE")


class LocalConfig(msgspec.Struct, frozen=True):
    """What the local provider serves, and where it keeps its files."""

    controller: str  # the URL the agents join
    work_dir: str
    cluster: str
    provider: str = PROVIDER  # its name in the catalog (`provider:` of its templates)
    templates: tuple[HostTemplate, ...] = ()
    pools: dict[str, float] = {}  # pool key -> tokens it lends at once
    lead_time: float = 5.0  # typical seconds from request to joined host (describe())
    stop_grace: float = 10.0  # seconds from SIGTERM to SIGKILL on release
    # seconds each agent waits before it starts, as a machine boots (0: none)
    start_delay: StartDelay = 0.0


def local_config(cluster: ClusterConfig, controller: str, work_dir: Path,
                 pools: Mapping[str, float] | None = None,
                 provider: str = PROVIDER) -> LocalConfig:
    """The local provider of `cluster`: the catalog's templates whose provider is
    `provider` (`local` by default)."""
    return LocalConfig(
        controller=controller, work_dir=str(work_dir), cluster=cluster.cluster,
        provider=provider,
        templates=tuple(t for t in cluster.catalog.templates if t.provider == provider),
        pools=dict(pools or {}),
    )


def from_spec(spec: ProviderSpec, context: ProviderContext) -> LocalProvider:
    """A local provider of the providers file: its files under the work directory (the
    work directory itself for the provider named `local`, as without a providers file),
    its settings from `<confPath>/local.yaml` when there is one."""
    work = Path(context.work_dir)
    if spec.name != PROVIDER:
        work = work / spec.name
    settings = load_local_settings(spec)
    config = local_config(context.cluster, settings.controller or context.controller, work,
                          settings.pools or context.pools, spec.name)
    return LocalProvider(msgspec.structs.replace(
        config, lead_time=settings.lead_time, stop_grace=settings.stop_grace,
        start_delay=settings.start_delay))


class LocalProvider:
    """Starts and stops agent processes; lends tokens of local pools."""

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self.files = LocalFiles(Path(config.work_dir), config.cluster)
        self.templates = {t.name: t for t in config.templates}
        self._children: list[subprocess.Popen[bytes]] = []  # started here: to be reaped

    def describe(self) -> Description:
        return Description(
            provider=self.config.provider,
            templates=tuple(
                TemplateOffer(name=t.name, slots=t.slots, type=t.type, model=t.model,
                              resources=t.resources, max=t.max,
                              lead_time=self.config.lead_time, cost_per_hour=0.0)
                for t in self.config.templates
            ),
            pools=tuple(PoolOffer(key, size) for key, size in sorted(self.config.pools.items())),
        )

    # ------------------------------------------------------------ hosts
    def request_hosts(self, request_id: str, template: str,
                      hosts: Sequence[HostGrant]) -> list[Instance]:
        """One agent per host. A host that already has an instance gets it back, so a
        retried request starts nothing twice. Refused as a whole (capacity) when the
        template's `max` running instances would be exceeded."""
        shape = self._template(template)
        names = grant_names(hosts)
        with self.files.locked():
            records = self.files.records()
            new = [grant for grant in hosts if _instance_id(grant.name) not in records]
            running = sum(1 for r in records.values()
                          if r.template == template and self._process(r).alive())
            if running + len(new) > shape.max:
                raise ProviderError(
                    "capacity", f"template {template}: {running} of at most {shape.max} "
                    f"instances run, {len(new)} more cannot start")
            for grant in new:
                records[_instance_id(grant.name)] = self._start(request_id, shape, grant)
        return [self._instance(records[_instance_id(name)]) for name in names]

    def release(self, instance_ids: Sequence[str]) -> None:
        """Stop the agents (SIGTERM to each one's process group, SIGKILL after the
        grace) and delete their join tokens. The records stay: the instances are listed
        `gone`. Jobs the agents started live on (their shims run in sessions of their
        own), as after any agent stop: release a host once it is decommissioned."""
        with self.files.locked():
            records = self.files.records()
            unknown = [i for i in instance_ids if i not in records]
            if unknown:
                raise ProviderError("request", f"no such instance: {', '.join(unknown)}")
            chosen = [records[i] for i in instance_ids]
            stop_groups([self._process(r) for r in chosen], self.config.stop_grace)
            for record in chosen:
                self.files.token_file(record.host).unlink(missing_ok=True)
        self._reap()

    def instances(self) -> list[Instance]:
        """Every instance ever started from this work directory, oldest first."""
        self._reap()
        listed = [self._instance(r) for r in self.files.records().values()]
        return sorted(listed, key=lambda i: (i.started, i.id))

    def _template(self, name: str) -> HostTemplate:
        return offered_template(self.templates, name, f"template {name}: not a local "
                                "template", "local templates")

    def _start(self, request_id: str, shape: HostTemplate, grant: HostGrant) -> InstanceRecord:
        command = _xce_command()
        host_dir = self.files.host_dir(grant.name)
        token = self.files.write_token(grant.name, grant.join_token)
        args = [
            command, "agent", "--controller", self.config.controller, "--name", grant.name,
            "--token-file", str(token), "--slots", str(shape.slots),
            "--state-dir", str(host_dir / "agent"),
        ]
        for name, value in shape.resources.items():
            args += ["--resource", f"{name}={_flag_value(value)}"]
        if self.config.start_delay > 0:  # a machine that boots: the agent starts later
            # (the shell execs the agent: one process, one pid, its group stopped on
            # release, asleep or not)
            args = ["/bin/sh", "-c", 'sleep "$0" && exec "$@"',
                    f"{self.config.start_delay:.3f}", *args]
        env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        # Recorded before it starts (pid not known yet): an owner killed right after
        # the spawn leaves a record, and the process is then found by its state dir.
        pending = InstanceRecord(
            id=_instance_id(grant.name), cluster=self.config.cluster, template=shape.name,
            request=request_id, host=grant.name, pid=0, process_start=0, started=time.time(),
        )
        self.files.save(pending)
        try:
            process, child = spawn(args, host_dir, host_dir / "agent.log", env)
        except OSError as err:
            raise ProviderError("unavailable",
                                f"cannot start the agent of {grant.name}: {err}") from err
        self._children.append(child)
        record = msgspec.structs.replace(pending, pid=process.pid, process_start=process.start)
        self.files.save(record)
        return record

    def _instance(self, record: InstanceRecord) -> Instance:
        return Instance(
            id=record.id, cluster=record.cluster, template=record.template,
            request=record.request, host=record.host,
            state="running" if self._process(record).alive() else "gone",
            started=record.started,
        )

    def _process(self, record: InstanceRecord) -> Process:
        if record.pid == 0:  # its owner died between recording and starting it
            return find(str(self.files.host_dir(record.host) / "agent"))
        return Process(record.pid, record.process_start)

    def _reap(self) -> None:
        """Collect the exit status of agents this object started (no zombies)."""
        self._children = [child for child in self._children if child.poll() is None]

    # ------------------------------------------------------------ tokens
    def borrow(self, pool: str, amount: float) -> float:
        """Up to `amount` tokens: what the pool has left (maybe 0)."""
        size = self._pool_size(pool, amount)
        with self.files.locked():
            lent = self.files.lent()
            granted = max(0.0, min(amount, size - lent.get(pool, 0.0)))
            if granted > 0:
                lent[pool] = lent.get(pool, 0.0) + granted
                self.files.save_lent(lent)
        return granted

    def lent(self) -> dict[str, float]:
        with self.files.locked():
            return {pool: amount for pool, amount in self.files.lent().items() if amount > 0}

    def give_back(self, pool: str, amount: float) -> None:
        self._pool_size(pool, amount)
        with self.files.locked():
            lent = self.files.lent()
            have = lent.get(pool, 0.0)
            if amount > have + EPSILON:
                raise ProviderError("request", f"cannot give back {amount:g} tokens of "
                                    f"{pool}: {have:g} borrowed")
            lent[pool] = max(0.0, have - amount)
            self.files.save_lent(lent)

    def _pool_size(self, pool: str, amount: float) -> float:
        """The pool's size, once the pool and the amount are known to be valid."""
        return lent_pool(self.config.pools, pool, amount, f"pool {pool}: not a local pool",
                         "local pools")


def _instance_id(host: str) -> str:
    return f"local-{host}"


def _flag_value(value: ResourceValue) -> str:
    """A resource value as `xce agent --resource` reads it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(float(value))


def _xce_command() -> str:
    """The `xce` script next to this interpreter, else the one on PATH."""
    script = Path(sys.executable).with_name("xce")
    found = str(script) if script.exists() else shutil.which("xce")
    if found is None:
        raise ProviderError("unavailable",
                            f"cannot find the xce command (next to {sys.executable} or on PATH)")
    return found
