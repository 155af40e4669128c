"""Entry point of the `xce` command."""

from __future__ import annotations

import click

from xce import __version__
from xce.cli.connection import connection_options, remember_connection
from xce.cli.lazy import LazyGroup

# Each command's module, imported when the command runs (cli/lazy.py).
_CLIENT, _CONTROL, _JOB, _MODIFY = (
    f"xce.cli.{name}" for name in ("client_cmds", "control_cmds", "job_cmds", "modify_cmds")
)
COMMANDS = {
    "acct": f"{_JOB}:acct",
    "admin": "xce.cli.ha_cmds:admin",
    "agent": "xce.cli.agent_cmd:agent",
    "bottom": f"{_MODIFY}:bottom",
    "controller": "xce.cli.controller_cmd:controller",
    "demand": f"{_CLIENT}:demand",
    "demo": "xce.cli.demo_cmd:demo",
    "fairshare": "xce.cli.fairshare_cmd:fairshare",
    "hist": f"{_JOB}:hist",
    "history": "xce.cli.requests_cmd:history",
    "host": f"{_CLIENT}:host",
    "hosts": f"{_CLIENT}:hosts",
    "idle": f"{_CLIENT}:idle",
    "init": "xce.cli.controller_cmd:init",
    "jobs": f"{_CLIENT}:jobs",
    "kill": f"{_CONTROL}:kill",
    "license-pool": "xce.license.command:license_pool",
    "modify": f"{_MODIFY}:modify",
    "peek": f"{_JOB}:peek",
    "provisioner": "xce.cli.provisioner_cmd:provisioner",
    "queues": f"{_CLIENT}:queues",
    "requests": "xce.cli.requests_cmd:requests",
    "requeue": f"{_CONTROL}:requeue",
    "resources": "xce.cli.supply_cmds:resources",
    "resume": f"{_CONTROL}:resume",
    "sched": "xce.cli.sched_cmd:sched",
    "sim": "xce.cli.sim_cmd:sim",
    "stop": f"{_CONTROL}:stop",
    "submit": f"{_CLIENT}:submit",
    "switch": f"{_MODIFY}:switch",
    "token": "xce.cli.controller_cmd:token",
    "top": f"{_MODIFY}:top",
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
@click.version_option(__version__)
@connection_options
@click.pass_context
def main(ctx: click.Context, controller: str | None, token_file: str | None) -> None:
    """XCE: a batch workload manager with elastic supply.

    \b
    The commands that talk to the controller take --controller and --token-file
    after the command or before it (given after it, they win):
      xce --token-file F kill 8
    """
    remember_connection(ctx, controller, token_file)

