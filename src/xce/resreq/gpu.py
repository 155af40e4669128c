"""LSF's `-gpu` option: how many GPUs a job uses on each of its hosts, and how.

    parse_gpu("num=2:mode=exclusive_process")  # GpuRequest(num=2, mode=..., exclusive=True)

Grammar (LSF's, the options XCE supports)::

    gpu    := '-' | option (':' option)*        '-': the default, num=1
    option := 'num' '=' integer ['/host']       GPUs per host, >= 1 (default 1)
            | 'mode' '=' ('shared' | 'exclusive_process')          (default shared)
            | 'j_exclusive' '=' ('yes' | 'no')                      (default no)

Spaces around options, names and values are allowed. Each option at most once.
`mode=exclusive_process` implies `j_exclusive=yes` (as LSF sets it). The scheduler
counts every GPU a job asks for as taken on each of its hosts; the mode is for the
agent. LSF's other options (mps, aff, gmodel, ...) are refused as not supported.

Every problem raises GpuError (a ResReqError) at the 1-based column of the offending
name or value, `len(text) + 1` at the end of the string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, NoReturn

from xce.resreq.errors import ResReqError

NGPUS: Final = "ngpus"  # a host's GPUs in select[] and order[] (built in, like slots)
GpuMode = Literal["shared", "exclusive_process"]
SHARED: Final = "shared"
EXCLUSIVE_PROCESS: Final = "exclusive_process"
MODES: Final[tuple[GpuMode, ...]] = (SHARED, EXCLUSIVE_PROCESS)
MAX_GPUS: Final = 1_000_000  # per host: more is a typing slip (and no int64 overflows)
OPTIONS: Final = ("num", "mode", "j_exclusive")
_LISTED: Final = "num, mode or j_exclusive"
# LSF -gpu options XCE does not support (refused by name, not as unknown).
UNSUPPORTED: Final = frozenset(
    {"mps", "aff", "block", "gpack", "gvendor", "gmodel", "gtile", "gmem", "glink", "mig"}
)


class GpuError(ResReqError):
    """A problem in a `-gpu` string: `gpu requirement error at column 5: ...`."""

    def __str__(self) -> str:
        return f"gpu requirement error at column {self.column}: {self.message}"


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """A parsed `-gpu` string: `num` GPUs on each host of the job, their `mode`, and
    whether they are the job's alone (`exclusive`, LSF's j_exclusive)."""

    num: int = 1
    mode: GpuMode = SHARED
    exclusive: bool = False

    @property
    def text(self) -> str:
        """The request written out in full, as `-gpu` takes it."""
        return f"num={self.num}:mode={self.mode}:j_exclusive={'yes' if self.exclusive else 'no'}"


def _fail(column: int, message: str) -> NoReturn:
    raise GpuError(column, message)


def parse_gpu(text: str) -> GpuRequest:
    """Parse a `-gpu` string (see the module's grammar). Raises GpuError."""
    if text.strip() == "-":
        return GpuRequest()
    values: dict[str, tuple[str, int]] = {}  # option -> (value, its column)
    start = 0
    for item in text.split(":"):
        key, value, key_column, value_column = _option(item, start, len(text))
        if key in values:
            _fail(key_column, f"duplicate -gpu option '{key}'")
        values[key] = (value, value_column)
        start += len(item) + 1
    num = _num(*values["num"]) if "num" in values else 1
    mode: GpuMode = SHARED
    if "mode" in values and _choice("mode", MODES, *values["mode"]) == EXCLUSIVE_PROCESS:
        mode = EXCLUSIVE_PROCESS
    exclusive = False
    if "j_exclusive" in values:
        exclusive = _choice("j_exclusive", ("yes", "no"), *values["j_exclusive"]) == "yes"
    return GpuRequest(num, mode, exclusive or mode == EXCLUSIVE_PROCESS)


def _option(item: str, start: int, size: int) -> tuple[str, str, int, int]:
    """One `key=value` item that begins at offset `start`: its key and value (spaces
    stripped) and their 1-based columns."""
    stripped = item.lstrip()
    key_column = start + len(item) - len(stripped) + 1
    if not stripped.strip():
        at = key_column if start + len(item) < size else size + 1
        _fail(at, f"expected a -gpu option ({_LISTED})")
    key, equals, value = stripped.partition("=")
    key = key.rstrip()
    if key not in OPTIONS:
        if key in UNSUPPORTED:
            _fail(key_column, f"-gpu option '{key}' is not supported")
        _fail(key_column, f"unknown -gpu option '{key}' (expected {_LISTED})")
    if not equals:
        _fail(key_column + len(key), f"expected '=' after '{key}'")
    after = len(stripped) - len(value)  # offset of the value within `stripped`
    shown = value.strip()
    value_column = key_column + after + len(value) - len(value.lstrip())
    if not shown:
        at = value_column if start + len(item) < size else size + 1
        _fail(at, f"expected a value after '{key}='")
    return key, shown, key_column, value_column


def _num(value: str, column: int) -> int:
    """`num`: an integer >= 1, optionally `/host` (per host, the meaning anyway)."""
    count, slash, per = value.partition("/")
    count = count.rstrip()
    if slash and per.strip() != "host":
        at = column + len(value) - len(per.lstrip())
        if per.strip() == "task":
            _fail(at, "GPUs per task (num=N/task) are not supported: num is per host")
        _fail(at, f"expected 'host' after '/', found '{per.strip()}'")
    if not (count.isascii() and count.isdigit()) or int(count) < 1:
        _fail(column, f"num must be an integer >= 1, got '{count}'")
    if int(count) > MAX_GPUS:
        _fail(column, f"num must be at most {MAX_GPUS}, got {count}")
    return int(count)


def _choice(key: str, allowed: tuple[str, ...], value: str, column: int) -> str:
    if value not in allowed:
        _fail(column, f"{key} must be {' or '.join(allowed)}, got '{value}'")
    return value
