"""Any scenario file gives a scheduler state or one ConfigError naming file, line and
field: never another exception (mutations of the bundled example)."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.config import ConfigError
from xce.config.marked_yaml import yaml_lines
from xce.scenario import load_scenario_text
from xce.sched import run_session

EXAMPLE = (Path(__file__).resolve().parents[1] / "src" / "xce" / "examples" / "session.yaml")
LINES = EXAMPLE.read_text(encoding="utf-8").splitlines()
SCALARS = st.sampled_from(
    ["-1", "0", "3.5", "true", "null", "[]", "{}", "'x'", "n99", "\"select[mem>]\"", "RUN",
     "\"1-3\"", "template:aws.*", "1e309", "{id: 1}"]
)


def check(text: str) -> None:
    try:
        scenario = load_scenario_text(text, "fuzz.yaml")
    except ConfigError as err:
        assert err.file == "fuzz.yaml"
        assert 0 <= err.line <= max(1, yaml_lines(text)), str(err)  # YAML breaks at \r too
        return
    run_session(scenario.state(), scenario.now)  # a loaded scenario always schedules


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_values_give_a_state_or_a_config_error(data: st.DataObject) -> None:
    lines = list(LINES)
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        line = lines[index]
        values = list(re.finditer(r"(?<=: )[^,{}\[\]]+", line))
        if not values:
            continue
        match = data.draw(st.sampled_from(values))
        lines[index] = line[: match.start()] + data.draw(SCALARS) + line[match.end():]
    check("\n".join(lines) + "\n")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_dropped_and_duplicated_lines_give_a_state_or_a_config_error(
    data: st.DataObject,
) -> None:
    lines = list(LINES)
    index = data.draw(st.integers(0, len(lines) - 1))
    if data.draw(st.booleans()):
        del lines[index]
    else:
        lines.insert(index, lines[index])
    check("\n".join(lines) + "\n")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_gives_a_state_or_a_config_error(text: str) -> None:
    check(text)
