"""Files written by the previous release (tests/data/release-0.1, made by its make.py
on the commit it names) are read by this one: a controller's log with a snapshot and
facts after it recovers to the same jobs and hosts, and a simulator recording with
reservations and elastic hosts replays without divergence (issue 19: fields that were
saved but never read may go; what was saved must still load)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from xce.config import load_config_text
from xce.controller.core import Controller
from xce.controller.store import SqliteStore
from xce.sim.replay import replay

DATA = Path(__file__).resolve().parent / "data" / "release-0.1"


def test_a_snapshot_and_the_facts_after_it_recover(tmp_path: Path) -> None:
    shutil.copy(DATA / "xce.db", tmp_path / "xce.db")
    config = load_config_text((DATA / "controller.yaml").read_text(), "controller.yaml")

    async def recover() -> None:
        ctl = Controller(config, SqliteStore(tmp_path / "xce.db"), clock=lambda: 2000.0)
        await ctl.start()
        assert ctl.store.latest_snapshot() is not None
        jobs = {job: (record.state, record.hosts) for job, record in ctl.view.jobs.items()}
        assert jobs == {1: ("DONE", {"n1": 2}), 2: ("RUN", {"n2": 2}), 3: ("PEND", {}),
                        4: ("PEND", {}), 5: ("PEND", {})}
        hosts = {name: (host.state, host.reason) for name, host in ctl.view.hosts.items()}
        assert hosts == {"n1": ("ok", ""), "n2": ("closed", "admin")}
        assert (sorted(ctl.state.pending), sorted(ctl.state.running)) == ([3, 4, 5], [2])
        await ctl.close()
        ctl.store.close()

    asyncio.run(recover())


def test_a_recording_replays_without_divergence() -> None:
    report = replay(DATA / "recording.jsonl")
    assert report.divergence is None
    assert (report.sessions, report.events) == (7, 22)
