"""A command group whose subcommands are imported when first used.

`xce jobs` should not pay for what `xce agent` or `xce sim` import (aiohttp, the
controller, the simulator): each subcommand's module is imported only when the command
runs, or when `xce --help` lists them all. This is click's documented lazy-loading
pattern (a Group overriding `list_commands` and `get_command`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """A group whose `lazy` subcommands are named "module:attribute"."""

    def __init__(self, *args: Any, lazy: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        path = self.lazy.get(cmd_name)
        if path is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = path.split(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise RuntimeError(f"{path} is not the command {cmd_name!r}")
        return command
