"""Build: the scheduler core, the policy and the simulator's hot loop are compiled
with mypyc (from the same typed Python sources) when the package is installed.

* `pip install .`: compiled (needs a C compiler and Python's headers).
* `XCE_PURE=1 pip install .`: pure Python, no compiler needed; same results, slower.
* `pip install -e .` (development): always pure Python, so edits take effect at once.

See docs/performance.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup

# The modules compiled: everything a scheduling session and a simulator run spend their
# time in. Their imports (the model, the config) stay interpreted, but for the
# durations a policy round writes into every drain's reason.
COMPILED = [
    "src/xce/model/durations.py",
    *sorted(str(p) for p in Path("src/xce/sched").glob("*.py")),
    *sorted(str(p) for p in Path("src/xce/policy").glob("*.py")),
    "src/xce/sim/driver.py",
    "src/xce/sim/jobs.py",
    "src/xce/sim/loop.py",
    "src/xce/sim/metrics.py",
    "src/xce/sim/providers.py",
    "src/xce/sim/rounds.py",
    "src/xce/sim/supply.py",
    "src/xce/sim/workload.py",
]


# Only the commands that build the package compile (not the metadata step pip runs
# first, nor an editable install's).
BUILDS = {"bdist_wheel", "build", "build_ext", "install"}


def ext_modules() -> list:  # type: ignore[type-arg]
    if os.environ.get("XCE_PURE") or not BUILDS & set(sys.argv[1:]):
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED, opt_level="3", debug_level="1")


setup(ext_modules=ext_modules())
