"""Property tests of xce.resreq: any text gives a ResReq or a located ResReqError, and
generated select expressions evaluate as a reference evaluator says."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from xce.resreq import OrderKey, ResReq, ResReqError, parse

FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_SLOW = settings(FUZZ, max_examples=200)  # for strategies expensive to draw from


def parse_or_error(text: str) -> ResReq | ResReqError:
    """Parse; anything but a ResReq or a ResReqError propagates and fails the test."""
    try:
        result = parse(text)
    except ResReqError as err:
        assert 1 <= err.column <= len(text) + 1, (text, err.column)
        assert str(err) == f"requirement error at column {err.column}: {err.message}"
        assert err.message
        return err
    assert isinstance(result, ResReq)
    assert result.text == text
    for name, column, section in result.name_columns:
        assert text[column - 1 : column - 1 + len(name)] == name
        assert section in ("select", "rusage", "order")
    return result


# ---------------------------------------------------------------------------- any text


@FUZZ
@given(st.text(max_size=120))
def test_arbitrary_text(text: str) -> None:
    parse_or_error(text)


FRAGMENTS = [
    "select[", "rusage[", "span[", "order[", "same[", "cu[", "foo[", "select", "[", "]",
    "(", ")", "&&", "||", "!", "==", "=", "!=", "<", "<=", ">", ">=", "&", "|", "and",
    "or", "not", "mem", "type", "model", "hname", "X86_64", "any", "aws.c5", "n-01",
    "slots", "ssd", "0", "1", "-", "2.5", "1e3", "1e999", ".5", "'x'", '"y z"', "'", '"',
    " ", " ", ":", ",", "hosts=1", "hosts=2", "ptile=", "ptile=4", "duration=", "decay",
    "#", ".", "e", "\t", "mem=100", "-mem", "\u00e9", "((((((((((", "!!!!!!!!!!",
]  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_grammar_fragments(text: str) -> None:
    parse_or_error(text)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 3000), st.sampled_from(["(", "!", "not ", "-", "( !", "select[("]))
def test_deep_nesting_gives_an_error_not_a_crash(count: int, unit: str) -> None:
    outcome = parse_or_error(unit * count + "ssd" + ")" * count)
    if count > 100 and unit != "-":
        assert isinstance(outcome, ResReqError)


# ---------------------------------------------------------------------------- sections


NAMES = st.sampled_from(["mem", "gpu", "vcs", "aws.c5", "n-01", "X86_64", "_t"])


@st.composite
def requirements(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A requirement string with random sections in random order, and its meaning."""
    sections: list[str] = []
    expected: dict[str, Any] = {"rusage": (), "span": (None, None), "order": ()}
    if draw(st.booleans()):
        amounts = draw(
            st.dictionaries(NAMES, st.floats(0, 1e9) | st.integers(0, 10**6), min_size=1)
        )
        items = [f"{k}={v!r}" for k, v in amounts.items()]
        seps = draw(st.lists(st.sampled_from([":", ",", " : ", " ,"]), min_size=len(items)))
        body = "".join(s + i for s, i in zip(seps, items, strict=False))[len(seps[0]) :]
        sections.append(f"rusage[{body}]")
        expected["rusage"] = tuple((k, float(v)) for k, v in amounts.items())
    if draw(st.booleans()):
        if draw(st.booleans()):
            sections.append("span[hosts=1]")
            expected["span"] = (1, None)
        else:
            ptile = draw(st.integers(1, 10**12))
            sections.append(f"span[ ptile = {ptile} ]")
            expected["span"] = (None, ptile)
    if draw(st.booleans()):
        keys = draw(st.lists(NAMES, min_size=1, unique=True))
        signs = draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
        sections.append(
            "order["
            + ":".join(("" if d else "-") + k for k, d in zip(keys, signs, strict=True))
            + "]"
        )
        expected["order"] = tuple(OrderKey(k, d) for k, d in zip(keys, signs, strict=True))
    order = draw(st.permutations(sections))
    gaps = draw(st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=len(order) + 1))
    text = gaps[0] + "".join(s + g for s, g in zip(order, gaps[1:], strict=False))
    return text, expected


@FUZZ_SLOW
@given(requirements())
def test_sections_round_trip(case: tuple[str, dict[str, Any]]) -> None:
    text, expected = case
    req = parse_or_error(text)
    assert isinstance(req, ResReq), req
    assert req.select is None
    assert req.rusage == expected["rusage"]
    assert (req.span_hosts, req.span_ptile) == expected["span"]
    assert req.order == expected["order"]


