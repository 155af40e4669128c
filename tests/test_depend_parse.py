"""The languages of issue 21: job array specs (`-J "name[1-1000:2]%10"`) and
dependency expressions (`-w`), parsed as LSF writes them; every error names the column
(xce.resreq.arrays, xce.resreq.depend)."""

from __future__ import annotations

import pytest

from xce.resreq.arrays import ArrayError, is_array, parse_array, parse_indices
from xce.resreq.depend import All, Any, Condition, DependError, Not, conditions_of, parse_depend

# --------------------------------------------------------------------------- arrays


@pytest.mark.parametrize(("text", "name", "indices", "limit"), [
    ("arr[1-5]", "arr", (1, 2, 3, 4, 5), 0),
    ("sweep[1-10:2,20]%3", "sweep", (1, 3, 5, 7, 9, 20), 3),
    ("[7]", "", (7,), 0),
    ("a.b-c_d[ 1 - 4 : 2 , 9 ]%2", "a.b-c_d", (1, 3, 9), 2),
    ("x[1-1000]%10", "x", tuple(range(1, 1001)), 10),
    ("x[1-10:20]", "x", (1,), 0),
])
def test_array_specs_give_name_indices_in_order_and_limit(text, name, indices, limit):
    spec = parse_array(text)
    assert (spec.name, spec.indices, spec.limit) == (name, indices, limit)


@pytest.mark.parametrize(("text", "column", "message"), [
    ("arr[1-5", 8, "expected ']' to close the index list"),
    ("arr[0-5]", 5, "indices start at 1"),
    ("arr[5-1]", 7, "the range ends at 1, before its start 5"),
    ("arr[1-5:0]", 9, "the step must be at least 1"),
    ("arr[1-5]%0", 10, "the limit of elements running at once must be at least 1"),
    ("arr[1-5]%", 10, "expected the number of elements that may run at once after '%'"),
    ("arr[1-5]x", 9, "expected '%' and a limit after ']', not 'x'"),
    ("arr[1-5]%3x", 11, "unexpected 'x' after the limit"),
    ("a b[1]", 2, "unexpected character ' ' in the array name"),
    ("arr[1,2,1]", 10, "index 1 is given twice"),
    ("arr[1-1001]", 7, "index 1001 exceeds max_job_array_size 1000"),
    ("arr[]", 5, "expected an index (a whole number), not ']'"),
    ("arr[1;2]", 6, "expected ',' or ']' in the index list, not ';'"),
])
def test_array_spec_errors_name_the_column(text, column, message):
    with pytest.raises(ArrayError) as caught:
        parse_array(text)
    assert (caught.value.column, caught.value.message) == (column, message)
    assert str(caught.value) == f"job array error at column {column}: {message}"


def test_max_job_array_size_bounds_the_largest_index_not_only_the_count():
    assert parse_array("a[1-2000]", 2000).indices[-1] == 2000
    with pytest.raises(ArrayError, match="index 11 exceeds max_job_array_size 10"):
        parse_array("a[11]", 10)


def test_only_a_name_with_brackets_is_an_array():
    assert is_array("arr[1-3]") and is_array("[1]")
    assert not is_array("arr") and not is_array("")


@pytest.mark.parametrize(("text", "column", "message"), [
    ("1-", 3, "expected the end of the range (a whole number), not end of input"),
    ("1-%3", 3, "expected the end of the range (a whole number), not '%'"),
    ("0-3", 1, "indices start at 1"),
    ("1-3%0", 5, "the limit of elements running at once must be at least 1"),
    ("1,1", 4, "index 1 is given twice"),
])
def test_indices_without_a_name_as_workloads_write_them_name_their_own_columns(
    text, column, message
):
    with pytest.raises(ArrayError) as caught:
        parse_indices(text)
    assert (caught.value.column, caught.value.message) == (column, message)


def test_indices_without_a_name():
    spec = parse_indices("1-100%5")
    assert (spec.name, spec.indices, spec.limit) == ("", tuple(range(1, 101)), 5)


# --------------------------------------------------------------------------- -w


def test_the_issue_expression_parses_with_and_binding_tighter_than_or():
    node = parse_depend("done(12) && (exit(13) || ended(arr[1-5]))")
    assert isinstance(node, All)
    done, alternatives = node.parts
    assert isinstance(done, Condition) and (done.kind, done.ref.job) == ("done", 12)
    assert isinstance(alternatives, Any)
    assert alternatives.text == "exit(13) || ended(arr[1-5])"
    exit_, ended = alternatives.parts
    assert isinstance(exit_, Condition) and (exit_.kind, exit_.op) == ("exit", "")
    assert isinstance(ended, Condition) and ended.ref.name == "arr"
    assert ended.ref.indices == (1, 2, 3, 4, 5)
    node = parse_depend("done(1) || done(2) && done(3)")
    assert isinstance(node, Any) and isinstance(node.parts[1], All), "&& binds tighter"


