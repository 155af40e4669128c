"""Layers (docs/layers.md): a module of `xce` imports its own package and the layers
below it, never a layer above, and no driver imports another driver.

    model < resreq < config < sched < policy < scenario
          < (sim | controller | provisioner | agent | license) < cli

Beside the layers: the root package `xce` (its version: anyone may import it, it
imports nothing of xce), and the drivers' support modules `xce.tuning` and
`xce.atomic_json` (for the drivers and the CLI, never the core; they import nothing of
xce). Every form of import counts: `import xce.a.b`, `from xce.a import b`,
`from xce import a`, relative imports, imports inside functions or under
`if TYPE_CHECKING:`, and `importlib.import_module("xce.a")` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "xce"
ROOT = "xce"
DRIVERS = ("sim", "controller", "provisioner", "agent", "license")
LAYER: dict[str, int] = {
    "model": 0,
    "resreq": 1,
    "config": 2,
    "sched": 3,
    "policy": 4,
    "scenario": 5,  # scenario files: config, model and sched, for the CLI and tests
    **dict.fromkeys(DRIVERS, 6),
    "cli": 7,
}
SUPPORT = ("tuning", "atomic_json", "metrics")  # for the drivers and the CLI; import
# nothing of xce (but its root, `__version__`)
DATA = ("examples",)  # data files, no module


def _module_of(path: Path) -> tuple[str, bool]:
    """The dotted name of a source file, and whether it is a package's `__init__`."""
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _unit(module: str) -> str:
    """The layer unit a module belongs to: `xce.sim.driver` -> `sim`, `xce` -> `xce`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


SOURCES = sorted(SRC.rglob("*.py"))
KNOWN = {_module_of(path)[0] for path in SOURCES}


def _is_import_call(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[ast.AST, str]]:
    """(statement, module imported) for every import anywhere in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            origin = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = package[: len(package) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                # `from xce import sim` imports the package xce.sim, not a name of xce
                yield node, submodule if submodule in KNOWN else origin
        elif (isinstance(node, ast.Call) and _is_import_call(node.func) and node.args
              and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            yield node, node.args[0].value


def _refusal(unit: str, target: str) -> str | None:
    """Why unit `unit` may not import unit `target` (None: it may)."""
    if target == unit:
        return None
    if unit == ROOT:
        return "the root package imports nothing of xce (every layer imports it)"
    if target == ROOT:
        return None
    for name in (unit, target):
        if name not in LAYER and name not in SUPPORT:
            return (f"xce.{name} is in no layer: add it to LAYER or SUPPORT in "
                    "tests/test_layers.py and to docs/layers.md")
    if unit in SUPPORT:
        return f"xce.{unit} supports the drivers: it imports nothing of xce"
    if target in SUPPORT:
        if unit in DRIVERS or unit == "cli":
            return None
        return f"xce.{target} is for the drivers and the CLI, not {unit}"
    if unit in DRIVERS and target in DRIVERS:
        return (f"the drivers import none of each other: what {unit} and {target} share "
                "goes down a layer")
    if LAYER[target] > LAYER[unit]:
        return f"{target} is a higher layer than {unit}"
    return None


def violations(module: str, is_package: bool, source: str, filename: str) -> list[str]:
    """Every import of `source` (the module `module`) that breaks the layers, as
    `file:line: the import: why`."""
    unit = _unit(module)
    found = []
    for node, name in _imported(ast.parse(source, filename), module, is_package):
        if name != ROOT and not name.startswith(ROOT + "."):
            continue
        why = _refusal(unit, _unit(name))
        if why is not None:
            line = getattr(node, "lineno", 0)
            message = f"{filename}:{line}: `{ast.unparse(node)}` imports {name}: {why}"
            if message not in found:  # `from m import a, b`: once
                found.append(message)
    return found


def _file_violations(path: Path) -> list[str]:
    module, is_package = _module_of(path)
    filename = str(path.relative_to(SRC.parents[1]))
    return violations(module, is_package, path.read_text(encoding="utf-8"), filename)


@pytest.mark.parametrize("unit", [ROOT, *LAYER, *SUPPORT])
def test_imports_point_down_and_drivers_import_no_other_driver(unit: str) -> None:
    paths = [p for p in SOURCES if _unit(_module_of(p)[0]) == unit]
    assert paths, f"no source of xce.{unit}: tests/test_layers.py is out of date"
    found = [message for path in paths for message in _file_violations(path)]
    assert not found, "imports against the layers (docs/layers.md):\n" + "\n".join(found)


def test_every_package_and_module_is_in_a_layer() -> None:
    units = {_unit(_module_of(path)[0]) for path in SOURCES}
    unplaced = sorted(units - {ROOT, *LAYER, *SUPPORT})
    assert not unplaced, (f"xce.{', xce.'.join(unplaced)}: in no layer; add to LAYER or "
                          "SUPPORT in tests/test_layers.py and to docs/layers.md")
    directories = {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert directories - set(DATA) == set(LAYER), "every package is one layer unit"
    for name in DATA:
        assert not list((SRC / name).rglob("*.py")), f"xce.{name} holds data, no code"


CHECKED = '''\
from __future__ import annotations

import importlib
import json
import xce.cli.main
from xce import __version__, controller
from xce.model.cluster import ClusterConfig
from xce.sim.loop import EventLoop
from ..cli import main
from . import recorded


def run() -> None:
    from xce.provisioner.registry import build_providers
    importlib.import_module("xce.agent.daemon")
'''


def test_the_check_sees_every_form_of_import() -> None:
    """The check itself: upward and cross-driver imports of every form are caught,
    each named by file, line and statement; imports that point down are not."""
    found = violations("xce.sim.example", False, CHECKED, "src/xce/sim/example.py")
    assert found == [
        "src/xce/sim/example.py:5: `import xce.cli.main` imports xce.cli.main: "
        "cli is a higher layer than sim",
        "src/xce/sim/example.py:6: `from xce import __version__, controller` imports "
        "xce.controller: the drivers import none of each other: what sim and controller "
        "share goes down a layer",
        "src/xce/sim/example.py:9: `from ..cli import main` imports xce.cli.main: "
        "cli is a higher layer than sim",
        "src/xce/sim/example.py:14: `from xce.provisioner.registry import build_providers` "
        "imports xce.provisioner.registry: the drivers import none of each other: what "
        "sim and provisioner share goes down a layer",
        "src/xce/sim/example.py:15: `importlib.import_module('xce.agent.daemon')` imports "
        "xce.agent.daemon: the drivers import none of each other: what sim and agent "
        "share goes down a layer",
    ], "\n".join(found)
    # The pure core: the policy may use the scheduler, not the scenario loader above it.
    core = violations("xce.policy", True, "from .. import sched, scenario\n",
                      "src/xce/policy/__init__.py")
    assert core == ["src/xce/policy/__init__.py:1: `from .. import sched, scenario` imports "
                    "xce.scenario: scenario is a higher layer than policy"], core
    support = violations("xce.sched.x", False, "from xce.tuning import settle_heap\n", "x.py")
    assert support == ["x.py:1: `from xce.tuning import settle_heap` imports xce.tuning: "
                       "xce.tuning is for the drivers and the CLI, not sched"], support