# ---------------------------------------------------------------------------- select

# A tree is a tuple: ("name", n) ("num", value, text) ("str", value, quote)
# ("paren", t) ("not", spelling, t) ("cmp", op, t, t) ("and"|"or", spelling, [t, ...]).
Tree = tuple[Any, ...]

STRING_ATTRS = {"type", "model", "hname"}
EXPR_NAMES = ["mem", "gpu", "ssd", "fast", "absent", "type", "model", "hname", "X86_64", "any"]
STRINGS = ["X86_64", "LINUX", "any", "aws.c5", "", "a b", "]"]
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def number_leaf(value: float, as_int: bool) -> Tree:
    if as_int and value == int(value) and abs(value) < 1e15:
        return ("num", float(value), str(int(value)))
    return ("num", float(value), repr(float(value)))


NUMBERS = st.builds(
    number_leaf,
    st.sampled_from([0.0, 1.0, 2.0, 2.5, 16.0, -1.0, -2.5]) | st.floats(-1e6, 1e6),
    st.booleans(),
)
NAME_LEAVES = st.sampled_from(EXPR_NAMES).map(lambda n: ("name", n))
STRING_LEAVES = st.tuples(st.just("str"), st.sampled_from(STRINGS), st.sampled_from(["'", '"']))
SMALL_NUMBERS = st.sampled_from([0.0, 1.0, 2.0, 16.0, -1.0]).map(lambda v: number_leaf(v, True))
# The usual shapes of conditions, so that they are frequent: resource vs number,
# string attribute vs word (literal rule, `any`) or quoted string.
CONDITIONS = st.tuples(
    st.just("cmp"),
    st.sampled_from(list(OPS)),
    st.sampled_from(["mem", "gpu", "ssd", "fast", "absent"]).map(lambda n: ("name", n)),
    SMALL_NUMBERS,
) | st.tuples(
    st.just("cmp"),
    st.sampled_from(["==", "!=", "=", "<"]),
    st.sampled_from(sorted(STRING_ATTRS)).map(lambda n: ("name", n)),
    NAME_LEAVES | STRING_LEAVES,
)
LEAVES = NAME_LEAVES | NUMBERS | STRING_LEAVES | CONDITIONS


def extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    return st.one_of(
        st.tuples(st.just("paren"), children),
        st.tuples(st.just("not"), st.sampled_from(["!", "not "]), children),
        st.tuples(st.just("cmp"), st.sampled_from(list(OPS)), children, children),
        st.tuples(st.just("and"), st.sampled_from(["&&", " && ", " and "]), some(children)),
        st.tuples(st.just("or"), st.sampled_from(["||", " || ", " or "]), some(children)),
    )


