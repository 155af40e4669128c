"""Writes the files of this folder with the release they stand for (commit bc11ece,
before issue 19 removed fields that were saved but never read): a controller's SQLite
log with a snapshot and facts after it (`xce.db`), and a simulator recording with
reservations and elastic hosts (`recording.jsonl`). tests/test_release_data.py reads
them with today's code (`controller.yaml` and `cluster.yaml`: the
configurations they were made with). Run from the repository root on that commit:

    python tests/data/release-0.1/make.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from xce.config import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.store import SqliteStore
from xce.model.api import SubmitRequest
from xce.model.events import HostStateChanged, JobFinished
from xce.model.recording import Recorder
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

HERE = Path(__file__).resolve().parent
ADMIN = Identity("root", "admin")

CONTROLLER = """\
cluster: release
hosts:
  - {name: "n[1-2]", slots: 2}
queues:
  - {name: normal, priority: 30, backfill: true}
reserve_depth: 1
"""

SIMULATED = """\
cluster: release-sim
session_interval: 10
reserve_depth: 2
hosts:
  - {name: "n[01-02]", slots: 4}
queues: [{name: normal, priority: 30, backfill: true}]
catalog:
  idle_time: 300
  templates:
    - {name: cloud, provider: sim, slots: 4, max: 2}
policy: {persistence: 0}
simulation:
  providers: {sim: {lead_time: 60}}
"""

JOBS = """\
jobs:
  - {id: 1, submit: 0, run: 100, n: 4, run_limit: 120}
  - {id: 2, submit: 3, run: 50, n: 4, run_limit: 60}
  - {id: 3, submit: 5, run: 30, n: 8, run_limit: 60}
  - {id: 4, submit: 12, run: 20, n: 2, run_limit: 30}
  - {id: 5, submit: 12, run: 20, n: 12, run_limit: 30}
"""


async def controller_log(db: Path) -> None:
    clock = [1000.0]
    ctl = Controller(load_config_text(CONTROLLER), SqliteStore(db), clock=lambda: clock[0])
    await ctl.start()
    await ctl.commit(clock[0], [HostStateChanged("n1", "ok", clock[0]),
                                HostStateChanged("n2", "ok", clock[0])])
    for n in (2, 2, 4, 1):
        await ctl.submit(ADMIN, SubmitRequest(["sleep", "60"], n=n, run_limit=600))
    clock[0] += 1
    await ctl.run_session()  # jobs 1 and 2 start; 3 is reserved; 4 backfills or pends
    clock[0] += 5
    await ctl.commit(clock[0], [JobFinished(1, clock[0], 0)])
    await ctl.snapshot()
    clock[0] += 1
    await ctl.submit(ADMIN, SubmitRequest(["true"], n=1))  # after the snapshot
    await ctl.commit(clock[0], [HostStateChanged("n2", "closed", clock[0], "admin")])
    await ctl.close()
    ctl.store.close()


def recording(path: Path) -> None:
    jobs = HERE / "jobs.yaml"
    jobs.write_text(JOBS)
    recorder = Recorder(path)
    Simulator(load_config_text(SIMULATED, "cluster.yaml"), load_workload(jobs),
              recorder=recorder).run()
    recorder.close()
    jobs.unlink()


if __name__ == "__main__":
    for stale in HERE.glob("xce.db*"):
        stale.unlink()
    asyncio.run(controller_log(HERE / "xce.db"))
    recording(HERE / "recording.jsonl")
    (HERE / "controller.yaml").write_text(CONTROLLER)
    (HERE / "cluster.yaml").write_text(SIMULATED)
