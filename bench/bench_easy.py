"""XCE's EASY against the independent reference (issue 17, "Against an independent EASY").

For each trace: one 1-slot host per processor (h0001...), one queue `normal` with
`backfill: true`, `reserve_depth: 1`, `session_interval: 1`, limits from the trace and
not enforced (`simulation: {enforce_run_limits: false}`). XCE runs as
`xce sim run CLUSTER --workload TRACE --json` in a fresh process; the reference is
bench/easy_reference.py (ARCHITECTURE.md section 2a host by host, sessions at every
submit and end), also in a fresh process so each peak memory is its own.

Targets: mean wait and mean bounded slowdown within 10 % of the reference's, the
longest wait of wide jobs (at least a quarter of the machine) at most 1.25 x its, and
the whole HPC2N trace in at most 6 s. Times are medians over --runs.

When XCE's summary has no `wide_wait_max` (before the plan landed), it is taken from
an in-process run of the same simulator (`Simulator.metrics`), marked `*`.

`--accasim DIR` also runs AccaSim 1.1.3's EASY (`EASYBackfilling(FirstFit())`, one
1-core node per processor) on the same trace, installed outside the project with
`pip install --target DIR --no-deps accasim==1.1.3 psutil sortedcontainers` (it also
needs numpy, scipy and matplotlib, and `collections.Mapping`, shimmed here for Python
>= 3.10). Not a reference: its backfill ignores the head job's reservation, so its
longest waits are far longer. It is slow (about 96 s for HPC2N): use --only.

Run: python bench/bench_easy.py [--runs 3] [--traces DIR] [--only NAME] [--first N]
     [--accasim DIR] [--trace PATH ...]

The reference needs the SWF header's MaxProcs (or MaxNodes); RICC-2010-2 as
published has none: prepend "; MaxProcs: 8192".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine
from easy_reference import machine_size

HERE = Path(__file__).resolve().parent
TRACES = ("SDSC-SP2-1998-4.2-cln", "KTH-SP2-1996-2.1-cln", "CTC-SP2-1996-3.1-cln",
          "HPC2N-2002-2.2-cln")
OPTIONAL = ("NASA-iPSC-1993-3.1-cln", "lublin_256")

CLUSTER = """\
cluster: easy-{name}
session_interval: 1
reserve_depth: 1
hosts:
  - {{name: "h[0001-{last:04d}]", slots: 1}}
queues:
  - {{name: normal, priority: 30, backfill: true}}
simulation: {{enforce_run_limits: false}}
"""

REFERENCE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from easy_reference import read_swf, simulate
first = int(sys.argv[3]) if len(sys.argv) > 3 else None
r = simulate(read_swf(sys.argv[2], first))
print(json.dumps({k: v for k, v in vars(r).items() if k != "starts"}))
"""

WIDE = """
import json, sys
from xce.config import load_config
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload, transform
first = int(sys.argv[3]) if len(sys.argv) > 3 else None
config = load_config(sys.argv[1])
workload = transform(load_workload(sys.argv[2]), first=first)
sim = Simulator(config, workload, reasons=False)
sim.run()
m = sim.metrics
machine = sum(h.slots for h in config.hosts)
waits = [m.started[j] - m.submitted[j] for j in m.started if m.slots[j] * 4 >= machine]
print(json.dumps({"wide_wait_max": max(waits, default=0.0)}))
"""

