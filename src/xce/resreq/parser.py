"""Recursive-descent parser of LSF-style requirement (`-R`) strings.

Grammar (tokens as in `xce.resreq.lexer`)::

    requirement := [expr] section*        a leading bare expr is the select
    section     := 'select' '[' expr ']'
                 | 'rusage' '[' item ((':' | ',') item)* ']'    item := name '=' number
                 | 'span' '[' ('hosts' '=' '1' | 'ptile' '=' integer) ']'
                 | 'order' '[' key (':' key)* ']'               key := ['-'] name
    expr        := conj (('||' | 'or') conj)*
    conj        := comp (('&&' | 'and') comp)*
    comp        := unary [cmp-op unary]        cmp-op := == = != < <= > >=
    unary       := ('!' | 'not')* primary
    primary     := number | '-' number | string | name | '(' expr ')'

* A section is a lowercase keyword followed by `[` (whitespace between them is
  allowed). Sections come in any order, each at most once, with or without
  whitespace between them. `same`, `cu` and `affinity` are recognised and rejected.
* A bare expression is the select when the string does not start with a section; it
  runs up to the first section (`mem>1000 rusage[mem=100]`).
* Precedence: `!` binds tighter than comparisons, which bind tighter than `&&`, then
  `||`; so `!a==0` is `(!a)==0`. Comparisons do not chain (`a<b<c` is an error). `=`
  is `==`. `and`, `or`, `not` are reserved words inside expressions.
* Nesting (each `(` and each `!`/`not` on the way down) is limited to MAX_DEPTH.

Every problem raises `ResReqError` with the 1-based column of the offending token
(`len(text) + 1` at the end of input).
"""

from __future__ import annotations

import functools
from typing import Final, NoReturn

from xce.resreq.errors import ResReqError
from xce.resreq.lexer import END, NAME, NUMBER, STRING, Lexer, Token
from xce.resreq.requirement import OrderKey, ResReq
from xce.resreq.select import (
    COMPARISONS,
    And,
    Compare,
    Expr,
    Name,
    Not,
    Number,
    Or,
    Select,
    String,
    iter_names,
    literal_rule,
)

MAX_DEPTH: Final = 100
SECTIONS: Final = frozenset({"select", "rusage", "span", "order"})
UNSUPPORTED_SECTIONS: Final = frozenset({"same", "cu", "affinity"})
_COMPARISON_TOKENS: Final = COMPARISONS | {"="}
_DEPTH_MESSAGE: Final = "expression nested too deeply"


@functools.lru_cache(maxsize=65536)
def parse(text: str) -> ResReq:
    """Parse a requirement string; the same text gives the same (cached) object.

    Raises ResReqError, and nothing else, for any text that is not a requirement.
    """
    parser = _Parser(text)
    try:
        return parser.requirement()
    except RecursionError:  # a safety net: MAX_DEPTH keeps the recursion shallow
        raise ResReqError(parser.lexer.column, _DEPTH_MESSAGE) from None


def parse_expression(text: str) -> Expr:
    """Parse a whole string as one select expression (columns count within `text`)."""
    parser = _Parser(text)
    try:
        return parser.lone_expression()
    except RecursionError:
        raise ResReqError(parser.lexer.column, _DEPTH_MESSAGE) from None


def _fail(column: int, message: str) -> NoReturn:
    raise ResReqError(column, message)


