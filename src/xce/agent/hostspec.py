"""What the agent registers for its host: slots, type, model, resources and GPUs, from a
host file (YAML) and command-line options, the options winning (the GPUs nvidia-smi
finds win over both: xce.agent.gpus)."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path

import msgspec
import yaml

from xce.model.api import RegisterRequest
from xce.model.cluster import ResourceValue

HOST_FILE_KEYS = ("slots", "type", "model", "resources", "gpus")


class HostSpecError(ValueError):
    """A host file or a --resource option that cannot be used; the message says why."""


def parse_resource(assignment: str) -> tuple[str, ResourceValue]:
    """`mem=64000` -> ("mem", 64000.0); `ssd=true` -> ("ssd", True)."""
    name, sep, text = assignment.partition("=")
    name, text = name.strip(), text.strip()
    if not sep or not name or not text:
        raise HostSpecError(f"resource {assignment!r}: expected NAME=VALUE")
    if text.lower() in ("true", "false"):
        return name, text.lower() == "true"
    try:
        return name, float(text)
    except ValueError:
        raise HostSpecError(
            f"resource {name}: {text!r} is neither a number nor true/false"
        ) from None


def load_host_file(path: Path) -> dict[str, object]:
    """A host file: a YAML mapping with any of slots, type, model, resources, gpus."""
    try:
        content = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise HostSpecError(f"{path}: {err}") from err
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise HostSpecError(f"{path}: expected a mapping of {', '.join(HOST_FILE_KEYS)}")
    unknown = sorted(str(key) for key in content if key not in HOST_FILE_KEYS)
    if unknown:
        raise HostSpecError(
            f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(HOST_FILE_KEYS)}"
        )
    return content


def describe_host(
    host_file: Path | None,
    slots: int | None = None,
    type_: str | None = None,
    model: str | None = None,
    resources: Sequence[str] = (),
    gpus: int | None = None,
) -> RegisterRequest:
    """The host as registered: the options, else the host file, else one slot per CPU,
    the machine's architecture as type (X86_64, AARCH64, ...), no model, no resources,
    no GPUs. Resources of the file and of the options are merged."""
    fields: dict[str, object] = {"slots": os.cpu_count() or 1, "type": platform.machine().upper()}
    if host_file is not None:
        fields.update(load_host_file(host_file))
    options = {"slots": slots, "type": type_, "model": model, "gpus": gpus}
    fields.update((key, value) for key, value in options.items() if value is not None)
    try:
        host = msgspec.convert(fields, RegisterRequest)
    except msgspec.ValidationError as err:
        raise HostSpecError(f"{host_file or 'host'}: {err}") from err
    merged = dict(host.resources)
    merged.update(parse_resource(assignment) for assignment in resources)
    return msgspec.structs.replace(host, resources=merged)
