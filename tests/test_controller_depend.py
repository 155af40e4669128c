"""Job arrays and dependencies in the controller, in process (issue 21): a submission
expands into its elements in one commit, a kill of an array ends every element, and
a snapshot plus recovery gives the same waiting jobs, bound to the same jobs, as the
state had (the ended jobs they name are in the snapshot)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from xce.config.loader import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.problems import ApiProblem
from xce.controller.store import SqliteStore
from xce.model.api import SubmitRequest
from xce.model.events import JobFinished, JobKilled, JobStarted
from xce.sched import run_session

CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 2}
max_job_array_size: 50
"""
ALICE = Identity("alice", "user")


def reasons(ctl: Controller) -> dict[int, str]:
    result = run_session(ctl._core, 0.0)
    return {job: group.reason for group in result.pending for job in group.jobs}


def test_arrays_and_conditions_survive_a_snapshot_and_recovery(tmp_path: Path) -> None:
    async def test() -> None:
        ctl = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"),
                         clock=lambda: 1000.0)
        await ctl.start()
        prep, _ = await ctl.submit(ALICE, SubmitRequest(["true"], name="prep"))
        bad, _ = await ctl.submit(ALICE, SubmitRequest(["false"], name="bad"))
        await ctl.commit(1000.0, [JobStarted(bad, {"n1": 1}, 1000.0),
                                  JobFinished(bad, 1001.0, exit_code=3)])
        sweep, _ = await ctl.submit(ALICE, SubmitRequest(
            ["./case.sh"], name="sweep[1-40]%5", depend="done(prep) && exit(bad, 3)"))
        last, _ = await ctl.submit(ALICE, SubmitRequest(["./post.sh"], depend="ended(sweep)"))
        assert (prep, bad, sweep, last) == (1, 2, 3, 44), (
            "the array takes id 3, its elements 4-43; the next job 44"
        )
        assert sorted(ctl.view.arrays[sweep]) == list(range(4, 44))
        before = reasons(ctl)
        await ctl.snapshot()
        await ctl.close()
        ctl.store.close()

        again = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"),
                           clock=lambda: 2000.0)
        await again.start()
        assert again.store.latest_snapshot() is not None
        assert reasons(again) == before == {
            prep: "No eligible host is open: 1 closed or unavailable",  # (no agent here)
            **dict.fromkeys(range(4, 44), "Dependency condition not satisfied: done(prep)"),
            last: "Dependency condition not satisfied: ended(sweep)",
        }, "bound again to the same jobs: job 2 (bad, exited 3) came back from the snapshot"
        assert sorted(again._core.waits.memory.ended) == [bad]
        await again.commit(2000.0, [JobKilled(prep, 2000.0)])
        assert reasons(again) == {
            **dict.fromkeys(range(4, 44), "Dependency condition can never be satisfied"),
            last: "Dependency condition not satisfied: ended(sweep)",
        }, "prep killed: the sweep can never run; job 44 waits for it to end (killed, say)"
        killed = await again.kill(ALICE, sweep)
        assert killed.spec.id == 4
        assert {again.view.jobs[j].state for j in range(4, 44)} == {"EXIT"}
        with pytest.raises(ApiProblem, match="Job <3>: Job has already finished"):
            await again.kill(ALICE, sweep)
        assert reasons(again) == {last: "No eligible host is open: 1 closed or unavailable"}, (
            "job 44's condition holds now (every element ended): it waits for a host only"
        )
        await again.close()
        again.store.close()

    asyncio.run(test())


@pytest.mark.parametrize(("request_", "message"), [
    (SubmitRequest(["x"], name="a[1-60]"),
     "job array error at column 5: index 60 exceeds max_job_array_size 50"),
    (SubmitRequest(["x"], depend="done(7)"),
     "dependency error at column 6: job 7 is not found"),
    (SubmitRequest(["x"], name="a[1-3]", depend="done(a"),
     "dependency error at column 7: expected ')' to close done(, not end of input"),
])
def test_a_refused_submission_names_the_column_and_commits_nothing(
    tmp_path: Path, request_: SubmitRequest, message: str
) -> None:
    async def test() -> None:
        ctl = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"))
        await ctl.start()
        with pytest.raises(ApiProblem) as caught:
            await ctl.submit(ALICE, request_)
        assert (caught.value.status, caught.value.message) == (400, message)
        assert not ctl.view.jobs
        await ctl.close()
        ctl.store.close()

    asyncio.run(test())
