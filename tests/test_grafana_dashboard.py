"""contrib/grafana/xce.json, the Grafana dashboard (docs/ui.md): every panel's query
names only metrics XCE exports, as a live controller started with `--metrics-listen`
serves them at /metrics; and the dashboard covers what issue 22 asks for."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import FAST, free_port, live_cluster, skip_unless_linux, wait_for

DASHBOARD = Path(__file__).parent.parent / "contrib" / "grafana" / "xce.json"
CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: cloud, provider: aws, slots: 4, max: 3, price: 0.5}
"""
# PromQL words that are not metric names: aggregations and functions are followed by
# "(" (dropped below); these are not.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
            "offset", "and", "or", "unless", "inf", "nan"}
SUFFIXES = ("_bucket", "_sum", "_count")
NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (histogram series as their family)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges ($__rate_interval)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ",
                  text)  # grouping labels
    text = re.sub(r"\$\w+", " ", text)  # Grafana variables
    found = set()
    for match in NAME.finditer(text):
        word = match.group()
        rest = text[match.end():].lstrip()
        if word.lower() in KEYWORDS or rest.startswith("(") or text[match.start() - 1:
                                                                    match.start()].isdigit():
            continue
        for suffix in SUFFIXES:
            if word.endswith(suffix):
                word = word[: -len(suffix)]
        found.add(word)
    return found


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def exported(text: str) -> set[str]:
    """Every metric name an exposition serves: its families (# TYPE; a counter's
    samples end in _total) and its samples."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "counter":
                names.add(f"{name}_total")
        elif line and not line.startswith("#"):
            names.add(NAME.match(line).group())  # type: ignore[union-attr]
    return names


def test_names_are_extracted() -> None:
    assert metric_names('histogram_quantile(0.9, sum by (le, phase) '
                        '(rate(xce_session_duration_seconds_bucket{phase="x"}[$__rate_interval])))'
                        ) == {"xce_session_duration_seconds"}
    assert metric_names("time() - max(xce_session_last_timestamp_seconds) > 1e3 or vector(0)"
                        ) == {"xce_session_last_timestamp_seconds"}
    assert metric_names('sum without (queue) (xce_jobs{state=~"PEND|RUN"}) / on (x) '
                        "group_left xce_slots offset 5m") == {"xce_jobs", "xce_slots"}


def test_dashboard_is_importable_and_covers_the_issue() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    used = set()
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("timeseries", "stat") and panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        for target in panel["targets"]:
            used |= metric_names(target["expr"])
    for wanted in ("xce_jobs", "xce_slots", "xce_demand_hosts", "xce_supply_in_flight",
                   "xce_hosts", "xce_provider_join_seconds", "xce_provider_requests_total",
                   "xce_idle_hosts", "xce_session_duration_seconds", "xce_cost_per_hour"):
        assert wanted in used, f"no panel shows {wanted}"


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """/metrics of a live controller started with --metrics-listen."""
    port = free_port()
    with live_cluster(tmp_path_factory.mktemp("live-grafana"), CONFIG, agents=("n1",)) as made:
        made.start_controller(extra=(*FAST, "--metrics-listen", f"127.0.0.1:{port}"))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def scrape() -> str:
            with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                text: str = answer.read().decode()
            return text if "xce_session_last_timestamp_seconds" in text else ""

        yield wait_for(scrape, 20, "a session's metrics at /metrics")


@skip_unless_linux
def test_every_query_names_an_exported_metric(scraped: str) -> None:
    names = exported(scraped)
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            unknown = metric_names(target["expr"]) - names
            assert not unknown, (f"panel {panel['title']!r}: {target['expr']!r} names "
                                 f"{sorted(unknown)}, which XCE does not export")



# Metrics whose every label value is served even at zero, so that a panel's matcher on
# them can be checked against a scrape (a typo or a wrong case matches nothing).
ENUMERATED = ("xce_jobs", "xce_slots")
MATCHER = re.compile(r'(\w+)\s*(=~|=)\s*"([^"]*)"')


def served_values(text: str, metric: str, label: str) -> set[str]:
    """The values `label` takes in the samples of `metric` of an exposition."""
    found = set()
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels = {k: v for k, _op, v in MATCHER.findall(line.split("}")[0])}
            if label in labels:
                found.add(labels[label])
    return found


@skip_unless_linux
def test_every_matcher_on_an_enumerated_label_names_a_served_value(scraped: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            for metric in ENUMERATED:
                for selector in re.findall(metric + r"\{([^}]*)\}", target["expr"]):
                    for label, op, value in MATCHER.findall(selector):
                        served = served_values(scraped, metric, label)
                        wanted = value.split("|") if op == "=~" else [value]
                        missing = [v for v in wanted if v not in served]
                        assert not missing, (f"panel {panel['title']!r}: {metric} "
                                             f"{label}={missing} is never served "
                                             f"(served: {sorted(served)})")
