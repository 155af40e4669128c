"""`xce` imports a command's module only when the command runs (cli/lazy.py): a client
command such as `xce jobs` does not pay for the agent's aiohttp, the controller or the
simulator."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from xce.cli.main import COMMANDS, main

HEAVY = ("aiohttp", "xce.sim", "xce.controller", "xce.agent", "matplotlib", "boto3")


def _loaded_after(code: str) -> set[str]:
    """The heavy packages loaded in a fresh interpreter after running `code`."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    names = done.stdout.split()
    return {heavy for heavy in HEAVY for name in names
            if name == heavy or name.startswith(heavy + ".")}


def test_the_entry_point_imports_no_command_module() -> None:
    assert _loaded_after("import xce.cli.main") == set()


def test_a_client_command_loads_only_its_own_module() -> None:
    code = ("from click.testing import CliRunner\nfrom xce.cli.main import main\n"
            "CliRunner().invoke(main, ['jobs', '--help'])")
    assert _loaded_after(code) == set()


def test_every_command_loads_under_its_name() -> None:
    context = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(context, name)
        assert isinstance(command, click.Command) and command.name == name
    assert main.list_commands(context) == sorted(COMMANDS)


def test_help_lists_every_command_and_an_unknown_one_is_refused() -> None:
    runner = CliRunner()
    listed = runner.invoke(main, ["--help"]).output
    assert all(f"  {name} " in listed for name in COMMANDS)
    unknown = runner.invoke(main, ["bjobs"])
    assert unknown.exit_code == 2 and "No such command 'bjobs'" in unknown.output


def test_controller_status_is_a_subcommand_of_controller() -> None:
    output = CliRunner().invoke(main, ["controller", "status", "--help"]).output
    assert "Who leads" in output
