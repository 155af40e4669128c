"""The pure core stays pure and clean: no I/O imports, ruff and mypy --strict clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "xce"
PURE = ("sched", "resreq", "policy")
ALLOWED = {
    "__future__", "bisect", "collections", "dataclasses", "enum", "fnmatch", "functools",
    "heapq", "itertools", "math", "operator", "re", "typing", "msgspec", "xce",
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", PURE)
def test_pure_core_imports_nothing_that_does_io(package: str) -> None:
    for path in sorted((SRC / package).glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in ALLOWED, f"{path.name} imports {name}: the pure core may not do I/O"
            if top == "xce":
                assert name.split(".")[1] in ("model", "resreq", "sched", "policy"), (
                    f"{path.name} imports {name}: the core depends only downward"
                )


def test_importing_the_core_loads_no_io_module() -> None:
    code = (
        "import sys, xce.sched, xce.resreq; "
        # gzip: the recording (xce.model.recording) is the drivers', not the core's
        "bad = {'socket', 'subprocess', 'asyncio', 'sqlite3', 'yaml', 'http', 'gzip'}; "
        "print(sorted(bad & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"the core pulled in I/O modules: {out.stdout}"


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None:
        return [sys.executable, "-m", name]
    return [name]


def test_ruff_is_clean_on_the_core() -> None:
    paths = [str(SRC / p) for p in PURE]
    out = subprocess.run(
        [*_tool("ruff"), "check", *paths], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_is_clean_on_the_core() -> None:
    paths = [str(SRC / p) for p in PURE]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *paths],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
