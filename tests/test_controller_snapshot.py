"""A snapshot is taken as of the facts queued when it starts: facts that arrive while
the scheduler state is being read follow it in the log and are replayed after it.
(A snapshot that claimed them lost them on recovery: a finished job came back as
running and its agent was told to start it again.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from xce.config.loader import load_config_text
from xce.controller import core
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.store import SqliteStore
from xce.model.api import SubmitRequest
from xce.sched import SchedulerState

CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30}
"""
ADMIN = Identity("root", "admin")


def test_facts_during_a_snapshot_survive_recovery(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    slow_read = core.state_events

    def slowly(state: SchedulerState) -> list[core.Event]:
        time.sleep(0.3)  # the event loop takes submissions meanwhile
        return slow_read(state)

    monkeypatch.setattr(core, "state_events", slowly)

    async def test() -> None:
        ctl = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"))
        await ctl.start()
        first, _ = await ctl.submit(ADMIN, SubmitRequest(["true"]))
        snapshot = asyncio.create_task(ctl.snapshot())
        await asyncio.sleep(0.05)
        assert ctl.busy  # reading the state
        during, _ = await ctl.submit(ADMIN, SubmitRequest(["true"]))
        await ctl.kill(ADMIN, first)
        await snapshot
        await ctl.close()
        ctl.store.close()

        again = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"))
        await again.start()
        assert again.store.latest_snapshot() is not None
        assert sorted(again.view.jobs) == [first, during]
        assert (again.view.jobs[first].state, again.view.jobs[during].state) == ("EXIT", "PEND")
        assert sorted(again.state.pending) == [during]
        await again.close()
        again.store.close()

    asyncio.run(test())
