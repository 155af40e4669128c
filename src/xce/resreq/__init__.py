"""LSF-style job requirement (`-R`) strings: parsing, evaluation, validation.

    req = parse("select[type==X86_64 && mem>4000] rusage[mem=4000] span[hosts=1]")
    validate(req, cluster_resources)          # ResReqError on unknown names
    req.select(host_attrs)                    # does this host qualify?

    parse_gpu("num=2:mode=shared")            # `-gpu`: GPUs per host (gpu.py)

See `parser` for the grammar, `lexer` for names and numbers, `select` for the
meaning of select expressions.
"""

from xce.resreq.errors import ResReqError
from xce.resreq.gpu import NGPUS, GpuError, GpuRequest, parse_gpu
from xce.resreq.parser import parse
from xce.resreq.requirement import OrderKey, ResReq
from xce.resreq.select import Select
from xce.resreq.validate import validate

__all__ = [
    "NGPUS",
    "GpuError",
    "GpuRequest",
    "OrderKey",
    "ResReq",
    "ResReqError",
    "Select",
    "parse",
    "parse_gpu",
    "validate",
]
