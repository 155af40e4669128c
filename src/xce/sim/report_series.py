"""The report's time series, binned: a run's per-session samples cut into `BINS`
equal spans of simulated time, each span's time-weighted mean (and, for the hosts
wanted, its largest value), the shape that plots and `xce sim compare` read.

A sample holds from its session to the next one (a step), so a bin's mean is the
integral of the step over the bin divided by its width: means add up, and the host
layers of a bin (static, provisioned busy, provisioned idle, draining, in flight)
sum to the mean of all the hosts in it, whatever the bin width. `series.json` of a
report directory is `RunSeries` as JSON (`to_json`, `load_series`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from xce.sim.series_format import MEANS, RunSeries

BINS = 400  # bins over a run's span: about two pixels each on a 9-inch figure
QUANTILES = 201  # points of the wait distribution kept for the overlays (0 to 1)

FloatArray = npt.NDArray[np.float64]


def bin_edges(time: FloatArray, bins: int = BINS) -> FloatArray:
    """`bins` + 1 equal edges from the first sample to the last (one bin of width 0
    when the run has a single sample time)."""
    start, end = float(time[0]), float(time[-1])
    return np.linspace(start, end, bins + 1) if end > start else np.array([start, start])


def bin_means(time: FloatArray, values: FloatArray, edges: FloatArray) -> FloatArray:
    """Per bin the time-weighted mean of the step through (`time`, `values`) (each
    value holds until the next sample); a bin of width 0 takes the last value."""
    if edges[-1] <= edges[0]:
        return np.full(len(edges) - 1, values[-1])
    integral = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(time))))
    k = np.clip(np.searchsorted(time, edges, side="right") - 1, 0, len(time) - 1)
    at_edges = integral[k] + values[k] * (edges - time[k])
    return np.asarray(np.diff(at_edges) / np.diff(edges), dtype=np.float64)


def bin_max(time: FloatArray, values: FloatArray, edges: FloatArray) -> FloatArray:
    """Per bin the largest value the step takes in it: the value holding at the
    bin's start and every sample before its end."""
    last = len(time) - 1
    start = np.clip(np.searchsorted(time, edges[:-1], side="right") - 1, 0, last)
    end = np.searchsorted(time, edges[1:], side="left")
    end = np.maximum(end, start + 1)
    if edges[-1] <= edges[0]:
        end[:] = last + 1
    padded = np.append(values, 0.0)
    pairs = np.column_stack((start, end)).ravel()
    return np.asarray(np.maximum.reduceat(padded, pairs)[::2], dtype=np.float64)


def host_layers(columns: Mapping[str, FloatArray]) -> dict[str, FloatArray]:
    """The hosts of each layer per sample, no host in two: static; provisioned open
    and running something (busy) or nothing (idle); drained and not given back
    (draining); requested and not joined (in flight)."""
    return {
        "static": columns["static_hosts"],
        "busy": columns["provisioned_hosts"] - columns["idle_hosts"],
        "idle": columns["idle_hosts"],
        "draining": columns["closed_hosts"],
        "in_flight": columns["in_flight_hosts"],
    }


def wait_quantiles(waits: Sequence[float], count: int = QUANTILES) -> list[float]:
    """The waits at `count` evenly spaced fractions from 0 to 1 (empty: no waits)."""
    if not waits:
        return []
    values = np.sort(np.asarray(waits, dtype=np.float64))
    return [float(v) for v in np.quantile(values, np.linspace(0.0, 1.0, count))]


def _listed(values: FloatArray) -> list[float]:
    return [round(float(v), 4) for v in values]


def run_series(
    title: str, columns: Mapping[str, Sequence[float]], waits: Sequence[float], *,
    templates: bool, priced: bool, countables: bool, bins: int = BINS,
) -> RunSeries | None:
    """The binned series of a run's samples (TimeSeries.columns); None without any."""
    arrays = {name: np.asarray(col, dtype=np.float64) for name, col in columns.items()}
    time = arrays["time"]
    if not len(time):
        return None
    edges = bin_edges(time, bins)
    layers = host_layers(arrays)
    wanted = (arrays["static_hosts"] + arrays["provisioned_hosts"]
              + arrays["in_flight_hosts"] + arrays["demand_hosts"])
    cost = np.interp(edges[1:], time, arrays["cost"])
    return RunSeries(
        title=title,
        time=_listed(edges[:-1]),
        width=float(edges[1] - edges[0]),
        layers={name: _listed(bin_means(time, v, edges)) for name, v in layers.items()},
        wanted=_listed(bin_means(time, wanted, edges)),
        wanted_max=_listed(bin_max(time, wanted, edges)),
        means={name: _listed(bin_means(time, arrays[name], edges)) for name in MEANS},
        cost=_listed(cost),
        wait_quantiles=wait_quantiles(waits),
        templates=templates, priced=priced, countables=countables,
    )
