"""Tokens of requirement strings, produced lazily so that errors come in text order.

Lexical rules (ASCII only; any other character is an error):

* Whitespace (anything `str.isspace` accepts) separates tokens and is otherwise ignored.
* A name starts with an ASCII letter or `_` and continues with letters, digits, `_`,
  `.` and `-`: `mem`, `X86_64`, `aws.c5`, `node-01.example.com`. Because `-` may occur
  inside a name, `a-1` is one name; a `-` that starts a token is the minus operator
  (`order[-mem]`, `mem>-1`). Names are case-sensitive.
* A number is decimal: `12`, `1.5`, `.5`, `5.`, `1e6`, `2.5E-3`. It must not run into
  a name character (`4000MB` is an error) and must be finite. Numbers carry no sign;
  the parser applies a leading `-`.
* A string is quoted with `'` or `"` and runs to the next identical quote; there are
  no escapes.
* Operators: `== != <= >= && || < > = ! ( ) [ ] : , -`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from xce.resreq.errors import ResReqError

NAME: Final = "name"
NUMBER: Final = "number"
STRING: Final = "string"
END: Final = "end"

_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_NUMBER_RE: Final = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAME_CHARS_RE: Final = re.compile(r"[A-Za-z0-9_.]*")
_TWO_CHAR_OPS: Final = frozenset({"==", "!=", "<=", ">=", "&&", "||"})
_ONE_CHAR_OPS: Final = frozenset("<>=!()[]:,-")


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its text as written and where it is."""

    kind: str  # NAME, NUMBER, STRING, END, or the operator itself (e.g. "&&")
    text: str  # as written; strings include their quotes; "" at the end
    column: int  # 1-based column of the first character
    end: int  # 0-based offset just past the token
    number: float = 0.0  # the value of a NUMBER token
    string: str = ""  # the contents of a STRING token

    def describe(self) -> str:
        """The token for an error message: `'&&'`, or `end of input`."""
        if self.kind == END:
            return "end of input"
        return f"'{self.text}'"


class Lexer:
    """A cursor over the tokens of `text`; tokens are scanned on demand."""

    __slots__ = ("_current", "_pos", "last_end", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.last_end = 0  # 0-based offset just past the last consumed token
        self._pos = 0
        self._current: Token | None = None

    def peek(self) -> Token:
        """The next token, without consuming it."""
        if self._current is None:
            self._current = self._scan()
        return self._current

    def advance(self) -> Token:
        """Consume and return the next token."""
        token = self.peek()
        self._current = None
        self.last_end = token.end
        return token

    def bracket_follows(self, token: Token) -> bool:
        """Whether the first non-space character after `token` is `[`."""
        text = self.text
        i = token.end
        while i < len(text) and text[i].isspace():
            i += 1
        return i < len(text) and text[i] == "["

    @property
    def column(self) -> int:
        """The 1-based column where scanning stands (for errors without a token)."""
        return self._pos + 1

    def _scan(self) -> Token:
        text = self.text
        pos = self._pos
        size = len(text)
        while pos < size and text[pos].isspace():
            pos += 1
        self._pos = pos
        if pos >= size:
            return Token(END, "", size + 1, size)
        char = text[pos]
        column = pos + 1
        match = _NAME_RE.match(text, pos)
        if match is not None:
            self._pos = match.end()
            return Token(NAME, match.group(), column, match.end())
        match = _NUMBER_RE.match(text, pos)
        if match is not None:
            return self._number(match.group(), column)
        if char in "'\"":
            close = text.find(char, pos + 1)
            if close < 0:
                raise ResReqError(
                    size + 1, f"expected {char!r} to close the string started at column {column}"
                )
            self._pos = close + 1
            contents = text[pos + 1 : close]
            return Token(STRING, text[pos : close + 1], column, close + 1, string=contents)
        pair = text[pos : pos + 2]
        if pair in _TWO_CHAR_OPS:
            self._pos = pos + 2
            return Token(pair, pair, column, pos + 2)
        if char in _ONE_CHAR_OPS:
            self._pos = pos + 1
            return Token(char, char, column, pos + 1)
        raise ResReqError(column, f"unexpected character {char!r}")

    def _number(self, digits: str, column: int) -> Token:
        start = column - 1
        end = start + len(digits)
        tail = _NAME_CHARS_RE.match(self.text, end)
        if tail is not None and tail.end() > end:
            raise ResReqError(column, f"invalid number '{self.text[start : tail.end()]}'")
        value = float(digits)
        if not math.isfinite(value):
            raise ResReqError(column, "number out of range")
        self._pos = end
        return Token(NUMBER, digits, column, end, number=value)