def some(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[list[Tree]]:
    return st.lists(children, min_size=2, max_size=3)


TREES = st.recursive(LEAVES, extend, max_leaves=8)

PRECEDENCE = {"or": 1, "and": 2, "cmp": 3, "not": 4}


def render(tree: Tree) -> tuple[str, int]:
    """Text of a tree with the parentheses precedence needs, and its precedence."""
    kind = tree[0]
    if kind == "name":
        return tree[1], 5
    if kind == "num":
        return tree[2], 5
    if kind == "str":
        return tree[2] + tree[1] + tree[2], 5
    if kind == "paren":
        return "(" + render(tree[1])[0] + ")", 5
    if kind == "not":
        return tree[1] + operand(tree[2], 4), 4
    if kind == "cmp":
        return operand(tree[2], 4) + tree[1] + operand(tree[3], 4), 3
    own = PRECEDENCE[kind]
    return tree[1].join(operand(child, own) for child in tree[2]), own


def operand(tree: Tree, needed: int) -> str:
    text, precedence = render(tree)
    return text if precedence >= needed else "(" + text + ")"


def depth(tree: Tree) -> int:
    kind = tree[0]
    if kind in ("name", "num", "str"):
        return 0
    if kind in ("paren", "not"):
        return 1 + depth(tree[-1])
    children = tree[2:] if kind == "cmp" else tree[2]
    return 1 + max(depth(child) for child in children)


MISSING = object()


def unwrap(tree: Tree) -> Tree:
    while tree[0] == "paren":
        tree = tree[1]
    return tree


def literal_rule(left: Tree, right: Tree) -> tuple[Tree, Tree]:
    """FORMATS: a name compared with type/model/hname is a string literal."""
    if left[0] == "name" and right[0] == "name":
        if left[1] in STRING_ATTRS and right[1] not in STRING_ATTRS:
            return left, ("str", right[1], "")
        if right[1] in STRING_ATTRS and left[1] not in STRING_ATTRS:
            return ("str", left[1], ""), right
    return left, right


def reference_value(tree: Tree, attrs: dict[str, Any]) -> Any:
    tree = unwrap(tree)
    kind = tree[0]
    if kind == "name":
        return attrs.get(tree[1], MISSING)
    if kind in ("num", "str"):
        return tree[1]
    return reference_truth(tree, attrs)


def reference_truth(tree: Tree, attrs: dict[str, Any]) -> bool:
    tree = unwrap(tree)
    kind = tree[0]
    if kind in ("name", "num", "str"):
        value = reference_value(tree, attrs)
        if value is True:
            return True
        return type(value) in (int, float) and bool(value != 0)
    if kind == "not":
        return not reference_truth(tree[2], attrs)
    if kind == "and":
        return all(reference_truth(child, attrs) for child in tree[2])
    if kind == "or":
        return any(reference_truth(child, attrs) for child in tree[2])
    op = tree[1]
    left, right = literal_rule(unwrap(tree[2]), unwrap(tree[3]))
    if op in ("==", "=", "!="):
        for attr, other in ((left, right), (right, left)):
            if attr[:2] in (("name", "type"), ("name", "model")) and other[:2] == ("str", "any"):
                return bool(op != "!=")
    lhs, rhs = reference_value(left, attrs), reference_value(right, attrs)
    if lhs is MISSING or rhs is MISSING:
        return False
    if isinstance(lhs, str) != isinstance(rhs, str):
        return False
    return bool(OPS[op](lhs, rhs))


def reference_names(tree: Tree) -> set[str]:
    tree = unwrap(tree)
    kind = tree[0]
    if kind == "name":
        return {tree[1]}
    if kind in ("num", "str"):
        return set()
    if kind == "not":
        return reference_names(tree[2])
    if kind == "cmp":
        left, right = literal_rule(unwrap(tree[2]), unwrap(tree[3]))
        return reference_names(left) | reference_names(right)
    return set().union(*(reference_names(child) for child in tree[2]))


ATTR_VALUES = (
    st.sampled_from([0.0, 1.0, 2.0, 2.5, 16.0, -1.0, -2.5, True, False, True, False])
    | st.floats(-1e6, 1e6)
    | st.integers(-3, 3)
    | st.sampled_from(STRINGS)
)
ATTR_NAMES = [*EXPR_NAMES, "slots"]
ATTRS = st.tuples(*(st.none() | ATTR_VALUES for _ in ATTR_NAMES)).map(
    lambda values: {k: v for k, v in zip(ATTR_NAMES, values, strict=True) if v is not None}
)


@settings(FUZZ, max_examples=250)
@given(TREES, st.lists(ATTRS, min_size=1, max_size=4))
def test_select_matches_reference(tree: Tree, hosts: list[dict[str, Any]]) -> None:
    assume(depth(tree) < 90)
    expr = render(tree)[0]
    bare = parse(expr)
    boxed = parse(f" select[ {expr} ] rusage[mem=1]")
    assert bare.select is not None and boxed.select is not None
    assert bare.select.text == boxed.select.text == expr.strip()
    assert bare.select.names == boxed.select.names == reference_names(tree)
    assert bare.select.uses_hname == ("hname" in reference_names(tree))
    for attrs in hosts:
        expected = reference_truth(tree, attrs)
        assert bare.select(attrs) is expected, (expr, attrs)
        assert boxed.select(attrs) is expected, (expr, attrs)


@settings(FUZZ, max_examples=200)
@given(
    st.lists(CONDITIONS, min_size=1, max_size=3),
    st.sampled_from([" && ", " || "]),
    st.lists(ATTRS, min_size=1, max_size=4),
)
def test_conditions_match_reference(
    conditions: list[Tree], joiner: str, hosts: list[dict[str, Any]]
) -> None:
    tree: Tree = conditions[0]
    if len(conditions) > 1:
        tree = ("and" if "&" in joiner else "or", joiner, conditions)
    sel = parse(render(tree)[0]).select
    assert sel is not None
    for attrs in hosts:
        assert sel(attrs) is reference_truth(tree, attrs), (sel.text, attrs)
