"""What `--report` adds to `xce sim run` on a whole trace (issue 22 part 4): user CPU
and peak RSS (`/usr/bin/time -f "%U %M"`) of the same run without and with
`--report DIR`, alternated, medians of `--runs` each; target: the report adds at
most 10 % of user CPU.

    python bench/bench_report.py [--trace HPC2N] [--cluster FILE] [--runs 3]

The trace defaults to ../shared/traces/HPC2N-2002-2.2-cln.swf.gz (202,871 jobs);
`--cluster` an elastic cluster file (default: the machine sized from the trace,
static). Prints one line per run and the medians, for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine

TRACE = Path(__file__).resolve().parents[2] / "shared/traces/HPC2N-2002-2.2-cln.swf.gz"


def timed(command: list[str]) -> tuple[float, float]:
    """(user CPU s, peak RSS MB) of one run of `command`."""
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%U %M", *command],
                       check=True, stdout=subprocess.DEVNULL)
        user, rss = out.read().split()[-2:]
    return float(user), int(rss) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--cluster", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = ["xce", "sim", "run", *([str(args.cluster)] if args.cluster else []),
            "--workload", str(args.trace), "--json"]
    print(machine())
    print(" ".join(base))
    plain: list[tuple[float, float]] = []
    report: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.runs):
            plain.append(timed(base))
            report.append(timed([*base, "--report", str(Path(scratch) / f"r{run}")]))
            print(f"run {run + 1}: without {plain[-1][0]:.2f} s {plain[-1][1]:.0f} MB, "
                  f"with --report {report[-1][0]:.2f} s {report[-1][1]:.0f} MB", flush=True)
    without = statistics.median(u for u, _ in plain)
    with_report = statistics.median(u for u, _ in report)
    paired = statistics.median(r[0] - p[0] for p, r in zip(plain, report, strict=True))
    print(f"median user CPU: without {without:.2f} s, with --report {with_report:.2f} s: "
          f"{with_report - without:+.2f} s ({(with_report / without - 1) * 100:+.1f} %; "
          "target <= +10 %)")
    print(f"median of the paired differences (run k with - run k without): {paired:+.2f} s "
          f"({paired / without * 100:+.1f} %)")
    print(f"median peak RSS: without {statistics.median(m for _, m in plain):.0f} MB, "
          f"with --report {statistics.median(m for _, m in report):.0f} MB")


if __name__ == "__main__":
    main()
