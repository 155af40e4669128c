"""Issue 19's size rule: no class in src/xce over 400 lines, no function over 80."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "xce"
MAX_CLASS, MAX_FUNCTION = 400, 80


def oversized(tree: ast.AST, where: str) -> list[str]:
    """The classes and functions of a module's tree longer than the rule allows."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
            if lines > limit:
                found.append(f"{where}:{node.lineno} {node.name}: {lines} lines (> {limit})")
    return found


def test_no_class_over_400_lines_nor_function_over_80() -> None:
    found = [
        problem
        for path in sorted(SOURCE.rglob("*.py"))
        for problem in oversized(ast.parse(path.read_text()), str(path.relative_to(SOURCE)))
    ]
    assert not found, "\n".join(found)


def test_the_check_sees_a_long_function_and_a_long_class() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    long_function = ast.parse(f"def f() -> None:\n{body}\n")
    assert oversized(long_function, "m.py") == ["m.py:1 f: 82 lines (> 80)"]
    methods = "\n".join(f"    def m{i}(self) -> None:\n        pass\n" for i in range(134))
    long_class = ast.parse(f"class C:\n{methods}")
    assert oversized(long_class, "m.py") == ["m.py:1 C: 402 lines (> 400)"]
