"""Simulation runs side by side (`xce sim compare RUN... [--report DIR]`, `xce sim
run --baseline RUN`): every numeric figure of their summaries (FORMATS.md's
simulator summary, per-template mappings one row per template) with each run's
difference from the first, absolute and in per cent; and overlaid charts of the runs
that have binned series (a report directory's `series.json`).

A RUN is a summary JSON file (`xce sim run --json > a.json`, or a report's
`summary.json`) or a report directory (its `summary.json`); its series are the
`series.json` beside the summary, when there is one. A run is named after its file
(`a.json`: `a`) or, for a report's `summary.json`, after its directory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from xce.sim.report_html import figures, page, table
from xce.sim.report_text import human_difference, human_value
from xce.sim.series_format import RunSeries, load_series


class CompareError(ValueError):
    """A run that cannot be read: the message names the file."""


class Run(msgspec.Struct):
    """One run: its name, its summary, its binned series if any."""

    label: str
    summary: dict[str, Any]
    series: RunSeries | None = None


def load_run(path: Path) -> Run:
    """A run from a summary JSON file or a report directory."""
    file = path / "summary.json" if path.is_dir() else path
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CompareError(f"{file}: cannot read a summary: {err}") from None
    if not isinstance(summary, dict):
        raise CompareError(f"{file}: not a summary (a JSON object)")
    label = file.parent.name if file.name == "summary.json" else file.name.removesuffix(".json")
    series_file = file.parent / "series.json"
    series = None
    if series_file.is_file():
        try:
            series = load_series(series_file)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise CompareError(f"{series_file}: {err}") from None
    return Run(label or str(file), summary, series)


def unique_labels(runs: Sequence[Run]) -> list[Run]:
    """The runs, a name given twice followed by its position (`a`, `a#2`)."""
    seen: set[str] = set()
    out = []
    for position, run in enumerate(runs, 1):
        label = run.label if run.label not in seen else f"{run.label}#{position}"
        seen.add(label)
        out.append(msgspec.structs.replace(run, label=label))
    return out


def numbers(summary: Mapping[str, Any]) -> dict[str, int | float]:
    """The numeric figures of a summary, a mapping's as `key.name`."""
    out: dict[str, int | float] = {}
    for key, value in summary.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            out[key] = value
        elif isinstance(value, dict):
            for name, inner in value.items():
                if isinstance(inner, int | float) and not isinstance(inner, bool):
                    out[f"{key}.{name}"] = inner
    return out


def difference(first: int | float | None, other: int | float | None, key: str) -> str:
    """`other` - `first` in the units of `key`, and in per cent of `first`."""
    if first is None or other is None:
        return "-"
    delta = other - first
    text = human_difference(delta, key, isinstance(delta, int))
    if not delta:
        return text
    if not first:
        return f"{text} (new)"
    return f"{text} ({delta / abs(first) * 100:+.1f} %)"


def comparison(runs: Sequence[Run]) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the comparison: per figure each run's value, then
    each later run's difference from the first."""
    figures_of = [numbers(run.summary) for run in runs]
    keys: dict[str, None] = {}
    for each in figures_of:
        keys.update(dict.fromkeys(each))
    first = runs[0].label
    header = ["figure", *(run.label for run in runs),
              *(f"{run.label} - {first}" for run in runs[1:])]
    rows = []
    for key in keys:
        values = [each.get(key) for each in figures_of]
        shown = [human_value(v, key) if v is not None else "-" for v in values]
        rows.append([key, *shown, *(difference(values[0], v, key) for v in values[1:])])
    return header, rows


CAPTIONS = {
    "hosts.png": "Hosts up (static and provisioned, draining included) of each run, "
                 "mean per bin.",
    "pending.png": "Pending jobs of each run, mean per bin.",
    "waits.png": "The wait time of finished jobs of each run as a cumulative "
                 "distribution: the fraction of jobs that waited at most so long.",
}


def write_comparison(directory: Path, runs: Sequence[Run]) -> list[str]:
    """The comparison's page (`index.html`, the table) and the overlays of the runs
    with series (hosts.png, pending.png, waits.png); the files drawn."""
    from xce.sim import report_plots as plots  # (matplotlib: only when drawing)

    directory.mkdir(parents=True, exist_ok=True)
    with_series = [run.series and msgspec.structs.replace(run.series, title=run.label)
                   for run in runs]
    drawn = [s for s in with_series if s is not None]
    overlays = {"hosts.png": plots.overlay_hosts, "pending.png": plots.overlay_pending}
    if any(s.wait_quantiles for s in drawn):
        overlays["waits.png"] = plots.overlay_waits
    charts = []
    for name, draw in overlays.items() if drawn else ():
        draw(drawn, directory / name)
        charts.append((name, CAPTIONS[name]))
    missing = [f"{run.label} (no series.json beside its summary)"
               for run, s in zip(runs, with_series, strict=True) if s is None]
    header, rows = comparison(runs)
    body = (f"<p>{len(runs)} runs, differences against {runs[0].label}.</p>\n"
            + table(header, rows)
            + figures(charts, [f"overlays of {m}" for m in missing]))
    title = "XCE simulations compared: " + ", ".join(run.label for run in runs)
    (directory / "index.html").write_text(page(title, body), encoding="utf-8")
    return [name for name, _ in charts]
