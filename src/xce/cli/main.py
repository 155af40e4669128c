"""Entry point of the `xce` command."""

from __future__ import annotations

import click

from xce import __version__
from xce.cli.agent_cmd import agent
from xce.cli.client_cmds import CLIENT_COMMANDS
from xce.cli.controller_cmd import controller, init, token
from xce.cli.demo_cmd import demo
from xce.cli.provisioner_cmd import provisioner
from xce.cli.requests_cmd import history, requests
from xce.cli.sched_cmd import sched
from xce.cli.sim_cmd import sim
from xce.cli.supply_cmds import resources
from xce.license.command import license_pool


@click.group()
@click.version_option(__version__)
def main() -> None:
    """XCE: a batch workload manager with elastic supply."""


main.add_command(sched)
main.add_command(init)
main.add_command(token)
main.add_command(controller)
main.add_command(agent)
main.add_command(provisioner)
main.add_command(demo)
for command in CLIENT_COMMANDS:
    main.add_command(command)
main.add_command(resources)
main.add_command(requests)
main.add_command(history)
main.add_command(sim)
main.add_command(license_pool)
