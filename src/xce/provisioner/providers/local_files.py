"""The work directory of the local provider (docs/providers.md):

    WORK/cluster                  the cluster the directory belongs to
    WORK/lock                     locked while an instance or a pool changes
    WORK/instances/<id>.json      one record per instance, replaced atomically
    WORK/pools.json               tokens lent, by pool key
    WORK/hosts/<host>/join.token  the host's join token (0600), until it is released
    WORK/hosts/<host>/agent.log   the agent's output
    WORK/hosts/<host>/agent/      the agent's --state-dir
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import msgspec

from xce.atomic_json import write_atomic
from xce.provisioner.provider import ProviderError


class InstanceRecord(msgspec.Struct, frozen=True):
    """An instance as started: what it is for, and its agent process."""

    id: str
    cluster: str
    template: str
    request: str
    host: str
    pid: int
    process_start: int  # clock ticks since boot (/proc/PID/stat), against pid reuse
    started: float  # epoch seconds


class LockedDirectory:
    """A provider's work directory, changed one process at a time under `root/lock`
    (the local provider's and the script provider's)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory's lock (one change at a time, across processes)."""
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


class LocalFiles(LockedDirectory):
    """The files of one work directory, which serves one cluster only."""

    def __init__(self, root: Path, cluster: str) -> None:
        super().__init__(root)
        self.instance_dir = root / "instances"
        self.instance_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._pools = root / "pools.json"
        self._claim(cluster)

    def _claim(self, cluster: str) -> None:
        marker = self.root / "cluster"
        with self.locked():
            if not marker.exists():
                marker.write_text(cluster + "\n")
        owner = marker.read_text().strip()
        if owner != cluster:
            raise ProviderError(
                "request", f"{self.root} holds the instances of cluster {owner}, not {cluster}")

    def records(self) -> dict[str, InstanceRecord]:
        """Every instance record, by instance id."""
        found = {}
        for path in self.instance_dir.glob("*.json"):
            record = msgspec.json.decode(path.read_bytes(), type=InstanceRecord)
            found[record.id] = record
        return found

    def save(self, record: InstanceRecord) -> None:
        write_atomic(self.instance_dir / f"{record.id}.json", record)

    def host_dir(self, host: str) -> Path:
        path = self.root / "hosts" / host
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def token_file(self, host: str) -> Path:
        return self.root / "hosts" / host / "join.token"

    def write_token(self, host: str, token: str) -> Path:
        """The host's join token in a file only this user may read."""
        path = self.token_file(host)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # in case it existed with another mode
            os.write(fd, f"{token}\n".encode())
        finally:
            os.close(fd)
        return path

    def lent(self) -> dict[str, float]:
        """Tokens lent, by pool key."""
        try:
            return msgspec.json.decode(self._pools.read_bytes(), type=dict[str, float])
        except FileNotFoundError:
            return {}

    def save_lent(self, lent: dict[str, float]) -> None:
        write_atomic(self._pools, lent)
