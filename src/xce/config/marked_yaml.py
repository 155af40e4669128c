"""Safe YAML loading into dicts and lists that remember their line numbers."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from xce.config.errors import ConfigError

_MERGE_TAG = "tag:yaml.org,2002:merge"
# What SafeConstructor's scalar constructors raise on explicitly tagged garbage
# (`!!int x` ValueError, `!!bool x` KeyError, `!!timestamp x` AttributeError, ...).
_CONSTRUCTION_ERRORS = (ValueError, TypeError, OverflowError, LookupError, AttributeError)
_SCALAR_KEY_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp")
)


class MarkedMap(dict[object, object]):
    """A YAML mapping that knows its 1-based line and the line of each key and value."""

    def __init__(self, line: int = 0) -> None:
        super().__init__()
        self.line = line
        self._key_lines: dict[object, int] = {}
        self._value_lines: dict[object, int] = {}

    def line_of(self, key: object) -> int:
        """The line of `key`, or of the mapping itself when the key is absent."""
        return self._key_lines.get(key, self.line)

    def value_line_of(self, key: object) -> int:
        """The line where the value of `key` starts (the key's line when absent)."""
        return self._value_lines.get(key, self.line_of(key))

    def set_marked(self, key: object, value: object, key_line: int, value_line: int) -> None:
        """Store `value` under `key`, remembering where both came from."""
        self[key] = value
        self._key_lines[key] = key_line
        self._value_lines[key] = value_line


class MarkedSeq(list[object]):
    """A YAML sequence that knows its 1-based line and the line of each item."""

    def __init__(self, line: int = 0) -> None:
        super().__init__()
        self.line = line
        self._item_lines: list[int] = []

    def line_of(self, index: int) -> int:
        """The line of item `index`, or of the sequence itself when out of range."""
        if -len(self._item_lines) <= index < len(self._item_lines):
            return self._item_lines[index]
        return self.line

    def append_marked(self, item: object, line: int) -> None:
        """Append `item`, remembering its line."""
        self.append(item)
        self._item_lines.append(line)


_YAML_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def load_yaml(text: str, filename: str) -> object:
    """Parse one YAML document safely; mappings become MarkedMap, sequences MarkedSeq.

    Scalars are the usual safe-YAML values (str, int, float, bool, None, dates).
    Syntax errors, duplicate keys and values that cannot be constructed raise
    ConfigError naming the file and line. An empty document gives None.
    """
    try:
        return _load(text, filename)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise ConfigError(
            filename, _clamp_line(line, text), "", f"invalid YAML: {_describe_yaml_error(exc)}"
        ) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        raise ConfigError(filename, _clamp_line(line, text), "", f"invalid YAML: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(filename, 1, "", f"invalid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            filename, 1, "", "invalid YAML: nested too deeply (or a recursive merge)"
        ) from None


def read_text(path: str | os.PathLike[str], hint: str = "") -> str:
    """A configuration file's text; an unreadable one (missing, a directory, not UTF-8)
    is a ConfigError `file:0: : cannot read: <why>` (`hint` added in parentheses)."""
    filename = os.fspath(path)
    try:
        with open(filename, encoding="utf-8") as stream:
            return stream.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(filename, 0, "", f"cannot read: {reason}"
                          + (f" ({hint})" if hint else "")) from None


def load_yaml_file(path: str | os.PathLike[str], hint: str = "") -> object:
    """A YAML (or JSON) file's marked tree (see `read_text` for an unreadable file)."""
    return load_yaml(read_text(path, hint), os.fspath(path))


def _load(text: str, filename: str) -> object:
    loader = _MarkedLoader(text, filename)  # checks for unprintable characters
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicate_keys(loader, node, filename)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _describe_yaml_error(exc: yaml.MarkedYAMLError) -> str:
    parts = [part for part in (exc.context, exc.problem) if part]
    return ": ".join(parts) if parts else "syntax error"


def yaml_lines(text: str) -> int:
    """How many lines YAML sees in `text` (it breaks lines at \r too, as it does at
    \n, \r\n, NEL and the Unicode line and paragraph separators)."""
    return len(_YAML_BREAK.split(text))


def _clamp_line(line: int, text: str) -> int:
    # The end-of-stream mark can sit one line past the last one.
    return max(1, min(line, yaml_lines(text.rstrip("\r\n\x85\u2028\u2029"))))


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "mapping"
    return "sequence" if isinstance(node, SequenceNode) else "scalar"


def _line(node: Node) -> int:
    return node.start_mark.line + 1


class _MarkedLoader(yaml.SafeLoader):
    """SafeLoader that builds MarkedMap / MarkedSeq and locates construction errors."""

    def __init__(self, text: str, filename: str) -> None:
        super().__init__(text)
        self.filename = filename

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ConfigError, yaml.YAMLError, RecursionError):
            raise
        except _CONSTRUCTION_ERRORS:
            # Also plain `2024-13-45`: it resolves as a timestamp, datetime.date refuses it.
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            raise ConfigError(
                self.filename, _line(node), "", f"invalid YAML: {node.value!r} is not a valid {tag}"
            ) from None


def _construct_map(loader: _MarkedLoader, node: Node) -> Iterator[MarkedMap]:
    if not isinstance(node, MappingNode):  # `!!map x`
        raise ConstructorError(
            None, None, f"expected a mapping, found a {_kind(node)}", node.start_mark
        )
    mapping = MarkedMap(_line(node))
    yield mapping
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise ConfigError(
                loader.filename,
                _line(key_node),
                "",
                f"invalid YAML: a mapping key must be a scalar, not a {_kind(key_node)}",
            ) from None
        value = loader.construct_object(value_node)
        mapping.set_marked(key, value, _line(key_node), _line(value_node))


def _construct_seq(loader: _MarkedLoader, node: Node) -> Iterator[MarkedSeq]:
    if not isinstance(node, SequenceNode):  # `!!seq x`
        raise ConstructorError(
            None, None, f"expected a sequence, found a {_kind(node)}", node.start_mark
        )
    sequence = MarkedSeq(_line(node))
    yield sequence
    for item_node in node.value:
        sequence.append_marked(loader.construct_object(item_node), _line(item_node))


_MarkedLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_MarkedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def _check_duplicate_keys(loader: _MarkedLoader, root: Node, filename: str) -> None:
    """Raise ConfigError for the earliest duplicated key (merge keys may override)."""
    found: list[ConfigError] = []
    visited: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in visited:  # aliases: each node once, and no cycles
            continue
        visited.add(id(node))
        if isinstance(node, MappingNode):
            seen: set[object] = set()
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    stack.append((value_node, path))
                    continue
                if not isinstance(key_node, ScalarNode):
                    continue  # construction reports non-scalar keys
                child = f"{path}.{key_node.value}" if path else str(key_node.value)
                key = _key_value(loader, key_node)
                if key in seen:
                    found.append(
                        ConfigError(filename, _line(key_node), child, f"duplicate key {key!r}")
                    )
                seen.add(key)
                stack.append((value_node, child))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                stack.append((item, f"{path}[{index}]"))
    if found:
        raise min(found, key=lambda err: err.line)


def _key_value(loader: _MarkedLoader, key_node: ScalarNode) -> object:
    """The value a scalar key will have once constructed (so `1` and `0x1` collide)."""
    constructor = loader.yaml_constructors.get(key_node.tag)
    if key_node.tag in _SCALAR_KEY_TAGS and constructor is not None:
        try:
            value: object = constructor(loader, key_node)
            hash(value)
            return value
        except (*_CONSTRUCTION_ERRORS, yaml.YAMLError):
            pass
    return (key_node.tag, key_node.value)
