"""`xce demo` (shortened) runs the elastic loop end to end and leaves no process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from live import skip_unless_linux

pytestmark = skip_unless_linux


def demo_processes() -> list[str]:
    found = []
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                cmdline = (pid / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "xce-demo-" in cmdline:
                found.append(cmdline)
    return found


def test_demo_settles_and_cleans_up() -> None:
    xce = str(Path(sys.executable).with_name("xce"))
    done = subprocess.run([xce, "demo", "--jobs", "4", "--seconds", "1", "--idle", "2",
                           "--timeout", "90"], capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = " ".join(done.stdout.split())
    assert "Summary: 6 of 6 jobs done;" in summary, summary
    assert "\nSummary: " in done.stdout, "the summary starts a line of a log too"
    assert "hosts provisioned and released (local.small-1" in summary, summary
    assert demo_processes() == []
