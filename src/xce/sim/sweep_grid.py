"""The cells of a sweep: one per combination of workload, axis values and seed that no
`exclude` entry removes, numbered from 0 in that order (workloads outermost, then the
axes in the file's order, the seed innermost).

Each cell's cluster is the base cluster file's document with the cell's values set at
their key paths, checked by the cluster file loader (`xce.config.build_config`) before
any cell runs: first the base alone, then each axis value alone on the base (a wrong
value is reported at its line of the sweep file), then each combination.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from xce.config import ConfigError, build_config
from xce.config.fields import describe
from xce.model.cluster import ClusterConfig
from xce.sim.sweep_spec import SEED, WORKLOAD, Axis, Sweep, SweepWorkload, same_value


class Cell(msgspec.Struct, frozen=True):
    """One simulation of the sweep and what it depends on."""

    n: int
    workload: str  # the workload's name as the sweep file gives it
    seed: int
    values: dict[str, Any]  # axis path -> value, in the axes' order
    config: ClusterConfig
    key: str  # a digest of the inputs: cluster, workload content, window, seed


class _PathError(ValueError):
    """A key path that leads nowhere in the cluster document."""


def cells(sweep: Sweep) -> list[Cell]:
    """The sweep's cells, each cluster checked (ConfigError naming the sweep file; the
    base's own errors name the base)."""
    build_config(sweep.base_doc, sweep.base)
    for axis in sweep.axes:
        for index in range(len(axis.values)):
            _check_value(sweep, axis, index)
    out: list[Cell] = []
    for workload, values, seed in _combinations(sweep):
        if _excluded(sweep, workload.name, values, seed):
            continue
        config = _combined(sweep, values)
        used = config.simulation.seed if seed is None else seed
        out.append(Cell(len(out), workload.name, used, values, config,
                        _key(sweep, workload, config, used)))
    if not out:
        raise ConfigError(sweep.file, sweep.exclude_line, "exclude",
                          "every combination is excluded: no cell to run")
    return out


def _combinations(sweep: Sweep) -> Iterator[tuple[SweepWorkload, dict[str, Any], int | None]]:
    seeds: tuple[int | None, ...] = sweep.seeds or (None,)
    for workload in sweep.workloads:
        for chosen in itertools.product(*(axis.values for axis in sweep.axes)):
            values = {axis.path: value for axis, value in zip(sweep.axes, chosen, strict=True)}
            for seed in seeds:
                yield workload, values, seed


def _excluded(sweep: Sweep, workload: str, values: dict[str, Any], seed: int | None) -> bool:
    facts = {WORKLOAD: workload, SEED: seed, **values}
    return any(
        all(any(same_value(facts[key], one) for one in allowed) for key, allowed in entry.items())
        for entry in sweep.exclude
    )


def with_values(doc: object, values: Iterable[tuple[str, Any]]) -> tuple[object, list[str]]:
    """A copy of the cluster document `doc` with each value set at its dotted key path
    (missing mappings on the way are created; a number in the path indexes a list),
    and each path as the loader names fields (`catalog.templates[0].max`)."""
    root = copy.deepcopy(doc) if doc is not None else {}
    return root, [_set(root, path, copy.deepcopy(value)) for path, value in values]


def _set(root: object, path: str, value: object) -> str:
    node, field = root, ""
    segments = path.split(".")
    for depth, segment in enumerate(segments):
        last = depth == len(segments) - 1
        if isinstance(node, list):
            if not segment.isdigit() or int(segment) >= len(node):
                raise _PathError(f"{field} has {len(node)} item(s): no item {segment!r}")
            index = int(segment)
            field = f"{field}[{index}]"
            if last:
                node[index] = value
            node = node[index]
        elif isinstance(node, dict):
            field = f"{field}.{segment}" if field else segment
            if last:
                node[segment] = value
            elif node.get(segment) is None:
                node[segment] = {}
            node = node[segment]
        else:
            raise _PathError(f"{field} is {describe(node)}, not a mapping or a list")
    return field


def _check_value(sweep: Sweep, axis: Axis, index: int) -> None:
    """The base with this one value set is a valid cluster, else the error at the
    value's line (an unknown key path at the axis's own line)."""
    value = axis.values[index]
    try:
        doc, (field,) = with_values(sweep.base_doc, [(axis.path, value)])
        build_config(doc, sweep.base)
    except _PathError as err:
        raise ConfigError(sweep.file, axis.line, f"axes.{axis.path}",
                          f"unknown key path: {err}") from None
    except ConfigError as err:
        if err.message.startswith("unknown key") and _within(field, err.field):
            raise ConfigError(sweep.file, axis.line, f"axes.{axis.path}",
                              f"unknown key path: the cluster file has no key "
                              f"{err.field!r}") from None
        where = "" if err.field == field else f"{err.field}: "
        raise ConfigError(sweep.file, axis.value_lines[index], f"axes.{axis.path}[{index}]",
                          f"{where}{err.message}") from None


def _within(field: str, outer: str) -> bool:
    """Whether `field` is `outer` or inside it."""
    return field == outer or field.startswith((f"{outer}.", f"{outer}["))


def _combined(sweep: Sweep, values: dict[str, Any]) -> ClusterConfig:
    doc, _ = with_values(sweep.base_doc, values.items())
    try:
        return build_config(doc, sweep.base)
    except ConfigError as err:
        shown = ", ".join(f"{path}={value!r}" for path, value in values.items())
        raise ConfigError(sweep.file, sweep.line, "axes",
                          f"the combination {shown} is refused: {err.field}: "
                          f"{err.message}") from None


def _key(sweep: Sweep, workload: SweepWorkload, config: ClusterConfig, seed: int) -> str:
    inputs = msgspec.json.encode(
        {"config": config, "workload": workload.digest, "window": sweep.window, "seed": seed}
    )
    return hashlib.sha256(inputs).hexdigest()
