"""Fuzzing the configuration loader: whatever the input, a ClusterConfig or a ConfigError.

A ConfigError must point inside the document (1 <= line <= number of lines); any other
exception (KeyError, TypeError, RecursionError, ...) is a bug.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.config import ConfigError, expand_hostnames, load_config_text
from xce.model.cluster import ClusterConfig

EXAMPLE_TEXT = (Path(__file__).resolve().parent.parent / "examples" / "cluster.yaml").read_text()
EXAMPLE_DOC: object = yaml.safe_load(EXAMPLE_TEXT)
EXAMPLE_LINES = EXAMPLE_TEXT.splitlines()

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Strings that mean something somewhere in a configuration.
MEANINGFUL = [
    "all",
    "each",
    "template:aws.*",
    "template:",
    "n01",
    "n99",
    "n[01-03]",
    "n[3-1]",
    "n[]",
    "vcs",
    "hspice",
    "mem",
    "ssd",
    "slots",
    "default",
    "site",
    "cloud",
    "normal",
    "numeric",
    "boolean",
    "aws.c5",
    "",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(MEANINGFUL),
    st.text(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.sampled_from(MEANINGFUL), st.text(max_size=5)), inner, max_size=3
        ),
    ),
    max_leaves=6,
)


def assert_config_or_located_error(text: str) -> None:
    """The loader's contract under fuzzing."""
    try:
        config = load_config_text(text, "fuzz.yaml")
    except ConfigError as err:
        lines = max(1, len(text.splitlines()))
        assert err.file == "fuzz.yaml"
        assert 1 <= err.line <= lines, f"line {err.line} outside a {lines}-line document: {err}"
        assert str(err).startswith(f"fuzz.yaml:{err.line}: {err.field}: ")
    else:
        assert isinstance(config, ClusterConfig)


@FUZZ
@given(st.text())
def test_arbitrary_text(text: str) -> None:
    assert_config_or_located_error(text)


YAML_TOKENS = [
    *"{}[],:-&*!|>'\"#%?<@` \n\t\rabn01239.",
    "\x00",
    "\u2028",
    "\ufeff",
    "<<: ",
    "&a ",
    "*a",
    "!!map ",
    "!!seq ",
    "!!str ",
    "!!int ",
    "!!bool ",
    "!!float ",
    "!!timestamp ",
    "!!binary ",
    "!!set ",
    "!!omap ",
    "!!null ",
    "!foo ",
    "--- ",
    "...",
    "2024-13-45",
    "hosts:",
    "queues:",
    "- name: n01",
    "slots: ",
]


@FUZZ
@given(st.lists(st.sampled_from(YAML_TOKENS), max_size=40).map("".join))
def test_yaml_tokens(text: str) -> None:
    assert_config_or_located_error(text)


@FUZZ
@given(
    st.lists(st.integers(min_value=0, max_value=len(EXAMPLE_LINES) - 1), max_size=60),
    st.lists(st.tuples(st.integers(min_value=0), st.text(max_size=6)), max_size=3),
)
def test_spliced_example_lines(picks: list[int], edits: list[tuple[int, str]]) -> None:
    """Lines of the example, reordered, repeated (duplicate keys) and edited."""
    lines = [EXAMPLE_LINES[i] for i in picks]
    for position, insert in edits:
        if lines:
            index = position % len(lines)
            cut = position % (len(lines[index]) + 1)
            lines[index] = lines[index][:cut] + insert + lines[index][cut:]
    assert_config_or_located_error("\n".join(lines) + "\n")


def _containers(doc: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Paths of every mapping and list in `doc` (the root included)."""
    found: list[tuple[object, ...]] = []
    if isinstance(doc, dict):
        found.append(path)
        for key, value in doc.items():
            found.extend(_containers(value, (*path, key)))
    elif isinstance(doc, list):
        found.append(path)
        for index, value in enumerate(doc):
            found.extend(_containers(value, (*path, index)))
    return found


def _at(doc: object, path: tuple[object, ...]) -> object:
    for step in path:
        doc = doc[step]  # type: ignore[index]
    return doc


@st.composite
def mutated_examples(draw: st.DrawFn) -> object:
    """The example document with 1-3 structural mutations."""
    doc = copy.deepcopy(EXAMPLE_DOC)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_containers(doc)))
        target = _at(doc, path)
        operation = draw(st.sampled_from(["delete", "replace", "duplicate", "unknown_key"]))
        if isinstance(target, dict):
            keys = list(target)
            if operation == "unknown_key" or not keys:
                key = draw(st.one_of(st.sampled_from(MEANINGFUL), st.text(max_size=5)))
                target[key] = draw(VALUES)
                continue
            key = draw(st.sampled_from(keys))
            if operation == "delete":
                del target[key]
            elif operation == "duplicate":
                target[f"{key}_copy"] = copy.deepcopy(target[key])
            else:
                target[key] = draw(VALUES)
        elif isinstance(target, list):
            if not target or operation == "unknown_key":
                target.append(draw(VALUES))
                continue
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            if operation == "delete":
                del target[index]
            elif operation == "duplicate":
                target.insert(index, copy.deepcopy(target[index]))
            else:
                target[index] = draw(VALUES)
    return doc


@FUZZ
@given(mutated_examples(), st.booleans())
def test_mutated_example(doc: object, flow_style: bool) -> None:
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=flow_style, allow_unicode=True)
    assert_config_or_located_error(text)


def test_unmutated_example_is_valid() -> None:
    """The fuzzing base must itself be valid, or every mutation only tests one error."""
    text = yaml.safe_dump(EXAMPLE_DOC, sort_keys=False)
    assert isinstance(load_config_text(text), ClusterConfig)


@FUZZ
@given(
    st.text(alphabet="abcxyz-.", min_size=1, max_size=4),
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=1, max_value=4),
)
def test_expand_hostnames_ranges(prefix: str, start: int, length: int, width: int) -> None:
    first = f"{start:0{width}d}"
    last = start + length
    names = expand_hostnames(f"{prefix}[{first}-{last}]")
    assert len(names) == length + 1
    assert names == [f"{prefix}{number:0{width}d}" for number in range(start, last + 1)]
    assert len(set(names)) == len(names)


@FUZZ
@given(st.text(max_size=20))
def test_expand_hostnames_raises_only_value_error(pattern: str) -> None:
    try:
        names = expand_hostnames(pattern)
    except ValueError:
        return
    assert 1 <= len(names) <= 100_000
    assert all(isinstance(name, str) and name for name in names)