@pytest.mark.parametrize(("text", "kind", "job", "name", "op", "code"), [
    ("12", "done", 12, None, "", 0),
    ("myjob", "done", None, "myjob", "", 0),
    ('"99Job"', "done", None, "99Job", "", 0),
    ("ended(12)", "ended", 12, None, "", 0),
    ("started(a.b-c)", "started", None, "a.b-c", "", 0),
    ("post_done(5)", "post_done", 5, None, "", 0),
    ("post_err(5)", "post_err", 5, None, "", 0),
    ("exit(678, 0)", "exit", 678, None, "==", 0),
    ('exit("678", !=0)', "exit", None, "678", "!=", 0),
    ("exit(job, >= 2)", "exit", None, "job", ">=", 2),
    ("exit(7,<3)", "exit", 7, None, "<", 3),
    (" done ( 12 ) ", "done", 12, None, "", 0),
])
def test_conditions_as_lsf_writes_them(text, kind, job, name, op, code):
    node = parse_depend(text)
    assert isinstance(node, Condition)
    assert (node.kind, node.ref.job, node.ref.name, node.op, node.code) == (
        kind, job, name, op, code
    )


def test_names_wildcards_elements_and_one_to_one():
    (wild, element, each, quoted) = conditions_of(
        parse_depend('done(step*) && done(12[3]) && done(arr[*]) && ended("a*")')
    )
    assert (wild.ref.name, wild.ref.wildcard) == ("step", True)
    assert (element.ref.job, element.ref.indices) == (12, (3,))
    assert (each.ref.name, each.ref.each) == ("arr", True)
    assert (quoted.ref.name, quoted.ref.wildcard) == ("a", True)


def test_not_and_parentheses_keep_the_text_pend_reasons_quote():
    node = parse_depend("!(done(1) || started(2))")
    assert isinstance(node, Not) and node.text == "!(done(1) || started(2))"
    assert isinstance(node.operand, Any) and node.operand.text == "done(1) || started(2)"


@pytest.mark.parametrize(("text", "column", "message"), [
    ("", 1, "expected a condition, such as done(12), not end of input"),
    ("done(12", 8, "expected ')' to close done(, not end of input"),
    ("done(", 6, "expected a job id or name, not end of input"),
    ("done(12) &&", 12, "expected a condition, such as done(12), not end of input"),
    ("done(12) || ", 13, "expected a condition, such as done(12), not end of input"),
    ("foo(1)", 1, "unknown condition 'foo': expected done, exit, ended, started, "
                  "post_done, post_err"),
    ("numdone(1, 2)", 1, "the condition numdone() is not supported"),
    ("done(1) && external(2, \"x\")", 12, "the condition external() is not supported"),
    ("done(12,3)", 8, "done() takes a job only (an exit code is for exit())"),
    ("done(1a)", 6, 'a job name that starts with a digit must be quoted: "1a"'),
    ("exit(1, >)", 10, "expected an exit code (a whole number), not ')'"),
    ("done(12))", 9, "')' without a matching '('"),
    ("done(12) done(13)", 10, "expected '&&', '||' or the end, not 'd'"),
    ("(done(1)", 9, "expected ')' to close the '(' at column 1, not end of input"),
    ("done(a*b)", 8, "'*' may only end a job name"),
    ("done(12[1-])", 11, "expected the end of the range (a whole number), not ']'"),
    ("done(12[0])", 9, "indices start at 1"),
    ('done("x)', 9, "expected '\"' to close the name at column 6"),
    ('done("")', 6, "expected a job name inside the quotes"),
    ("done(12) & done(13)", 10, "expected '&&', '||' or the end, not '&'"),
    ("done(#)", 6, "expected a job id or name, not '#'"),
    ("!" * 101 + "done(1)", 101, "more than 100 nested '(' and '!'"),
])
def test_dependency_errors_name_the_column(text, column, message):
    with pytest.raises(DependError) as caught:
        parse_depend(text)
    assert (caught.value.column, caught.value.message) == (column, message)
    assert str(caught.value) == f"dependency error at column {column}: {message}"
