"""The binned series of a run as `series.json` holds them (written by the report,
read by `xce sim compare`), and the summary as `summary.json` holds it; without
numpy or matplotlib, so that reading them costs the command line nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

# The layers of the hosts chart, bottom to top, and the sampled fields they come from
LAYERS = ("static", "busy", "idle", "draining", "in_flight")
MEANS = ("pending", "running", "tokens_borrowed", "tokens_used")


class RunSeries(msgspec.Struct, kw_only=True):
    """A run's binned series: `time` the bins' starts (s, trace time) and `width`
    their width (s); per bin the mean hosts of each layer of LAYERS, the mean and
    the largest number of hosts wanted (hosts up or in flight plus the new hosts the
    session's demand asks for), the mean pending, running, borrowed and used tokens, the
    cost spent by the bin's end; the wait time at each of QUANTILES fractions."""

    title: str
    time: list[float]
    width: float
    layers: dict[str, list[float]]
    wanted: list[float]
    wanted_max: list[float]
    means: dict[str, list[float]]
    cost: list[float]
    wait_quantiles: list[float]
    templates: bool = False  # the run had templates (provisioned layers)
    priced: bool = False  # some template had a price
    countables: bool = False  # the run had pools to borrow tokens from

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)


def load_series(path: Path) -> RunSeries:
    """A `series.json` as `write_report` writes it."""
    return msgspec.json.decode(path.read_bytes(), type=RunSeries)


def summary_json(summary: Mapping[str, Any]) -> bytes:
    """A summary as `xce sim run --json` prints it."""
    return msgspec.json.encode(dict(summary))
