"""GPUs on the command line: `xce submit -gpu "num=N[:mode=...][:j_exclusive=...]"`
(LSF's `bsub -gpu`, docs/requirements.md#gpus-gpu)."""

from __future__ import annotations

import click

from xce.resreq import GpuError, GpuRequest, parse_gpu


def gpu_option(ctx: click.Context, param: click.Parameter,
               value: str | None) -> GpuRequest | None:
    """The click callback of `-gpu`: the parsed request (None: not given). A bad
    string is a usage error naming the column, as requirement errors do."""
    if value is None:
        return None
    try:
        return parse_gpu(value)
    except GpuError as err:
        raise click.BadParameter(str(err), ctx, param) from None