class _Parser:
    __slots__ = ("depth", "lexer", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lexer = Lexer(text)
        self.depth = 0

    # ------------------------------------------------------------------ top level

    def requirement(self) -> ResReq:
        lexer, text = self.lexer, self.text
        select: Select | None = None
        rusage: tuple[tuple[str, float], ...] = ()
        span: tuple[int | None, int | None] = (None, None)
        order: tuple[OrderKey, ...] = ()
        names: list[tuple[str, int, str]] = []
        seen: set[str] = set()

        first = lexer.peek()
        if first.kind != END and not self._is_section(first):
            expr = self.expression(None)
            select = Select(text[first.column - 1 : lexer.last_end], expr)
            seen.add("select")
            token = lexer.peek()
            if token.kind != END and not self._is_section(token):
                _fail(token.column, f"expected an operator or a section, found {token.describe()}")

        while (token := lexer.peek()).kind != END:
            if not self._is_section(token):
                if token.kind == "||" and "rusage" in seen:
                    _fail(token.column, "alternative rusage sections are not supported")
                _fail(
                    token.column,
                    f"expected a section (select, rusage, span, order), found {token.describe()}",
                )
            keyword = token.text
            if keyword in UNSUPPORTED_SECTIONS:
                _fail(token.column, f"section '{keyword}' is not supported")
            if keyword not in SECTIONS:
                _fail(token.column, f"unknown section '{keyword}'")
            if keyword in seen:
                _fail(token.column, f"duplicate {keyword} section")
            seen.add(keyword)
            lexer.advance()
            opening = lexer.advance()  # the '[' that _is_section saw
            if keyword == "select":
                select = self._select_section(opening)
            elif keyword == "rusage":
                rusage = self._rusage_section(names)
            elif keyword == "span":
                span = self._span_section()
            else:
                order = self._order_section(names)
            closing = lexer.peek()
            if closing.kind != "]":
                _fail(closing.column, f"expected ']' to close {keyword}")
            lexer.advance()

        if select is not None:
            names.extend((name.name, name.column, "select") for name in iter_names(select.expr))
        names.sort(key=lambda entry: entry[1])
        return ResReq(
            text=text,
            select=select,
            rusage=rusage,
            span_hosts=span[0],
            span_ptile=span[1],
            order=order,
            name_columns=tuple(names),
        )

    def lone_expression(self) -> Expr:
        expr = self.expression(None)
        token = self.lexer.peek()
        if token.kind != END:
            _fail(token.column, f"expected an operator or end of input, found {token.describe()}")
        return expr

    def _is_section(self, token: Token) -> bool:
        return token.kind == NAME and self.lexer.bracket_follows(token)

    # ------------------------------------------------------------------ sections

    def _select_section(self, opening: Token) -> Select:
        lexer = self.lexer
        if lexer.peek().kind == "]":
            _fail(lexer.peek().column, "expected an expression")
        expr = self.expression(None)
        return Select(self.text[opening.end : lexer.last_end], expr)

    def _rusage_section(self, names: list[tuple[str, int, str]]) -> tuple[tuple[str, float], ...]:
        lexer = self.lexer
        items: list[tuple[str, float]] = []
        while True:
            token = lexer.peek()
            if token.kind != NAME:
                _fail(token.column, f"expected a resource name, found {token.describe()}")
            name = token.text
            if name in ("duration", "decay"):
                _fail(token.column, "rusage duration/decay is not supported")
            if any(name == seen for seen, _amount in items):
                _fail(token.column, f"duplicate resource '{name}' in rusage")
            lexer.advance()
            self._expect_equals(name)
            amount = lexer.peek()
            if amount.kind == "-":
                _fail(amount.column, "rusage amounts must not be negative")
            if amount.kind != NUMBER:
                _fail(amount.column, f"expected a number after '=', found {amount.describe()}")
            lexer.advance()
            items.append((name, amount.number))
            names.append((name, token.column, "rusage"))
            if lexer.peek().kind not in (":", ","):
                return tuple(items)
            lexer.advance()

    def _span_section(self) -> tuple[int | None, int | None]:
        lexer = self.lexer
        token = lexer.peek()
        if token.kind != NAME or token.text not in ("hosts", "ptile"):
            if token.kind == NAME:
                _fail(token.column, f"unknown span option '{token.text}' (expected hosts or ptile)")
            _fail(token.column, f"expected hosts or ptile, found {token.describe()}")
        option = lexer.advance().text
        self._expect_equals(option)
        column, value = self._integer()
        if option == "hosts":
            if value != 1:
                _fail(column, "span[hosts=N] is supported only with N=1")
            result: tuple[int | None, int | None] = (1, None)
        else:
            if value is None or value < 1:
                _fail(column, "ptile must be an integer >= 1")
            result = (None, value)
        separator = lexer.peek().kind
        separated = separator in (":", ",")
        if separated:
            lexer.advance()
        other = lexer.peek()
        if other.kind == NAME and other.text in ("hosts", "ptile"):
            _fail(other.column, "span takes only one of hosts and ptile")
        if separated:
            _fail(
                other.column,
                f"expected hosts or ptile after '{separator}', found {other.describe()}",
            )
        return result

    def _integer(self) -> tuple[int, int | None]:
        """A possibly negative number: its column and its value if it is an integer."""
        lexer = self.lexer
        token = lexer.peek()
        column, sign = token.column, 1
        if token.kind == "-":
            lexer.advance()
            sign = -1
            token = lexer.peek()
        if token.kind != NUMBER:
            _fail(token.column, f"expected a number after '=', found {token.describe()}")
        lexer.advance()
        if not token.text.isdigit():
            return column, None
        # The lexer keeps numbers finite, so at most 309 significant digits remain.
        return column, sign * int(token.text.lstrip("0") or "0")

    def _order_section(self, names: list[tuple[str, int, str]]) -> tuple[OrderKey, ...]:
        lexer = self.lexer
        keys: list[OrderKey] = []
        while True:
            token = lexer.peek()
            descending = True
            if token.kind == "-":
                lexer.advance()
                descending = False
                token = lexer.peek()
                if token.kind != NAME:
                    found = token.describe()
                    _fail(token.column, f"expected a resource name after '-', found {found}")
            elif token.kind != NAME:
                _fail(token.column, f"expected a resource name, found {token.describe()}")
            if any(key.name == token.text for key in keys):
                _fail(token.column, f"duplicate order key '{token.text}'")
            lexer.advance()
            keys.append(OrderKey(token.text, descending))
            names.append((token.text, token.column, "order"))
            if lexer.peek().kind != ":":
                return tuple(keys)
            lexer.advance()

    def _expect_equals(self, name: str) -> None:
        token = self.lexer.peek()
        if token.kind != "=":
            _fail(token.column, f"expected '=' after '{name}', found {token.describe()}")
        self.lexer.advance()

    # ------------------------------------------------------------------ expressions

    def expression(self, after: Token | None) -> Expr:
        """`conj (|| conj)*`; `after` is the token before it, for error messages."""
        lexer = self.lexer
        operands = [self._conjunction(after)]
        while (token := lexer.peek()).kind == "||" or (token.kind == NAME and token.text == "or"):
            lexer.advance()
            operands.append(self._conjunction(token))
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _conjunction(self, after: Token | None) -> Expr:
        lexer = self.lexer
        operands = [self._comparison(after)]
        while (token := lexer.peek()).kind == "&&" or (token.kind == NAME and token.text == "and"):
            lexer.advance()
            operands.append(self._comparison(token))
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _comparison(self, after: Token | None) -> Expr:
        lexer = self.lexer
        left = self._unary(after)
        operator = lexer.peek()
        if operator.kind not in _COMPARISON_TOKENS:
            return left
        lexer.advance()
        right = self._unary(operator)
        token = lexer.peek()
        if token.kind in _COMPARISON_TOKENS:
            _fail(token.column, "comparison operators cannot be chained; use '&&'")
        left, right = literal_rule(left, right)
        op = "==" if operator.kind == "=" else operator.kind
        return Compare(op, left, right, operator.column)

    def _unary(self, after: Token | None) -> Expr:
        lexer = self.lexer
        negations: list[Token] = []
        while (token := lexer.peek()).kind == "!" or (token.kind == NAME and token.text == "not"):
            self._enter(token)
            negations.append(lexer.advance())
            after = token
        expr = self._primary(after)
        for token in reversed(negations):
            expr = Not(expr, token.column)
        self.depth -= len(negations)
        return expr

    def _primary(self, after: Token | None) -> Expr:
        lexer = self.lexer
        token = lexer.peek()
        if token.kind == NUMBER:
            lexer.advance()
            return Number(token.number, token.column)
        if token.kind == "-":
            lexer.advance()
            number = lexer.peek()
            if number.kind != NUMBER:
                _fail(number.column, f"expected a number after '-', found {number.describe()}")
            lexer.advance()
            return Number(-number.number, token.column)
        if token.kind == STRING:
            lexer.advance()
            return String(token.string, token.column, quoted=True)
        if token.kind == NAME and token.text not in ("and", "or") and not self._is_section(token):
            lexer.advance()
            return Name(token.text, token.column)
        if token.kind == "(":
            self._enter(token)
            lexer.advance()
            inner = self.expression(token)
            closing = lexer.peek()
            if closing.kind != ")":
                _fail(
                    closing.column,
                    f"expected ')' to match '(' at column {token.column}, "
                    f"found {closing.describe()}",
                )
            lexer.advance()
            self.depth -= 1
            return inner
        self._missing_operand(token, after)

    def _enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            _fail(token.column, _DEPTH_MESSAGE)

    def _missing_operand(self, token: Token, after: Token | None) -> NoReturn:
        if self._is_section(token) and token.text not in SECTIONS | UNSUPPORTED_SECTIONS:
            _fail(token.column, f"unknown section '{token.text}'")
        if after is None:
            _fail(token.column, "expected an expression")
        if after.kind in _COMPARISON_TOKENS:
            _fail(token.column, f"expected a number or name after '{after.text}'")
        _fail(token.column, f"expected an expression after '{after.text}'")
