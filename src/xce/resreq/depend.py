"""LSF job dependency expressions: `bsub -w` (`xce submit -w`).

    parse_depend('done(12) && (exit(13, >1) || ended("arr"[1-5]))')

Grammar (LSF's conditions; `&&` binds tighter than `||`; `!` tightest)::

    expr      := and ('||' and)*
    and       := unary ('&&' unary)*
    unary     := '!' unary | '(' expr ')' | condition
    condition := test '(' job ')'            test: done, ended, started, post_done, post_err
               | 'exit' '(' job [',' [op] code] ')'      op: == != < <= > >= (default ==)
               | job                                      a bare job means done(job)
    job       := id [elements] | name [elements]
    id        := a whole number: a job id, or a job array's id (every element)
    name      := a job name: letters, digits, '_', '.', '-', not starting with a digit,
                 or any text in double quotes ("99Job"); a trailing '*' matches every
                 name that starts with what comes before it
    elements  := '[' index_list ']'          those elements of the array (1-5,7,9-20:2)
               | '[' '*' ']'                 element i of a dependent array's element i

The other LSF conditions (numdone, numrun, ..., external) are refused as not
supported. Every problem raises DependError at the 1-based column of the offending
character or token, `len(text) + 1` at the end of the expression. Nodes keep the text
they were written as (`text`), which pend reasons quote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, NoReturn

from xce.resreq.arrays import ArrayError, parse_index_list
from xce.resreq.errors import ResReqError

DONE: Final = "done"
EXIT: Final = "exit"
ENDED: Final = "ended"
STARTED: Final = "started"
POST_DONE: Final = "post_done"
POST_ERR: Final = "post_err"
CONDITIONS: Final = (DONE, EXIT, ENDED, STARTED, POST_DONE, POST_ERR)
UNSUPPORTED: Final = frozenset({
    "external", "numdone", "numended", "numexit", "numhold", "numpend", "numrun",
    "numstart",
})
OPERATORS: Final = ("==", "!=", "<=", ">=", "<", ">")
MAX_DEPTH: Final = 100  # nested '(' and '!'
MAX_INDEX: Final = 2_147_483_646  # LSF's largest MAX_JOB_ARRAY_SIZE
_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_DIGITS_RE: Final = re.compile(r"[0-9]+")


class DependError(ResReqError):
    """A problem in a dependency expression: `dependency error at column 7: ...`."""

    def __str__(self) -> str:
        return f"dependency error at column {self.column}: {self.message}"


@dataclass(frozen=True, slots=True)
class JobRef:
    """The job(s) a condition names: by `job` id or by `name` (`wildcard`: a name
    prefix), optionally some array elements (`indices`) or, with `each`, the element
    of the same index as the dependent's."""

    job: int | None
    name: str | None
    text: str
    wildcard: bool = False
    indices: tuple[int, ...] | None = None
    each: bool = False
    column: int = 1  # where it is written (1-based)


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition on the job(s) `ref` names; for exit, `op` and `code` compare the
    exit code (`op` empty: any exit code)."""

    kind: str
    ref: JobRef
    text: str
    op: str = ""
    code: int = 0


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    text: str


@dataclass(frozen=True, slots=True)
class All:
    """`a && b && ...`"""

    parts: tuple[Node, ...]
    text: str


@dataclass(frozen=True, slots=True)
class Any:
    """`a || b || ...`"""

    parts: tuple[Node, ...]
    text: str


Node = Condition | Not | All | Any


def compare(code: int, op: str, wanted: int) -> bool:
    """Whether an exit `code` passes `op wanted` (an empty op: any code)."""
    if op == "":
        return True
    if op == "==":
        return code == wanted
    if op == "!=":
        return code != wanted
    if op == "<":
        return code < wanted
    if op == "<=":
        return code <= wanted
    if op == ">":
        return code > wanted
    return code >= wanted


def conditions_of(node: Node) -> list[Condition]:
    """Every condition of an expression, in text order."""
    if isinstance(node, Condition):
        return [node]
    if isinstance(node, Not):
        return conditions_of(node.operand)
    return [test for part in node.parts for test in conditions_of(part)]


@lru_cache(maxsize=4096)
def parse_depend(text: str) -> Node:
    """Parse a dependency expression (see the module's grammar); DependError names
    the column of a problem. Cached: the elements of an array share their string."""
    parser = _Parser(text)
    node = parser.expression(0)
    parser.skip()
    if parser.at < len(text):
        found = text[parser.at]
        if found == ")":
            parser.fail(parser.at + 1, "')' without a matching '('")
        parser.fail(parser.at + 1, f"expected '&&', '||' or the end, not {found!r}")
    return node


class _Parser:
    """A recursive-descent parser over the expression's characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, column: int, message: str) -> NoReturn:
        raise DependError(column, message)

    def skip(self) -> None:
        text, at = self.text, self.at
        while at < len(text) and text[at].isspace():
            at += 1
        self.at = at

    def looking_at(self, token: str) -> bool:
        self.skip()
        return self.text.startswith(token, self.at)

    def expect(self, token: str, what: str) -> None:
        if not self.looking_at(token):
            self.fail(self.at + 1, f"expected {what}, not {self._found()}")
        self.at += len(token)

    def _found(self) -> str:
        return repr(self.text[self.at]) if self.at < len(self.text) else "end of input"

    def _span(self, start: int) -> str:
        return self.text[start : self.at].strip()

    def expression(self, depth: int) -> Node:
        self.skip()
        start = self.at
        parts = [self.conjunction(depth)]
        while self.looking_at("||"):
            self.at += 2
            parts.append(self.conjunction(depth))
        return parts[0] if len(parts) == 1 else Any(tuple(parts), self._span(start))

    def conjunction(self, depth: int) -> Node:
        self.skip()
        start = self.at
        parts = [self.unary(depth)]
        while self.looking_at("&&"):
            self.at += 2
            parts.append(self.unary(depth))
        return parts[0] if len(parts) == 1 else All(tuple(parts), self._span(start))

    def unary(self, depth: int) -> Node:
        if depth >= MAX_DEPTH:
            self.fail(self.at + 1, f"more than {MAX_DEPTH} nested '(' and '!'")
        self.skip()
        start = self.at
        if self.looking_at("!") and not self.looking_at("!="):
            self.at += 1
            operand = self.unary(depth + 1)
            return Not(operand, self._span(start))
        if self.looking_at("("):
            self.at += 1
            inner = self.expression(depth + 1)
            self.expect(")", "')' to close the '(' at column " + str(start + 1))
            return inner
        if self.at >= len(self.text):
            self.fail(self.at + 1, "expected a condition, such as done(12), not end of input")
        return self.condition()

    def condition(self) -> Condition:
        start = self.at
        word = _NAME_RE.match(self.text, self.at)
        if word is not None:
            after = word.end()
            while after < len(self.text) and self.text[after].isspace():
                after += 1
            if after < len(self.text) and self.text[after] == "(":
                return self._test(word.group(), start, after + 1)
        ref = self.job()
        return Condition(DONE, ref, self._span(start))

    def _test(self, kind: str, start: int, open_at: int) -> Condition:
        if kind in UNSUPPORTED:
            self.fail(start + 1, f"the condition {kind}() is not supported")
        if kind not in CONDITIONS:
            self.fail(start + 1, f"unknown condition '{kind}': expected {', '.join(CONDITIONS)}")
        self.at = open_at
        ref = self.job()
        op, code = "", 0
        if self.looking_at(","):
            if kind != EXIT:
                self.fail(self.at + 1, f"{kind}() takes a job only (an exit code is for exit())")
            self.at += 1
            op, code = self._exit_code()
        self.expect(")", f"')' to close {kind}(")
        return Condition(kind, ref, self._span(start), op, code)

    def _exit_code(self) -> tuple[str, int]:
        self.skip()
        op = "=="
        for candidate in OPERATORS:
            if self.text.startswith(candidate, self.at):
                op = candidate
                self.at += len(candidate)
                break
        self.skip()
        digits = _DIGITS_RE.match(self.text, self.at)
        if digits is None:
            self.fail(self.at + 1, f"expected an exit code (a whole number), not {self._found()}")
        self.at = digits.end()
        return op, int(digits.group())

    def job(self) -> JobRef:
        self.skip()
        start = self.at
        text = self.text
        job: int | None = None
        name: str | None = None
        wildcard = False
        digits = _DIGITS_RE.match(text, self.at)
        if digits is not None:
            word = _NAME_RE.match(text, digits.end())
            if word is not None or text.startswith("*", digits.end()):
                self.fail(start + 1, "a job name that starts with a digit must be quoted: "
                          f'"{text[start:(word.end() if word else digits.end() + 1)]}"')
            job, self.at = int(digits.group()), digits.end()
        elif self.looking_at('"'):
            close = text.find('"', self.at + 1)
            if close < 0:
                self.fail(len(text) + 1, f"expected '\"' to close the name at column {start + 1}")
            name = text[self.at + 1 : close]
            if not name or name == "*":
                self.fail(start + 1, "expected a job name inside the quotes")
            self.at = close + 1
            if name.endswith("*"):
                name, wildcard = name[:-1], True
        else:
            word = _NAME_RE.match(text, self.at)
            if word is None:
                self.fail(self.at + 1, f"expected a job id or name, not {self._found()}")
            name, self.at = word.group(), word.end()
            if text.startswith("*", self.at):
                self.at += 1
                wildcard = True
                if _NAME_RE.match(text, self.at) or _DIGITS_RE.match(text, self.at):
                    self.fail(self.at + 1, "'*' may only end a job name")
        indices, each = self._elements()
        return JobRef(job, name, self._span(start), wildcard, indices, each, start + 1)

    def _elements(self) -> tuple[tuple[int, ...] | None, bool]:
        if not self.text.startswith("[", self.at):
            return None, False
        open_at = self.at
        self.at += 1
        self.skip()
        if self.text.startswith("*", self.at):
            self.at += 1
            self.expect("]", "']' after '[*'")
            return None, True
        try:
            indices, self.at = parse_index_list(self.text, self.at, MAX_INDEX)
        except ArrayError as err:
            self.fail(err.column, err.message)
        if not indices:
            self.fail(open_at + 1, "expected array indices")
        return indices, False
