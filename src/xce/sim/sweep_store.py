"""A sweep's results directory (FORMATS.md, "Policy sweep"; docs/sweeps.md):

* `DIR/results.csv`: a row per cell: `workload`, `seed`, one column per axis (named by
  its path), the summary's figures (a per-template mapping one column per template,
  `host_hours.cloud`), then `cell` (its number) and `error` (the first line of a failed
  cell's error, else empty);
* `DIR/cells/<n>.json`: each cell's summary (as `xce sim run --json` prints it);
* `DIR/cells/<n>.error`: a failed cell's error (its traceback);
* `DIR/cells/<n>.jsonl.gz`: each cell's recording, with `--record`;
* `DIR/sweep.json`: the manifest, each cell's inputs and their digest (`key`);
* `DIR/.lock`: held (flock) by the sweep running there: one at a time per directory.

Every file is written atomically (a temporary file renamed), so a sweep killed at any
moment leaves each cell done or not done, never half written. A re-run runs only the
cells not done: a cell is done when its summary exists, the manifest gave it the same
key (same cluster after the axes, workload content, window and seed), and with
`--record` its recording exists; a cell whose inputs changed is forgotten first.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from xce.atomic_json import write_atomic, write_bytes_atomic
from xce.sim.compare import numbers
from xce.sim.sweep_cells import CellOutcome
from xce.sim.sweep_grid import Cell
from xce.sim.sweep_spec import Sweep

MANIFEST = "sweep.json"
RESULTS = "results.csv"
LOCK = ".lock"


class SweepBusy(RuntimeError):
    """Another sweep is running in the same directory."""
_SUFFIXES = (".json", ".error", ".jsonl.gz")


class SweepDir:
    """The results directory of one sweep."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cells = root / "cells"

    def summary_path(self, n: int) -> Path:
        return self.cells / f"{n}.json"

    def error_path(self, n: int) -> Path:
        return self.cells / f"{n}.error"

    def record_path(self, n: int) -> Path:
        return self.cells / f"{n}.jsonl.gz"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory for one sweep (SweepBusy when another holds it; the lock
        goes with the process, however it ends)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SweepBusy(f"{self.root} is in use by another `xce sim sweep`") from None
            yield

    def prepare(self, sweep: Sweep, grid: list[Cell], record: bool) -> list[Cell]:
        """Forget the cells whose inputs changed, write the manifest, and return the
        cells still to run."""
        self.cells.mkdir(parents=True, exist_ok=True)
        for leftover in self.cells.glob(".*"):  # a killed run's temporary files
            leftover.unlink()
        before = self._keys()
        for n in self._numbers():
            if n >= len(grid) or grid[n].key != before.get(n):
                self._forget(n)
        write_atomic(self.root / MANIFEST, _manifest(sweep, grid))
        return [cell for cell in grid if not self.done(cell.n, record)]

    def done(self, n: int, record: bool) -> bool:
        """Whether cell `n` has its summary (and its recording, when recording)."""
        return self.summary_path(n).is_file() and (not record or self.record_path(n).is_file())

    def save(self, outcome: CellOutcome) -> None:
        """Keep a cell's summary (forgetting an earlier error) or its error."""
        if outcome.summary is not None:
            write_atomic(self.summary_path(outcome.n), outcome.summary)
            self.error_path(outcome.n).unlink(missing_ok=True)
        else:
            write_bytes_atomic(self.error_path(outcome.n), (outcome.error or "").encode())

    def summary(self, n: int) -> dict[str, Any] | None:
        """Cell `n`'s summary, None when it has none."""
        try:
            found = json.loads(self.summary_path(n).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return found if isinstance(found, dict) else None

    def error(self, n: int) -> str | None:
        """Cell `n`'s error, None when it has none."""
        try:
            return self.error_path(n).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def write_table(self, sweep: Sweep, grid: list[Cell]) -> Path:
        """`results.csv` of every cell (those not done have empty figures)."""
        rows = []
        for cell in grid:
            figures = numbers(self.summary(cell.n) or {})
            error = self.error(cell.n)
            rows.append((cell, figures, error.strip().splitlines()[-1] if error else ""))
        fields: dict[str, None] = {}
        for _, figures, _ in rows:
            fields.update(dict.fromkeys(figures))
        stream = io.StringIO()
        writer = csv.writer(stream, lineterminator="\n")
        axes = [axis.path for axis in sweep.axes]
        writer.writerow(["workload", "seed", *axes, *fields, "cell", "error"])
        for cell, figures, error in rows:
            writer.writerow([cell.workload, cell.seed, *(show(cell.values[a]) for a in axes),
                             *(figures.get(name, "") for name in fields), cell.n, error])
        path = self.root / RESULTS
        write_bytes_atomic(path, stream.getvalue().encode())
        return path

    def _numbers(self) -> set[int]:
        """The numbers of the cells that have a file."""
        return {int(path.name.split(".")[0]) for path in self.cells.iterdir()
                if path.name.split(".")[0].isdigit()}

    def _keys(self) -> dict[int, str]:
        """Each cell's key in the manifest of an earlier run (none when unreadable)."""
        try:
            manifest = json.loads((self.root / MANIFEST).read_text(encoding="utf-8"))
            return {int(entry["cell"]): str(entry["key"]) for entry in manifest["cells"]}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def _forget(self, n: int) -> None:
        for suffix in _SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                (self.cells / f"{n}{suffix}").unlink()


def show(value: object) -> str:
    """An axis value in the table: a string as is, anything else as JSON."""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


def _manifest(sweep: Sweep, grid: list[Cell]) -> dict[str, Any]:
    return {
        "sweep": sweep.file,
        "base": sweep.base,
        "workloads": {w.name: {"path": w.path, "sha256": w.digest} for w in sweep.workloads},
        "window": msgspec.to_builtins(sweep.window),
        "axes": [axis.path for axis in sweep.axes],
        "cells": [{"cell": cell.n, "workload": cell.workload, "seed": cell.seed,
                   "values": cell.values, "key": cell.key} for cell in grid],
    }
