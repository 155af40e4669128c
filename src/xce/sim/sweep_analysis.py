"""What a sweep's cells say (`xce sim sweep --report`): the configurations (a workload
and one value per axis) with their figures averaged over the seeds, ranked by an
objective, the Pareto front of mean wait against cost, and each axis's effect.

The cost is the summaries' `cost_total` when a template has a price (any cell's
summary has it), else the host-hours of all templates. Configurations are compared
only with those of the same workload: traces differ far more than policies do.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from xce.sim.compare import numbers
from xce.sim.sweep_grid import Cell
from xce.sim.sweep_spec import same_value

WAIT = "wait_mean"
PRICED = "cost_total"
HOURS = "host_hours"


class ObjectiveError(ValueError):
    """An objective that is not a figure of the cells' summaries."""


class Configuration(msgspec.Struct):
    """A workload and the axes' values, its figures averaged over the seeds it ran."""

    workload: str
    values: dict[str, Any]
    cells: list[int]  # its cells that have a summary
    objective: float
    wait: float
    cost: float
    pareto: bool = False


def cost_measure(summaries: Sequence[Mapping[str, Any]]) -> str:
    """`cost_total` when some template has a price, else `host_hours`."""
    return PRICED if any(PRICED in s for s in summaries) else HOURS


def cost_of(summary: Mapping[str, Any], measure: str) -> float:
    """A summary's cost: its `cost_total`, or its host-hours over all templates."""
    if measure == PRICED:
        return float(summary.get(PRICED, 0.0))
    return float(sum(summary.get(HOURS, {}).values()))


def configurations(grid: Sequence[Cell], summaries: Mapping[int, Mapping[str, Any]],
                   objective: str) -> list[Configuration]:
    """The configurations of the cells that have a summary, in the grid's order, the
    Pareto front marked (ObjectiveError when `objective` is no summary's figure)."""
    done = [summaries[cell.n] for cell in grid if cell.n in summaries]
    known = {name for summary in done for name in numbers(summary)}
    if done and objective not in known:
        raise ObjectiveError(f"--objective: {objective!r} is not a figure of the cells' "
                             f"summaries (they have: {', '.join(sorted(known))})")
    measure = cost_measure(done)
    groups: dict[str, list[Cell]] = {}
    for cell in grid:
        if cell.n in summaries:
            key = msgspec.json.encode([cell.workload, cell.values]).decode()
            groups.setdefault(key, []).append(cell)
    out = []
    for cells in groups.values():
        figures = [numbers(summaries[cell.n]) for cell in cells]
        out.append(Configuration(
            cells[0].workload, cells[0].values, [cell.n for cell in cells],
            objective=statistics.fmean(f.get(objective, 0.0) for f in figures),
            wait=statistics.fmean(f.get(WAIT, 0.0) for f in figures),
            cost=statistics.fmean(cost_of(summaries[cell.n], measure) for cell in cells),
        ))
    _mark_pareto(out)
    return out


def _mark_pareto(configs: Sequence[Configuration]) -> None:
    """On the front: no configuration of the same workload waits no longer and costs
    no more, and one of the two strictly less."""
    for config in configs:
        config.pareto = not any(
            other.workload == config.workload and other.wait <= config.wait
            and other.cost <= config.cost
            and (other.wait < config.wait or other.cost < config.cost)
            for other in configs
        )


def ranked(configs: Sequence[Configuration]) -> dict[str, list[Configuration]]:
    """Per workload (in the sweep's order) its configurations, lowest objective first."""
    out: dict[str, list[Configuration]] = {}
    for config in configs:
        out.setdefault(config.workload, []).append(config)
    return {name: sorted(group, key=lambda c: c.objective) for name, group in out.items()}


def axis_effect(configs: Sequence[Configuration], path: str, values: Sequence[Any]
                ) -> dict[str, list[tuple[float, float] | None]]:
    """Per workload, for each value of the axis, the mean objective and cost of the
    configurations with that value (None when none ran)."""
    out: dict[str, list[tuple[float, float] | None]] = {}
    for name, group in ranked(configs).items():
        effect: list[tuple[float, float] | None] = []
        for value in values:
            chosen = [c for c in group if same_value(c.values[path], value)]
            effect.append((statistics.fmean(c.objective for c in chosen),
                           statistics.fmean(c.cost for c in chosen)) if chosen else None)
        out[name] = effect
    return out
