"""A policy sweep file (FORMATS.md, "Policy sweep"; docs/sweeps.md): read and checked.

```yaml
base: cluster.yaml                 # a cluster file, relative to this file
workloads: [traces/KTH-SP2-1996-2.1-cln.swf.gz]
first: 3000                        # optional, as `xce sim run` (also start, end, load)
axes:                              # any key of the cluster file by its dotted path
  catalog.idle_time: [300, 600]
  policy.persistence: [0, 60]
seeds: [1, 2]
exclude:                           # optional: combinations not to run
  - {catalog.idle_time: 600, policy.persistence: 0}
```

Every problem is a ConfigError naming the file, the line and the key. This module
reads the file only; `xce.sim.sweep_grid` applies the axes to the base cluster.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import msgspec

from xce.config import load_yaml_file
from xce.config.fields import MapReader, Place, as_int, as_list, as_text, describe

SWEEP_KEYS = ("base", "workloads", "first", "start", "end", "load", "axes", "seeds", "exclude")
# The keys an `exclude` entry may name besides the axes.
WORKLOAD: str = "workload"
SEED: str = "seed"


class Window(msgspec.Struct, frozen=True):
    """The jobs of each workload a cell runs: `xce sim run`'s --start, --end,
    --first and --load."""

    start: float | None = None
    end: float | None = None
    first: int | None = None
    load: float = 1.0


class SweepWorkload(msgspec.Struct, frozen=True):
    """A workload of the sweep: its name as written, its path, its content's digest."""

    name: str
    path: str
    digest: str
    line: int


class Axis(msgspec.Struct, frozen=True):
    """One axis: a cluster file key by its dotted path and the values it takes."""

    path: str
    values: tuple[Any, ...]
    line: int  # the line of the key
    value_lines: tuple[int, ...]


class Sweep(msgspec.Struct):
    """A sweep file, read and checked (its axes not yet applied to the base)."""

    file: str
    base: str  # the base cluster file's path
    base_doc: Any  # its loaded document (xce.config.load_yaml)
    workloads: tuple[SweepWorkload, ...]
    window: Window
    axes: tuple[Axis, ...]
    seeds: tuple[int, ...]  # () when not given: each cell's simulation.seed
    exclude: tuple[dict[str, tuple[Any, ...]], ...]
    line: int  # the line of `axes:` (the document's when absent)
    exclude_line: int  # the line of `exclude:` (likewise)


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and check a sweep file (ConfigError naming file, line and key)."""
    filename = os.fspath(path)
    doc = load_yaml_file(filename)
    root = Place(filename, 1, "")
    if doc is None:
        root.fail("the sweep file is empty (expected a mapping)")
    top = MapReader(doc, root, SWEEP_KEYS)
    here = Path(filename).parent
    base_text = top.text("base")
    base = os.path.normpath(here / base_text)
    base_doc = load_yaml_file(base, f"the base cluster file of {filename}")
    window = Window(
        start=top.optional_number("start"), end=top.optional_number("end"),
        first=top.optional_integer("first", minimum=0),
        load=top.number("load", 1.0, positive=True),
    )
    workloads = _workloads(top, here)
    axes = _axes(top)
    seeds = _seeds(top)
    if seeds and any(axis.path == "simulation.seed" for axis in axes):
        top.value_place("axes").key("simulation.seed").fail(
            "give the seeds in `seeds:`, not as an axis as well")
    known = {WORKLOAD: tuple(w.name for w in workloads),
             **({SEED: seeds} if seeds else {}), **{axis.path: axis.values for axis in axes}}
    return Sweep(
        file=filename, base=base, base_doc=base_doc, workloads=workloads, window=window,
        axes=axes, seeds=seeds, exclude=_exclude(top, known),
        line=top.value_place("axes").line, exclude_line=top.value_place("exclude").line,
    )


def _unique(items: list[tuple[object, Place]], what: str) -> None:
    seen: list[object] = []
    for value, place in items:
        if any(same_value(value, other) for other in seen):
            place.fail(f"{what} {value!r} is given twice")
        seen.append(value)


def same_value(a: object, b: object) -> bool:
    """Whether two values of a sweep file are the same (1 and 1.0 are, 1 and true not)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _workloads(top: MapReader, here: Path) -> tuple[SweepWorkload, ...]:
    value, place = top.required("workloads")
    items = as_list(value, place)
    if not items:
        place.fail("give at least one workload")
    _unique(items, "workload")
    workloads = []
    for item, item_place in items:
        name = as_text(item, item_place)
        path = os.path.normpath(here / name)
        try:
            with open(path, "rb") as stream:
                digest = hashlib.file_digest(stream, "sha256").hexdigest()
        except OSError as err:
            item_place.fail(f"cannot read {path}: {err.strerror or err}")
        workloads.append(SweepWorkload(name, path, digest, item_place.line))
    return tuple(workloads)


def _axes(top: MapReader) -> tuple[Axis, ...]:
    section = top.section("axes")
    if section is None:
        return ()
    axes = MapReader(*section)
    out = []
    for key, value, place in axes.items():
        key_place = axes.key_place(key)
        if not isinstance(key, str) or not all(key.split(".")):
            key_place.fail(f"expected a dotted key path such as catalog.idle_time, "
                           f"got {describe(key)}")
        items = as_list(value, place)
        if not items:
            place.fail("an axis needs at least one value")
        _unique(items, "value")
        out.append(Axis(key, tuple(item for item, _ in items), key_place.line,
                        tuple(item_place.line for _, item_place in items)))
    return tuple(out)


def _seeds(top: MapReader) -> tuple[int, ...]:
    section = top.section("seeds")
    if section is None:
        return ()
    items = as_list(*section)
    if not items:
        section[1].fail("give at least one seed (or leave seeds out)")
    _unique(items, "seed")
    return tuple(as_int(item, place, "seed") for item, place in items)


def _exclude(top: MapReader, known: dict[str, tuple[Any, ...]]
             ) -> tuple[dict[str, tuple[Any, ...]], ...]:
    """`exclude:` entries: mappings of an axis path (or `workload`, `seed`) to a value
    or a list of values; a cell matching every key of an entry is not run. `known`:
    the values each key may take."""
    section = top.section("exclude")
    if section is None:
        return ()
    entries = []
    for item, item_place in as_list(*section):
        entry = MapReader(item, item_place)
        if not entry.mapping:
            item_place.fail("an exclude entry needs at least one key")
        matched: dict[str, tuple[Any, ...]] = {}
        for key, value, place in entry.items():
            name = str(key)
            if name not in known:
                entry.key_place(key).fail(
                    f"not an axis of this sweep (it has: {', '.join(known)})")
            values = tuple(value) if isinstance(value, list) else (value,)
            for one in values:
                if not any(same_value(one, allowed) for allowed in known[name]):
                    place.fail(f"{one!r} is not a value of {name}")
            matched[name] = values
        entries.append(matched)
    return tuple(entries)
