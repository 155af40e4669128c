"""Select expressions: the syntax tree, its meaning over host attributes, and its
compilation to nested closures (compiled once, evaluated per host).

Meaning over `attrs` (host attributes `type`, `model`, `hname` are strings;
resources are numbers or booleans; an int is treated like a float):

* A name evaluates to its value in `attrs`; a name absent from `attrs` is *missing*.
* String literal rule: in a comparison whose one side is one of the string attributes
  `type`, `model`, `hname` and whose other side is any other name, that other name is
  a string literal: `type==X86_64`, `model!=Opteron`. It is always a literal (never
  looked up, whatever `attrs` holds), so it is not in `Select.names` and validation
  does not check it.
* `type==any` and `model==any` (also with a quoted `"any"`) are always true and
  `type!=any`, `model!=any` always false, even on a host without `type`/`model`.
* A comparison with a missing side is false, whatever the operator (`!=` included):
  a host without the resource never satisfies a condition on it.
* Numbers and booleans compare numerically, a boolean counting as 1 (True) or 0
  (False): `ssd==1` holds on a host whose `ssd` is True. Strings compare with strings
  (`==`, `!=`, and the ordering operators lexicographically by code point). A string
  compared with a number or boolean gives false.
* In a boolean position (the whole expression, an operand of `&&`, `||`, `!`), a
  value is true iff it is True or a non-zero number; False, zero, strings and missing
  names are false (`select[ssd]`). Comparisons, `&&`, `||` and `!` yield booleans,
  which may themselves be compared: `(a>1)==(b>1)`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

Value = str | float | bool
Attrs = Mapping[str, Value]
Predicate = Callable[[Attrs], bool]
ValueFn = Callable[[Attrs], Value | None]

STRING_ATTRS: Final = frozenset({"type", "model", "hname"})
WILDCARD_ATTRS: Final = frozenset({"type", "model"})
WILDCARD: Final = "any"
COMPARISONS: Final = frozenset({"==", "!=", "<", "<=", ">", ">="})

_OPERATORS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_MIRRORED: Final = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


# ---------------------------------------------------------------------------- syntax


@dataclass(frozen=True, slots=True)
class Name:
    """A name looked up in the host attributes."""

    name: str
    column: int


@dataclass(frozen=True, slots=True)
class Number:
    """A numeric literal (a leading `-` already applied)."""

    value: float
    column: int


@dataclass(frozen=True, slots=True)
class String:
    """A string literal: quoted, or a bare name compared with a string attribute."""

    value: str
    column: int
    quoted: bool


@dataclass(frozen=True, slots=True)
class Not:
    """`!operand` (or `not operand`)."""

    operand: Expr
    column: int


@dataclass(frozen=True, slots=True)
class Compare:
    """`left op right`; `op` is one of COMPARISONS (`=` is stored as `==`)."""

    op: str
    left: Expr
    right: Expr
    column: int


@dataclass(frozen=True, slots=True)
class And:
    """`a && b && ...` (two or more operands)."""

    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """`a || b || ...` (two or more operands)."""

    operands: tuple[Expr, ...]


Expr = Name | Number | String | Not | Compare | And | Or


def iter_names(expr: Expr) -> Iterator[Name]:
    """Every name looked up in `expr`, in text order (string literals excluded)."""
    if isinstance(expr, Name):
        yield expr
    elif isinstance(expr, Not):
        yield from iter_names(expr.operand)
    elif isinstance(expr, Compare):
        yield from iter_names(expr.left)
        yield from iter_names(expr.right)
    elif isinstance(expr, And | Or):
        for operand in expr.operands:
            yield from iter_names(operand)


def literal_rule(left: Expr, right: Expr) -> tuple[Expr, Expr]:
    """Apply the string literal rule to the operands of a comparison."""
    if isinstance(left, Name) and isinstance(right, Name):
        if left.name in STRING_ATTRS and right.name not in STRING_ATTRS:
            return left, String(right.name, right.column, quoted=False)
        if right.name in STRING_ATTRS and left.name not in STRING_ATTRS:
            return String(left.name, left.column, quoted=False), right
    return left, right


# ---------------------------------------------------------------------------- meaning


def compile_predicate(expr: Expr) -> Predicate:
    """`expr` in a boolean position, as a function of the host attributes."""
    if isinstance(expr, Name):
        return _truth_of_name(expr.name)
    if isinstance(expr, Number):
        return _constant(expr.value != 0)
    if isinstance(expr, String):
        return _constant(False)
    if isinstance(expr, Not):
        return _negation(compile_predicate(expr.operand))
    if isinstance(expr, Compare):
        return _comparison(expr)
    if isinstance(expr, And):
        return _conjunction(tuple(compile_predicate(e) for e in expr.operands))
    return _disjunction(tuple(compile_predicate(e) for e in expr.operands))


def compile_value(expr: Expr) -> ValueFn:
    """`expr` as an operand of a comparison: its value, None when missing."""
    if isinstance(expr, Name):
        name = expr.name

        def lookup(attrs: Attrs) -> Value | None:
            return attrs.get(name)

        return lookup
    if isinstance(expr, Number | String):
        value: Value = expr.value

        def literal(attrs: Attrs) -> Value | None:
            return value

        return literal
    return compile_predicate(expr)


def compare_values(op: str, left: Value | None, right: Value | None) -> bool:
    """`left op right` under the rules above (None = missing)."""
    if left is None or right is None:
        return False
    if isinstance(left, str) is not isinstance(right, str):
        return False
    try:
        return bool(_OPERATORS[op](left, right))
    except TypeError:  # values of types outside the contract
        return False


def _constant(verdict: bool) -> Predicate:
    def constant(attrs: Attrs) -> bool:
        return verdict

    return constant


def _truth_of_name(name: str) -> Predicate:
    def truth(attrs: Attrs) -> bool:
        value = attrs.get(name)
        # bool is an int: True != 0 and False == 0, as wanted.
        return isinstance(value, int | float) and value != 0

    return truth


def _negation(inner: Predicate) -> Predicate:
    def negation(attrs: Attrs) -> bool:
        return not inner(attrs)

    return negation


def _conjunction(parts: tuple[Predicate, ...]) -> Predicate:
    if len(parts) == 2:
        first, second = parts

        def both(attrs: Attrs) -> bool:
            return first(attrs) and second(attrs)

        return both

    def every(attrs: Attrs) -> bool:
        return all(part(attrs) for part in parts)

    return every


def _disjunction(parts: tuple[Predicate, ...]) -> Predicate:
    if len(parts) == 2:
        first, second = parts

        def either(attrs: Attrs) -> bool:
            return first(attrs) or second(attrs)

        return either

    def some(attrs: Attrs) -> bool:
        return any(part(attrs) for part in parts)

    return some


def _is_wildcard_test(attr: Expr, other: Expr) -> bool:
    return (
        isinstance(attr, Name)
        and attr.name in WILDCARD_ATTRS
        and isinstance(other, String)
        and other.value == WILDCARD
    )


def _comparison(expr: Compare) -> Predicate:
    op, left, right = expr.op, expr.left, expr.right
    if op in ("==", "!=") and (_is_wildcard_test(left, right) or _is_wildcard_test(right, left)):
        return _constant(op == "==")
    if isinstance(left, Number | String) and isinstance(right, Name):
        op, left, right = _MIRRORED[op], right, left
    if isinstance(left, Name) and isinstance(right, Number):
        return _name_vs_number(left.name, _OPERATORS[op], right.value)
    if isinstance(left, Name) and isinstance(right, String):
        return _name_vs_string(left.name, _OPERATORS[op], right.value)
    left_value, right_value = compile_value(left), compile_value(right)

    def general(attrs: Attrs) -> bool:
        return compare_values(op, left_value(attrs), right_value(attrs))

    return general


def _name_vs_number(name: str, test: Callable[[Any, Any], Any], number: float) -> Predicate:
    def name_vs_number(attrs: Attrs) -> bool:
        value = attrs.get(name)
        return isinstance(value, int | float) and bool(test(value, number))

    return name_vs_number


def _name_vs_string(name: str, test: Callable[[Any, Any], Any], string: str) -> Predicate:
    def name_vs_string(attrs: Attrs) -> bool:
        value = attrs.get(name)
        return isinstance(value, str) and bool(test(value, string))

    return name_vs_string


# ---------------------------------------------------------------------------- Select


class Select:
    """A compiled select expression; immutable, equal and hashable by its text.

    Obtained from `parse(...).select`; `Select("mem>500")` also compiles a bare
    expression (error columns then count within that string). Calling it with a
    host's attributes says whether the host satisfies the expression.

    `text`: the expression as written (stripped); `names`: every name looked up in the
    attributes (string literals excluded); `uses_hname`: whether `hname` is one of
    them, i.e. whether hosts with equal other attributes may still differ; `expr`: the
    syntax tree (columns count in the string it was parsed from).
    """

    __slots__ = ("_predicate", "expr", "names", "text", "uses_hname")

    text: str
    names: frozenset[str]
    uses_hname: bool
    expr: Expr
    _predicate: Predicate

    def __init__(self, text: str, expr: Expr | None = None) -> None:
        if expr is None:
            from xce.resreq.parser import parse_expression  # parser imports this module

            expr = parse_expression(text)
        names = frozenset(name.name for name in iter_names(expr))
        object.__setattr__(self, "text", text.strip())
        object.__setattr__(self, "expr", expr)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "uses_hname", "hname" in names)
        object.__setattr__(self, "_predicate", compile_predicate(expr))

    def __call__(self, attrs: Attrs) -> bool:
        """Whether a host with these attributes satisfies the expression."""
        return self._predicate(attrs)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Select is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Select is immutable (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Select):
            return NotImplemented
        return self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Select({self.text!r})"

    def __reduce__(self) -> tuple[type[Select], tuple[str]]:
        return (Select, (self.text,))
