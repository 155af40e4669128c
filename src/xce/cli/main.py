"""Entry point of the `xce` command."""

from __future__ import annotations

import click

from xce import __version__
from xce.cli.agent_cmd import agent
from xce.cli.client import connection_options, remember_connection
from xce.cli.client_cmds import CLIENT_COMMANDS
from xce.cli.control_cmds import CONTROL_COMMANDS
from xce.cli.controller_cmd import controller, init, token
from xce.cli.demo_cmd import demo
from xce.cli.fairshare_cmd import fairshare
from xce.cli.ha_cmds import admin, controller_status
from xce.cli.job_cmds import JOB_COMMANDS
from xce.cli.modify_cmds import MODIFY_COMMANDS
from xce.cli.provisioner_cmd import provisioner
from xce.cli.requests_cmd import history, requests
from xce.cli.sched_cmd import sched
from xce.cli.sim_cmd import sim
from xce.cli.supply_cmds import resources
from xce.license.command import license_pool


@click.group()
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


main.add_command(sched)
main.add_command(init)
main.add_command(token)
controller.add_command(controller_status)
main.add_command(controller)
main.add_command(admin)
main.add_command(agent)
main.add_command(provisioner)
main.add_command(demo)
for command in (*CLIENT_COMMANDS, *CONTROL_COMMANDS, *JOB_COMMANDS, *MODIFY_COMMANDS):
    main.add_command(command)
main.add_command(resources)
main.add_command(fairshare)
main.add_command(requests)
main.add_command(history)
main.add_command(sim)
main.add_command(license_pool)
