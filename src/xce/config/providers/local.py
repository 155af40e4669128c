"""The `local` provider's settings, `<confPath>/local.yaml` (docs/providers.md), read
by the provider and by the simulator's model of it alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from xce.config.providers.file import ProviderSpec, load_settings

CONF_NAME = "local.yaml"
# Seconds an agent waits before it starts (a slow machine's boot), at most a day.
StartDelay = Annotated[float, msgspec.Meta(ge=0, le=86400)]


class LocalSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`<confPath>/local.yaml`, all optional."""

    controller: str = ""  # the URL its agents join (default: the provisioner's)
    pools: dict[str, float] = {}  # tokens it lends (default: `--pool`)
    lead_time: float = 5.0
    stop_grace: float = 10.0
    start_delay: StartDelay = 0.0  # s before each agent starts (a boot's length)


def load_local_settings(spec: ProviderSpec) -> LocalSettings:
    """The settings of a local provider's entry: its `<confPath>/local.yaml` when there
    is one, else the defaults; ConfigError naming the file, line and field."""
    conf = Path(spec.conf_path) / CONF_NAME if spec.conf_path else None
    if conf is not None and conf.exists():
        return load_settings(conf, LocalSettings)
    return LocalSettings()
