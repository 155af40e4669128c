"""`xce modify`, `top`, `bottom` and `switch` in the controller, in process (issue 21,
part 4): who may change what, job arrays (every pending element, all or none), a
refused request changes nothing, and the changed specs survive a snapshot and
recovery; `xce hist` shows each change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from xce.config.loader import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.job_life import history
from xce.controller.problems import ApiProblem
from xce.controller.store import SqliteStore
from xce.model.api import ModifyRequest, SubmitRequest
from xce.model.events import JobStarted

CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30, max_run_limit: 3600}
  - {name: short, priority: 60}
max_job_array_size: 50
"""
ALICE = Identity("alice", "user")
BOB = Identity("bob", "user")
ADMIN = Identity("root", "admin")


def controller(path: Path, now: float = 1000.0) -> Controller:
    return Controller(load_config_text(CONFIG), SqliteStore(path / "xce.db"), clock=lambda: now)


def test_changes_of_arrays_and_jobs_and_their_refusals(tmp_path: Path) -> None:
    async def test() -> None:
        ctl = controller(tmp_path)
        await ctl.start()
        sweep, _ = await ctl.submit(ALICE, SubmitRequest(["./case.sh"], name="sweep[1-3]"))
        other, _ = await ctl.submit(BOB, SubmitRequest(["true"]))
        await ctl.commit(1000.0, [JobStarted(sweep + 1, {"n1": 1}, 1000.0)])
        done = await ctl.changes.modify(ALICE, sweep, ModifyRequest(n=2, res="span[hosts=1]"))
        assert (done.jobs, done.change) == ([sweep + 2, sweep + 3], "-n 2 -R 'span[hosts=1]'")
        assert [ctl.view.jobs[sweep + i].spec.n for i in (1, 2, 3)] == [1, 2, 2]
        limit = await ctl.changes.modify(ALICE, sweep, ModifyRequest(run_limit=600.0))
        assert limit.jobs == [sweep + 1, sweep + 2, sweep + 3], "-W alone: running ones too"
        assert ctl._core.running[sweep + 1].end == 1600.0
        assert ctl.view.relimited == {sweep + 1}

        before = [ctl.view.jobs[j].spec for j in sorted(ctl.view.jobs)]
        refusals = [
            (ctl.changes.modify(ALICE, sweep, ModifyRequest(queue="nope")), 400,
             "unknown queue 'nope'"),
            (ctl.changes.modify(ALICE, sweep, ModifyRequest(run_limit=7200.0)), 400,
             "max_run_limit"),
            (ctl.changes.modify(ALICE, other, ModifyRequest(n=2)), 403, "not the owner"),
            (ctl.changes.modify(ALICE, sweep + 1, ModifyRequest(n=2)), 409,
             "only its run limit can be changed"),
            (ctl.changes.switch(ALICE, sweep + 1, "short"), 409, "the job is running"),
            (ctl.changes.modify(ALICE, sweep, ModifyRequest()), 400, "nothing to change"),
            (ctl.changes.modify(ALICE, 999, ModifyRequest(n=2)), 404, "No matching job"),
        ]
        for call, status, words in refusals:
            with pytest.raises(ApiProblem, match=words) as refused:
                await call
            assert refused.value.status == status
        assert [ctl.view.jobs[j].spec for j in sorted(ctl.view.jobs)] == before

        moved = await ctl.changes.move(ALICE, sweep + 3, top=True)
        assert moved.change == "top"
        assert ctl.view.jobs[sweep + 3].spec.order == 999.0, "before alice's element 2 only"
        await ctl.changes.move(ADMIN, other, top=True)
        assert ctl.view.jobs[other].spec.order == 998.0, "an admin's: before everyone's"
        switched = await ctl.changes.switch(BOB, other, "short")
        assert switched.change == "switched to queue short"
        assert ctl._core.pending[other].key[0] == -60

        life = await history(ctl, sweep + 3)
        assert [(e.kind, e.reason) for e in life.events] == [
            ("submitted", ""), ("modified", "-n 2 -R 'span[hosts=1]'"),
            ("modified", "-W 10"), ("modified", "top")]
        await ctl.snapshot()
        specs = {j: ctl.view.jobs[j].spec for j in ctl.view.jobs}
        await ctl.close()
        ctl.store.close()

        again = controller(tmp_path, 2000.0)
        await again.start()
        assert {j: again.view.jobs[j].spec for j in again.view.jobs} == specs
        assert again._core.running[sweep + 1].end == 1600.0
        assert [again._core.pending[j].key for j in (sweep + 3, other)] == [
            (-30, 0, 999.0, sweep + 3), (-60, 0, 998.0, other)]
        assert again.view.jobs[other].spec.queue == "short"
        await again.close()

    asyncio.run(test())