ACCASIM = """
import collections, collections.abc, json, os, resource, sys, tempfile, time
for name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
    setattr(collections, name, getattr(collections.abc, name))  # AccaSim predates 3.10
sys.path.insert(0, sys.argv[1])
from accasim.base.allocator_class import FirstFit
from accasim.base.scheduler_class import EASYBackfilling
from accasim.base.simulator_class import Simulator
trace, machine = sys.argv[2], int(sys.argv[3])
out = tempfile.mkdtemp()
if trace.endswith(".gz"):  # AccaSim reads plain text: a copy in the temp dir
    import gzip, shutil
    with gzip.open(trace, "rb") as src, open(os.path.join(out, "trace.swf"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace = os.path.join(out, "trace.swf")
config = os.path.join(out, "sys.json")
with open(config, "w") as f:  # one 1-core node per processor
    json.dump({"groups": {"g": {"core": 1}}, "resources": {"g": machine},
               "equivalence": {}, "start_time": 0}, f)
started = time.perf_counter()
sim = Simulator(trace, config, EASYBackfilling(FirstFit()), RESULTS_FOLDER_PATH=out,
                scheduling_output=False, pprint_output=True, statistics_output=False,
                benchmark_output=False, save_parameters=None, show_statistics=False)
sim.start_simulation(system_status=False)
wall = time.perf_counter() - started
waits, bslds, wide = [], [], 0.0
for name in os.listdir(out):
    if name.startswith("pprint-"):  # (the only one: scheduling output is off)
        for line in open(os.path.join(out, name)):
            f = line.split()  # n id start (2 words) end (2 words) wtime rtime sld nodes core
            if len(f) < 11 or not f[0].isdigit():
                continue
            wait, run, procs = float(f[6]), float(f[7]), int(f[10])
            waits.append(wait)
            bslds.append(max(1.0, (wait + run) / max(run, 10.0)))
            if procs * 4 >= machine:
                wide = max(wide, wait)
n = len(waits) or 1
print(json.dumps({"jobs": len(waits), "wait_mean": sum(waits) / n,
                  "bsld_mean": sum(bslds) / n, "wide_wait_max": wide, "wall_seconds": wall,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_child(argv: list[str]) -> tuple[dict, float, float]:
    """Run `argv`, parse the last stdout line as JSON; (that, wall s, peak RSS MB)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            what = " ".join(a for a in argv[3:] if "\n" not in a) or argv[0]
            raise RuntimeError(f"{what} failed ({child.returncode}):\n{err.read()}")
        lines = out.read().strip().splitlines()
    return json.loads(lines[-1]), wall, usage.ru_maxrss / 1024


def xce_run(cluster: Path, trace: Path, first: int | None) -> tuple[dict, float, float]:
    argv = [sys.executable, "-c", "from xce.cli.main import main; main()", "sim", "run",
            str(cluster), "--workload", str(trace), "--json"]
    if first:
        argv += ["--first", str(first)]
    return run_child(argv)


def number(a: float | None) -> str:
    return "n/a" if a is None else f"{a:,.0f}"


