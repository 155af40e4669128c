"""LSF job arrays: `-J "name[index_list]%N"` (bsub -J), and index lists alone.

    parse_array("sweep[1-1000:2,2000]%10", max_size=2000)
    # ArraySpec(name="sweep", indices=(1, 3, ..., 999, 2000), limit=10)

Grammar (LSF's)::

    array      := name '[' index_list ']' ['%' limit]
    name       := (letter | digit | '.' | '-' | '_')*         (may be empty)
    index_list := item (',' item)*
    item       := start ['-' end [':' step]]                   [1-10:2] = 1 3 5 7 9

Spaces are allowed around numbers and separators inside the brackets. Indices are
whole numbers from 1 to `max_size` (LSF's MAX_JOB_ARRAY_SIZE bounds the largest index,
hence the number of elements too), each at most once; `end` >= `start`; `step` >= 1;
`limit` (elements running at once) >= 1. Every problem raises ArrayError at the
1-based column of the offending character, `len(text) + 1` at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NoReturn

from xce.resreq.errors import ResReqError

DEFAULT_MAX_SIZE: Final = 1000  # LSF's MAX_JOB_ARRAY_SIZE default
_NAME_RE: Final = re.compile(r"[A-Za-z0-9._\-]*")
_DIGITS_RE: Final = re.compile(r"[0-9]+")


class ArrayError(ResReqError):
    """A problem in a job array spec: `job array error at column 7: ...`."""

    def __str__(self) -> str:
        return f"job array error at column {self.column}: {self.message}"


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """A parsed `-J` array: its name, its indices in the order given, and how many of
    its elements may run at once (`limit`, 0: no limit)."""

    name: str
    indices: tuple[int, ...]
    limit: int = 0


def is_array(text: str) -> bool:
    """Whether a `-J` name asks for a job array (it has an index list in brackets)."""
    return "[" in text


def parse_array(text: str, max_size: int = DEFAULT_MAX_SIZE) -> ArraySpec:
    """Parse `name[index_list]%N`; ArrayError names the column of a problem."""
    name_match = _NAME_RE.match(text)
    assert name_match is not None  # (the pattern matches the empty string)
    at = name_match.end()
    if at >= len(text) or text[at] != "[":
        _fail(at + 1, f"unexpected character {text[at]!r} in the array name"
              if at < len(text) else "expected '[' and an index list after the name")
    indices, at = parse_index_list(text, at + 1, max_size)
    limit = 0
    if at < len(text):
        if text[at] != "%":
            _fail(at + 1, f"expected '%' and a limit after ']', not {text[at]!r}")
        digits = _DIGITS_RE.match(text, at + 1)
        if digits is None:
            _fail(at + 2, "expected the number of elements that may run at once after '%'")
        limit = int(digits.group())
        if limit < 1:
            _fail(at + 2, "the limit of elements running at once must be at least 1")
        if digits.end() < len(text):
            _fail(digits.end() + 1, f"unexpected {text[digits.end()]!r} after the limit")
    return ArraySpec(name_match.group(), indices, limit)


def parse_indices(text: str, max_size: int = DEFAULT_MAX_SIZE) -> ArraySpec:
    """An array given without its name, as scenarios and workloads write it:
    `index_list[%N]` (`"1-100%5"`, `"1-9:2,20"`); columns are those of `text`."""
    head, percent, limit = text.partition("%")
    try:
        return parse_array(f"[{head}]{percent}{limit}", max_size)
    except ArrayError as err:  # (columns of the text with its brackets)
        close = len(head) + 2
        message = err.message
        if err.column == close:
            message = message.replace("not ']'", "not '%'" if percent else "not end of input")
        column = err.column - 1 if err.column <= close else err.column - 2
        raise ArrayError(max(1, column), message) from err


def parse_index_list(text: str, at: int, max_size: int) -> tuple[tuple[int, ...], int]:
    """The index list starting at offset `at` (just past `[`) up to its `]`: the
    indices in the order given, and the offset just past the `]`."""
    parts: list[range] = []
    while True:
        start, start_col, at = _number(text, at, "an index")
        end, end_col, step = start, start_col, 1
        at = _spaces(text, at)
        if at < len(text) and text[at] == "-":
            end, end_col, at = _number(text, at + 1, "the end of the range")
            if end < start:
                _fail(end_col, f"the range ends at {end}, before its start {start}")
            at = _spaces(text, at)
            if at < len(text) and text[at] == ":":
                step, step_col, at = _number(text, at + 1, "a step")
                if step < 1:
                    _fail(step_col, "the step must be at least 1")
                at = _spaces(text, at)
        if start < 1:
            _fail(start_col, "indices start at 1")
        if end > max_size:
            _fail(end_col, f"index {end} exceeds max_job_array_size {max_size}")
        parts.append(range(start, end + 1, step))
        if at >= len(text):
            _fail(len(text) + 1, "expected ']' to close the index list")
        if text[at] == "]":
            return _unique(parts, at), at + 1
        if text[at] != ",":
            _fail(at + 1, f"expected ',' or ']' in the index list, not {text[at]!r}")
        at += 1


def _unique(parts: list[range], close: int) -> tuple[int, ...]:
    if len(parts) == 1:
        return tuple(parts[0])
    seen: set[int] = set()
    indices: list[int] = []
    for part in parts:
        for index in part:
            if index in seen:
                _fail(close + 1, f"index {index} is given twice")
            seen.add(index)
            indices.append(index)
    return tuple(indices)


def _spaces(text: str, at: int) -> int:
    while at < len(text) and text[at] == " ":
        at += 1
    return at


def _number(text: str, at: int, what: str) -> tuple[int, int, int]:
    """A whole number at `at` (after spaces): its value, its 1-based column and the
    offset just past it."""
    at = _spaces(text, at)
    digits = _DIGITS_RE.match(text, at)
    if digits is None:
        found = repr(text[at]) if at < len(text) else "end of input"
        _fail(at + 1, f"expected {what} (a whole number), not {found}")
    return int(digits.group()), at + 1, digits.end()


def _fail(column: int, message: str) -> NoReturn:
    raise ArrayError(column, message)
