"""The HTML of the simulator's pages (a run's report, `xce sim compare --report`):
one title, tables of summary figures in human units, the charts as relative PNG
paths with a caption each, plain HTML with no external assets (open it from disk)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xce.sim.report_text import human_value

STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 64em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1em; }
th, td { padding: 0.2em 0.8em; border-bottom: 1px solid #ddd; text-align: left; }
td.value { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.5em 0; }
img { max-width: 100%; }
figcaption { color: #555; }
p.note { color: #555; }
"""


def page(title: str, body: str) -> str:
    """A whole page: `title` once as its heading (and in the head for the tab)."""
    escaped = html.escape(title)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escaped}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{escaped}</h1>\n{body}</body>\n</html>\n"
    )


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table: the first cell of a row is its heading, the others are values."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = [f"<tr>{head}</tr>"]
    for row in rows:
        cells = "".join(f"<td class=\"value\">{html.escape(c)}</td>" for c in row[1:])
        lines.append(f"<tr><th>{html.escape(row[0])}</th>{cells}</tr>")
    return "<table>\n" + "\n".join(lines) + "\n</table>\n"


def summary_table(summary: Mapping[str, Any]) -> str:
    """The summary, one row per figure, in human units."""
    return table(("figure", "value"),
                 ((str(k), human_value(v, str(k))) for k, v in summary.items()))


def cost_table(summary: Mapping[str, Any], prices: Mapping[str, float]) -> str:
    """Per template its host-hours, price per host-hour and cost, then the total
    (the summary's `cost` and `cost_total`); nothing when no template has a price."""
    cost = summary.get("cost")
    if not prices or not isinstance(cost, dict):
        return ""
    hours = summary.get("host_hours", {})
    rows = [(name, f"{hours.get(name, 0.0):,.3f}", f"{prices.get(name, 0.0):,.3f}",
             f"{value:,.3f}") for name, value in cost.items()]
    rows.append(("total", "", "", f"{summary.get('cost_total', 0.0):,.3f}"))
    return "<h2>Cost</h2>\n" + table(
        ("template", "host-hours", "price per host-hour", "cost"), rows)


def figures(charts: Sequence[tuple[str, str]], missing: Sequence[str] = ()) -> str:
    """The charts (file, caption) as figures, and a note of those not drawn."""
    out = "".join(
        f"<figure><img src=\"{html.escape(name)}\" alt=\"{html.escape(caption)}\">"
        f"<figcaption>{html.escape(caption)}</figcaption></figure>\n"
        for name, caption in charts
    )
    if missing:
        out += f"<p class=\"note\">Not drawn: {html.escape('; '.join(missing))}.</p>\n"
    return out
