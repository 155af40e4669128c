"""The build (docs/performance.md): an installed XCE runs its core and simulator
compiled, an editable (source) one runs them as Python, never a mix."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"
COMPILED = [
    "xce.sched.realpass", "xce.sched.catalog", "xce.sched.state", "xce.sched.session",
    "xce.sched.earliest", "xce.sched.running", "xce.sched.reserving",
    "xce.policy.decide", "xce.sim.driver", "xce.sim.jobs", "xce.sim.loop",
    "xce.sim.metrics", "xce.sim.providers", "xce.sim.rounds", "xce.sim.supply",
    "xce.sim.workload",
]


def test_the_core_is_compiled_when_installed_and_python_from_source() -> None:
    origins = {name: Path(importlib.import_module(name).__file__ or "") for name in COMPILED}
    from_source = all(SOURCE in path.parents for path in origins.values())
    pure = from_source or bool(os.environ.get("XCE_PURE"))
    expected = ".py" if pure else ".so"
    wrong = {name: str(path) for name, path in origins.items() if path.suffix != expected}
    assert not wrong, f"expected {expected} modules ({'pure' if pure else 'compiled'}): {wrong}"
    # Interpreted modules stay interpreted either way.
    assert Path(importlib.import_module("xce.controller.core").__file__ or "").suffix == ".py"
