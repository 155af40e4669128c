"""The providers file (LSF's `hostProviders.json` shape: name, type, confPath,
scriptPath; docs/providers.md): which providers a provisioner runs, and which the
simulator models (`xce sim run --providers`); both read it here.

```json
{"providers": [
  {"name": "local", "type": "local"},
  {"name": "aws", "type": "ec2", "confPath": "conf/aws"},
  {"name": "site", "type": "script", "confPath": "conf/site", "scriptPath": "plugins/site"},
  {"name": "lic", "type": "license", "confPath": "conf/lic"}
]}
```

`name` is what the catalog's templates (`provider:`) refer to; relative paths are taken
from the providers file's directory. The file may be JSON or YAML (JSON is YAML).
Every problem is a ConfigError naming file, line and field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import msgspec

from xce.config.errors import ConfigError
from xce.config.marked_yaml import MarkedMap, MarkedSeq, load_yaml_file

# The provider types there are (the provisioner has one factory per type:
# `xce.provisioner.registry`).
PROVIDER_TYPES = ("local", "script", "ec2", "license")


class ProviderSpec(msgspec.Struct, frozen=True):
    """One entry of the providers file; paths already resolved against its directory."""

    name: str
    type: str
    conf_path: str = ""
    script_path: str = ""
    file: str = ""  # the providers file, for error messages
    line: int = 0  # the entry's line in it


FIELDS = {"name": "name", "type": "type", "confPath": "conf_path", "scriptPath": "script_path"}


def load_providers(path: str | Path) -> list[ProviderSpec]:
    """The providers of a providers file, or ConfigError."""
    filename = str(path)
    root = load_yaml_file(path)
    if not isinstance(root, MarkedMap) or "providers" not in root:
        raise ConfigError(filename, 1, "providers", "expected a mapping with a 'providers' list")
    entries = root["providers"]
    if not isinstance(entries, MarkedSeq):
        raise ConfigError(filename, root.value_line_of("providers"), "providers",
                          "expected a list")
    base = Path(path).parent
    specs: list[ProviderSpec] = []
    for index, entry in enumerate(entries):
        field = f"providers[{index}]"
        line = entries.line_of(index)
        if not isinstance(entry, MarkedMap):
            raise ConfigError(filename, line, field, "expected a mapping")
        values: dict[str, str] = {}
        for key, value in entry.items():
            if key not in FIELDS:
                raise ConfigError(filename, entry.line_of(key), f"{field}.{key}",
                                  f"unknown field (known: {', '.join(FIELDS)})")
            if not isinstance(value, str) or not value:
                raise ConfigError(filename, entry.value_line_of(key), f"{field}.{key}",
                                  "expected a non-empty string")
            values[FIELDS[str(key)]] = value
        for required in ("name", "type"):
            if required not in values:
                raise ConfigError(filename, line, f"{field}.{required}", "missing")
        if values["type"] not in PROVIDER_TYPES:
            raise ConfigError(filename, entry.value_line_of("type"), f"{field}.type",
                              f"unknown provider type {values['type']!r} "
                              f"(known: {', '.join(PROVIDER_TYPES)})")
        if any(s.name == values["name"] for s in specs):
            raise ConfigError(filename, entry.value_line_of("name"), f"{field}.name",
                              f"provider {values['name']!r} is named twice")
        for key in ("conf_path", "script_path"):
            if key in values:
                values[key] = str((base / values[key]).resolve())
        specs.append(ProviderSpec(**values, file=filename, line=line))
    return specs


S = TypeVar("S")


def load_settings(path: Path, kind: type[S]) -> S:
    """A provider's settings file (YAML or JSON) as `kind`, or ConfigError naming the
    file, the line and the field."""
    filename = str(path)
    root = load_yaml_file(path)
    try:
        return msgspec.convert(root, kind, strict=False)
    except msgspec.ValidationError as err:
        field, line = _locate(root, str(err))
        raise ConfigError(filename, line, field, str(err).split(" - at ")[0]) from err


_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['([^']*)'\]|\[(\d+|\.\.\.)\]")
_UNKNOWN = re.compile(r"unknown field `([^`]*)`")


def _locate(root: object, message: str) -> tuple[str, int]:
    """The field msgspec's message names (`... - at `$.pools['vcs']``, or an unknown
    field) as a path, and its line."""
    _, _, where = message.partition(" - at `$")
    steps: list[str | int] = []
    for name, key, index in _STEP.findall(where.rstrip("`")):
        if index == "...":  # a mapping's value: msgspec does not say which key
            break
        steps.append(int(index) if index else name or key)
    unknown = _UNKNOWN.search(message)
    if unknown:
        steps.append(unknown.group(1))
    node, line, field = root, 1, ""
    for step in steps:
        field += f"[{step}]" if isinstance(step, int) else (f".{step}" if field else step)
        found = _child(node, step)
        if found is not None:
            line, node = found
    return field, line


def _child(node: object, step: str | int) -> tuple[int, object] | None:
    """The line and value of `node[step]` in a marked YAML tree, if it is there."""
    if isinstance(node, MarkedMap) and step in node:
        return node.line_of(step), node[step]
    if isinstance(node, MarkedSeq) and isinstance(step, int) and step < len(node):
        return node.line_of(step), node[step]
    return None
