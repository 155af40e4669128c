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
from xce.controller import kernel, sessions
from xce.controller.auth import Identity
from xce.controller.core import Controller, Settings
from xce.controller.store import SqliteStore, open_store
from xce.model.api import SubmitRequest
from xce.model.events import Event
from xce.model.recording import Recorder, SessionRecord, read_recording
from xce.sched import SchedulerState

CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 2}
queues:
  - {name: normal, priority: 30}
"""
ADMIN = Identity("root", "admin")


def test_facts_during_a_snapshot_survive_recovery(store_location: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    slow_read = kernel.state_events

    def slowly(state: SchedulerState) -> list[Event]:
        time.sleep(0.3)  # the event loop takes submissions meanwhile
        return slow_read(state)

    monkeypatch.setattr(kernel, "state_events", slowly)

    async def test() -> None:
        ctl = Controller(load_config_text(CONFIG), open_store(store_location))
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

        again = Controller(load_config_text(CONFIG), open_store(store_location))
        await again.start()
        assert again.store.latest_snapshot() is not None
        assert sorted(again.view.jobs) == [first, during]
        assert (again.view.jobs[first].state, again.view.jobs[during].state) == ("EXIT", "PEND")
        assert sorted(again.state.pending) == [during]
        await again.close()
        again.store.close()

    asyncio.run(test())


CLOUD = CONFIG + """\
catalog:
  templates:
    - {name: c5, provider: aws, slots: 2, max: 4}
"""


def test_provisioning_records_survive_a_snapshot_and_recovery(store_location: str) -> None:
    """Requests and instances come back from a snapshot plus the facts after it, with
    their states and reasons; a request that ended long ago is dropped from the
    snapshot (clean period) and from memory."""

    async def test() -> None:
        config = load_config_text(CLOUD)
        ctl = Controller(config, open_store(store_location))
        await ctl.start()
        made = await ctl.request_hosts(ADMIN, "c5", "", "r1", 2, 600)
        await ctl.accept_request(ADMIN, "r1", {e.name: f"i-{e.name}" for e, _ in made})
        await ctl.request_hosts(ADMIN, "c5", "", "r0", 1, 600)
        await ctl.refuse_request(ADMIN, "r0", "capacity: none left")
        await ctl.snapshot()
        await ctl.remove(ADMIN, made[1][0].name)  # cancelled after the snapshot
        before = {rid: (r.state, r.reason, [(ctl.records.instances[h].state,
                                             ctl.records.instances[h].reason,
                                             ctl.records.instances[h].instance_id)
                                            for h in r.hosts])
                  for rid, r in ctl.records.requests.items()}
        assert before["r0"][0:2] == ("failed", "capacity: none left")
        assert before["r1"][2][1] == ("released", "cancelled before it joined", "i-c5-2")
        await ctl.close()
        ctl.store.close()

        again = Controller(config, open_store(store_location))
        await again.start()
        after = {rid: (r.state, r.reason, [(again.records.instances[h].state,
                                            again.records.instances[h].reason,
                                            again.records.instances[h].instance_id)
                                           for h in r.hosts])
                 for rid, r in again.records.requests.items()}
        assert after == before
        again.settings = Settings(clean_period=0.0)
        await asyncio.sleep(0.01)
        await again.snapshot()  # r0 ended: forgotten; r1 is still in flight
        assert sorted(again.records.requests) == ["r1"]
        await again.close()
        again.store.close()

    asyncio.run(test())


def test_a_fact_during_a_session_follows_it_in_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session did not see a submission that arrived while it ran: the recording
    (a replay's input) has the session first, then the submission."""
    quick = sessions._session

    def slowly(state: SchedulerState, now: float) -> object:
        time.sleep(0.3)  # the event loop takes a submission meanwhile
        return quick(state, now)

    monkeypatch.setattr(sessions, "_session", slowly)
    recording = tmp_path / "rec.jsonl"

    async def test() -> None:
        ctl = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"),
                         recorder=Recorder(recording, source="live"))
        await ctl.start()
        session = asyncio.create_task(ctl.run_session())
        await asyncio.sleep(0.05)
        assert ctl.busy  # the session reads the state
        during, _ = await ctl.submit(ADMIN, SubmitRequest(["true"]))
        await session
        await ctl.close()
        ctl.store.close()
        kinds = [("session" if isinstance(item, SessionRecord) else type(item).__name__)
                 for _line, _t, item in read_recording(recording)]
        assert kinds[-2:] == ["session", "JobSubmitted"], kinds
        assert during in ctl.state.pending

    asyncio.run(test())
