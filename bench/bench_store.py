"""Controller state store benchmark: durable appends per second.

* single: one thread, one fact per `SqliteStore.append` (one fsync'd commit each);
* group: 8 threads submitting one fact each through `GroupCommitter` (concurrent
  submissions share a commit).

Each figure is the median of --runs runs on a fresh store in --dir (default: the
system temp directory; use a directory on the disk the controller would use, since
the figures are fsync rates), or with --store postgresql on a fresh database of a
private PostgreSQL server (bench/stores.py).

Run: python bench/bench_store.py [--runs 3] [--appends 500] [--threads 8] [--dir DIR]
     [--store sqlite|postgresql|postgresql://...]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from pathlib import Path

from common import machine
from stores import HELP, Stores

from xce.controller.store import GroupCommitter, open_store
from xce.model.events import JobFinished


def single(location: str, appends: int) -> float:
    with open_store(location) as store:
        started = time.perf_counter()
        for i in range(appends):
            store.append(float(i), [JobFinished(job=i, time=float(i))])
        return appends / (time.perf_counter() - started)


def group(location: str, appends: int, threads: int) -> tuple[float, int]:
    with open_store(location) as store:
        committer = GroupCommitter(store)
        each = appends // threads
        barrier = threading.Barrier(threads + 1)

        def worker(t: int) -> None:
            barrier.wait()
            for i in range(each):
                committer.submit(float(i), [JobFinished(job=t * each + i, time=float(i))])

        workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        barrier.wait()
        started = time.perf_counter()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - started
        return committer.facts / elapsed, committer.commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--store", default="sqlite", help=HELP)
    args = parser.parse_args()
    print(machine())
    stores = Stores(args.store)
    print(f"store: {stores.describe()}")
    singles: list[float] = []
    groups: list[float] = []
    commits: list[int] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, contextlib.closing(stores):
        for run in range(args.runs):
            singles.append(single(stores.new(Path(tmp) / f"single{run}"), args.appends))
            rate, n = group(stores.new(Path(tmp) / f"group{run}"), args.appends, args.threads)
            groups.append(rate)
            commits.append(n)
    print(f"store dir: {args.dir}; {args.appends} appends of one fact per run, "
          f"median of {args.runs}")
    print(f"single durable appends:  {statistics.median(singles):8.0f} /s  "
          f"(runs: {', '.join(f'{r:.0f}' for r in singles)})")
    print(f"group commit, {args.threads} threads: {statistics.median(groups):8.0f} /s  "
          f"(runs: {', '.join(f'{r:.0f}' for r in groups)}; commits per run: "
          f"{', '.join(map(str, commits))})")


if __name__ == "__main__":
    main()
