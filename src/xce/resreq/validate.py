"""Checking the names of a parsed requirement against the cluster's resources."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from xce.resreq.errors import ResReqError
from xce.resreq.gpu import NGPUS
from xce.resreq.requirement import ResReq

if TYPE_CHECKING:
    from xce.model.cluster import ResourceDef

HOST_ATTRIBUTES: Final = frozenset({"type", "model", "hname", "slots", NGPUS})
# What order[] may name besides declared numeric resources (free now, per host).
_ORDER_BUILTINS: Final = frozenset({"slots", NGPUS})


def validate(req: ResReq, resources: Mapping[str, ResourceDef]) -> None:
    """Check every name of `req` against the declared `resources`.

    * select: `type`, `model`, `hname`, `slots`, `ngpus` or a declared resource
      (names used as string literals, e.g. `X86_64` in `type==X86_64`, are not
      checked);
    * rusage: a declared numeric consumable resource (host or shared); GPUs are
      asked for with `-gpu`, not here;
    * order: `slots`, `ngpus` or a declared numeric resource.

    Raises ResReqError at the column of the first offending name in the text.
    """
    for name, column, section in req.name_columns:
        resource = resources.get(name)
        if section == "select":
            if resource is None and name not in HOST_ATTRIBUTES:
                raise ResReqError(column, f"unknown resource '{name}'")
            if resource is not None and resource.shared:
                raise ResReqError(
                    column, f"shared resource '{name}' is not a host value: use rusage[]"
                )
        elif section == "rusage":
            if name == NGPUS:
                raise ResReqError(column, 'GPUs are asked for with -gpu "num=N", not rusage[]')
            if resource is None:
                raise ResReqError(column, f"unknown resource '{name}'")
            if resource.type != "numeric" or not (resource.consumable or resource.shared):
                raise ResReqError(column, f"resource '{name}' is not consumable")
        elif name not in _ORDER_BUILTINS and (
            resource is None or resource.type != "numeric" or resource.shared
        ):
            raise ResReqError(column, f"cannot order by '{name}'")
