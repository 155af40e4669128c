"""The connection options every command that talks to the controller takes (kept
apart from the HTTP client, cli/client.py: `xce` itself, and commands that talk to
no controller such as `xce sim run`, start without importing http.client and ssl)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

DEFAULT_CONTROLLER = "http://127.0.0.1:6820"
DEFAULT_TOKEN_FILE = "~/.xce/token"

R = TypeVar("R")


def connection_options(command: Callable[..., R]) -> Callable[..., R]:
    """`--controller URL` and `--token-file FILE` (passed as `controller`, `token_file`)."""
    command = click.option(
        "--token-file",
        type=click.Path(dir_okay=False),
        help="File holding your token [default: $XCE_TOKEN, else $XCE_TOKEN_FILE, "
        f"else {DEFAULT_TOKEN_FILE}].",
    )(command)
    return click.option(
        "--controller",
        metavar="URL",
        help=f"The controller [default: $XCE_CONTROLLER, else {DEFAULT_CONTROLLER}].",
    )(command)


_CONNECTION = "xce.connection"  # click's context meta: the options given before the command


def remember_connection(ctx: click.Context, controller: str | None,
                        token_file: str | None) -> None:
    """The connection options given before the command (`xce --token-file F kill 8`),
    for the command's own to fall back on."""
    ctx.meta[_CONNECTION] = (controller, token_file)


def remembered_connection() -> tuple[str | None, str | None]:
    """The connection options given before the command, (None, None) if none."""
    context = click.get_current_context(silent=True)
    found: tuple[str | None, str | None] = (
        context.meta.get(_CONNECTION, (None, None)) if context else (None, None)
    )
    return found
