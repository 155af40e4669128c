"""`xce agent`: the execution agent of one host (docs/agent.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path

import click
import msgspec

from xce.agent.daemon import AgentSettings, run_agent
from xce.agent.gpus import NVIDIA_SMI, discover_gpus
from xce.agent.hostspec import HostSpecError, describe_host
from xce.agent.jobs import DEFAULT_KILL_GRACE, JobStore, StateDirError
from xce.cli.client import ClientError, controller_url

TOKEN_ENV = "XCE_TOKEN"


def read_token(token_file: Path | None) -> str:
    """The token of --token-file (its first line), else of $XCE_TOKEN."""
    if token_file is not None:
        try:
            lines = token_file.read_text().splitlines()
        except OSError as err:
            raise click.BadParameter(str(err), param_hint="--token-file") from err
        token = lines[0].strip() if lines else ""
        if not token:
            raise click.BadParameter(f"{token_file} is empty", param_hint="--token-file")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise click.UsageError(f"no token: give --token-file or set {TOKEN_ENV}")
    return token


@click.command()
@click.option("--controller", required=True, metavar="URL",
              help="The controller's URL, e.g. http://ctl:6820 or ctl:6820 (6820: the port "
              "`xce controller` listens on by default; several, comma-separated: a leader "
              "and its standbys).")
@click.option(
    "--name",
    default=socket.gethostname,
    show_default="this host's name",
    help="Host name to register as.",
)
@click.option("--slots", type=click.IntRange(min=1), help="Job slots [default: CPUs].")
@click.option("--type", "type_", help="Host type [default: the architecture, e.g. X86_64].")
@click.option("--model", help="Host model.")
@click.option(
    "--resource",
    "resources",
    multiple=True,
    metavar="NAME=VALUE",
    help="A host resource (number or true/false); repeatable.",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=0),
    help="GPUs of the host when nvidia-smi is not found [default: none].",
)
@click.option(
    "--nvidia-smi",
    "nvidia_smi",
    default=NVIDIA_SMI,
    show_default=True,
    help="The command that lists the GPUs (`-L`), looked up on PATH.",
)
@click.option(
    "--host-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML with slots, type, model, resources, gpus (options win).",
)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=f"File with the agent's token [default: ${TOKEN_ENV}].",
)
@click.option(
    "--state-dir",
    # (absolute: the job's shim runs in the job's working directory)
    type=click.Path(file_okay=False, path_type=Path, resolve_path=True),
    help="Job directories [default: /tmp/xce-agent-NAME].",
)
@click.option(
    "--kill-grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_KILL_GRACE,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL when a job is killed.",
)
@click.option(
    "--spot-metadata",
    metavar="URL",
    default="",
    help="Read EC2's spot interruption notice from this instance metadata service "
    "(http://169.254.169.254 on EC2) and drain the host when it comes [default: not read].",
)
@click.option(
    "--spot-poll",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds between two reads of the spot notice.",
)
def agent(
    controller: str,
    name: str,
    slots: int | None,
    type_: str | None,
    model: str | None,
    resources: tuple[str, ...],
    gpus: int | None,
    nvidia_smi: str,
    host_file: Path | None,
    token_file: Path | None,
    state_dir: Path | None,
    kill_grace: float,
    spot_metadata: str,
    spot_poll: float,
) -> None:
    """Run the jobs the controller sends to this host; stop with SIGTERM (jobs go on)."""
    try:
        host = describe_host(host_file, slots, type_, model, resources, gpus)
    except HostSpecError as err:
        raise click.UsageError(str(err)) from err
    if spot_metadata and not spot_metadata.startswith(("http://", "https://")):
        raise click.BadParameter(f"{spot_metadata!r} is not an http:// URL",
                                 param_hint="--spot-metadata")
    try:  # (`host:port` means http://host:port, as for every other command)
        controller = controller_url(controller)
    except ClientError as err:
        raise click.BadParameter(str(err), param_hint="--controller") from err
    token = read_token(token_file)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    devices = discover_gpus(host.gpus, nvidia_smi)
    host = msgspec.structs.replace(host, gpus=len(devices))
    settings = AgentSettings(controller, name, token, host, spot_metadata=spot_metadata,
                             spot_poll=spot_poll)
    try:
        store = JobStore(state_dir or Path(f"/tmp/xce-agent-{name}"), kill_grace, devices)
    except (StateDirError, OSError) as err:
        raise click.ClickException(str(err)) from err
    asyncio.run(run_agent(settings, store))
