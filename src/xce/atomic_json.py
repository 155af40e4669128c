"""JSON files replaced atomically and durably: a reader sees the old file or the new one,
never a part, and after a crash the new one if the write returned.

The drivers write such files: the agent (its job files, `xce.agent.jobfiles`), the
provisioner's providers (the local provider's instance records, the script provider's
state) and the simulator's sweeps (their results directory, `xce.sim.sweep_store`).
It lives here, beside the drivers and below none of them, so that none imports
another (docs/layers.md). Like `xce.tuning` it is for the drivers and the
CLI, not for the pure core.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec


def write_atomic(path: Path, value: object) -> None:
    """Write `value` as JSON: a temporary file, fsync, rename, fsync of the directory."""
    write_bytes_atomic(path, msgspec.json.encode(value))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` (any file: a table, a message) as `write_atomic` writes JSON."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