def ratio(a: float | None, b: float) -> str:
    if a is None:
        return "n/a"
    return f"{a / b:.3f}" if b else ("1.000" if a == 0 else "inf")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--traces", type=Path, default=HERE.parents[1] / "shared" / "traces")
    parser.add_argument("--only", help="only traces whose name contains this")
    parser.add_argument("--first", type=int, help="only the first N records of each trace")
    parser.add_argument("--all", action="store_true", help="also NASA-iPSC and lublin_256")
    parser.add_argument("--accasim", type=Path, help="directory AccaSim is installed in")
    parser.add_argument("--trace", type=Path, action="append", default=[],
                        help="also this SWF trace (a path; repeatable): traces the "
                        "repository does not have, such as RICC-2010-2")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    names = TRACES + (OPTIONAL if args.all else ())
    paths = [args.traces / f"{name}.swf.gz" for name in names] + args.trace
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for trace in paths:
            name = trace.name.removesuffix(".gz").removesuffix(".swf")
            if args.only and args.only not in name:
                continue
            if not trace.exists():
                print(f"{name}: {trace} not found, skipped")
                continue
            size = machine_size(str(trace))
            cluster = Path(tmp) / f"{name}.yaml"
            cluster.write_text(CLUSTER.format(name=name.lower(), last=size))
            first = [str(args.first)] if args.first else []
            xs, refs = [], []
            try:
                for _ in range(args.runs):  # alternate, so both see the same machine
                    refs.append(run_child([sys.executable, "-c", REFERENCE, str(HERE),
                                           str(trace), *first]))
                    xs.append(xce_run(cluster, trace, args.first))
            except RuntimeError as err:
                print(f"{name}: {err}")
                continue
            x, ref = xs[-1][0], refs[-1][0]
            wide, marked = x.get("wide_wait_max"), ""
            if wide is None:
                marked = "*"
                try:
                    wide = run_child([sys.executable, "-c", WIDE, str(cluster), str(trace),
                                      *first])[0]["wide_wait_max"]
                except RuntimeError as err:
                    print(f"{name}: wide_wait_max from Simulator.metrics failed: "
                          f"{str(err).splitlines()[-1]}")
            row = {
                "trace": name.split("-cln")[0], "jobs": x["jobs"], "ref_jobs": ref["jobs"],
                "wait": x["wait_mean"], "ref_wait": ref["wait_mean"],
                "bsld": x["bsld_mean"], "ref_bsld": ref["bsld_mean"],
                "wide": wide, "wide_mark": marked, "ref_wide": ref["wide_wait_max"],
                "x_wall": statistics.median(r[0]["wall_seconds"] for r in xs),
                "x_proc": statistics.median(r[1] for r in xs),
                "ref_wall": statistics.median(r[0]["wall_seconds"] for r in refs),
                "x_rss": max(r[2] for r in xs), "ref_rss": max(r[2] for r in refs),
                "sessions": x["sessions"],
            }
            if args.accasim:
                acc = run_child([sys.executable, "-c", ACCASIM, str(args.accasim),
                                 str(trace), str(size)])[0]
                row["accasim"] = acc
            rows.append(row)
            show(row)
    print()
    print("| trace | jobs | XCE wait mean / ref (ratio; <= 10 %) | bsld / ref (ratio; <= 10 %) "
          "| wide wait max / ref (ratio; <= 1.25) | XCE wall (process) | ref wall "
          "| peak RSS XCE / ref | sessions |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['trace']} | {r['jobs']:,} | {r['wait']:,.0f} / {r['ref_wait']:,.0f} "
            f"({ratio(r['wait'], r['ref_wait'])}) | {r['bsld']:.1f} / {r['ref_bsld']:.1f} "
            f"({ratio(r['bsld'], r['ref_bsld'])}) | {number(r['wide'])}{r['wide_mark']} / "
            f"{r['ref_wide']:,.0f} ({ratio(r['wide'], r['ref_wide'])}) | "
            f"{r['x_wall']:.1f} s ({r['x_proc']:.1f} s) | {r['ref_wall']:.1f} s | "
            f"{r['x_rss']:.0f} / {r['ref_rss']:.0f} MB | {r['sessions']:,} |"
        )
    if any(r["wide_mark"] for r in rows):
        print("* XCE's summary has no wide_wait_max: taken from Simulator.metrics "
              "(n/a: that run failed)")


def show(r: dict) -> None:
    wait_ok = abs(r["wait"] / r["ref_wait"] - 1) <= 0.10 if r["ref_wait"] else r["wait"] == 0
    bsld_ok = abs(r["bsld"] / r["ref_bsld"] - 1) <= 0.10
    wide_ok = r["wide"] is not None and r["wide"] <= 1.25 * r["ref_wide"]
    hpc2n = " (target <= 6 s)" if r["trace"].startswith("HPC2N") else ""
    print(
        f"{r['trace']}: jobs {r['jobs']} (ref {r['ref_jobs']}); wait mean {r['wait']:,.0f} vs "
        f"{r['ref_wait']:,.0f} [{'ok' if wait_ok else 'MISS'}]; bsld {r['bsld']:.1f} vs "
        f"{r['ref_bsld']:.1f} [{'ok' if bsld_ok else 'MISS'}]; wide wait max "
        f"{number(r['wide'])}{r['wide_mark']} vs {r['ref_wide']:,.0f} "
        f"[{'ok' if wide_ok else 'MISS'}]; XCE {r['x_wall']:.1f} s{hpc2n}, "
        f"ref {r['ref_wall']:.1f} s"
    )
    if "accasim" in r:
        a = r["accasim"]
        print(f"  AccaSim EASY: jobs {a['jobs']}, wait mean {a['wait_mean']:,.0f}, bsld "
              f"{a['bsld_mean']:.1f}, wide wait max {a['wide_wait_max']:,.0f}, "
              f"{a['wall_seconds']:.1f} s, {a['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
