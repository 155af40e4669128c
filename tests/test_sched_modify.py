"""Changing jobs after submission in the scheduler core (issue 21, part 4: LSF's bmod,
btop, bbot, bswitch): the JobModified event, its checks and the order query, with
exact outcomes; a recording with modifications replays with no divergence."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from xce.config import load_config_text
from xce.model.events import (
    ConfigLoaded,
    JobFinished,
    JobModified,
    JobStarted,
    JobSubmitted,
    SchedulerEvent,
)
from xce.model.jobs import JobSpec
from xce.model.recording import Recorder
from xce.sched import SchedulerState, run_session
from xce.sched.rebuild import state_events
from xce.sched.state import SchedulerInputError, SubmitError
from xce.sim.replay import replay

CONFIG = """\
cluster: t
resources:
  mem: {type: numeric, consumable: true}
hosts:
  - {name: n1, slots: 4, resources: {mem: 1000}}
queues:
  - {name: normal, priority: 30, max_run_limit: 7200, backfill: true}
  - {name: short, priority: 60}
reserve_depth: 1
"""


def state_with(*jobs: JobSpec) -> SchedulerState:
    state = SchedulerState(load_config_text(CONFIG))
    for job in jobs:
        state.apply(JobSubmitted(job))
    return state


def started(state: SchedulerState, now: float = 10.0) -> list[int]:
    result = run_session(state, now)
    for decision in result.dispatch:
        state.apply(JobStarted(decision.job, dict(decision.hosts), now))
    return [d.job for d in result.dispatch]


def changed(state: SchedulerState, job: int, change: str = "", **fields: object) -> None:
    spec = msgspec.structs.replace(state.modified(_spec(state, job)), **fields)
    state.apply(JobModified(job, state.modified(spec), 5.0, change))


def _spec(state: SchedulerState, job: int) -> JobSpec:
    for found in (state.pending, state.held, state.waiting, state.running):
        if job in found:
            return found[job].spec
    raise KeyError(job)


def test_modify_n_makes_a_blocked_job_fit() -> None:
    state = state_with(JobSpec(id=1, queue="normal", n=8, submit=1))
    assert started(state) == []
    changed(state, 1, "-n 4", n=4)
    assert state.pending[1].spec.n == 4
    assert state.pending[1].spec.submit == 1, "it keeps its submit time"
    assert started(state) == [1]
    assert state.running[1].hosts == {0: 4}


def test_top_changes_which_job_starts_and_bottom_moves_it_back() -> None:
    state = state_with(*(JobSpec(id=i, user="alice", queue="normal", n=4, submit=i)
                         for i in (1, 2, 3)))
    order = state.moved_order(3, True, "alice")
    assert order == 0.0, "before the first pending job of the same priority"
    changed(state, 3, "top", order=order)
    bottom = state.moved_order(1, False, None)
    assert bottom == 3.0, "after the last: job 2, submitted at 2"
    changed(state, 1, "bottom", order=bottom)
    assert sorted(state.pending, key=lambda job: state.pending[job].key) == [3, 2, 1]
    assert started(state) == [3]


def test_top_and_bottom_among_a_users_own_jobs() -> None:
    state = state_with(JobSpec(id=1, user="bob", queue="normal", submit=1),
                       JobSpec(id=2, user="alice", queue="normal", submit=2),
                       JobSpec(id=3, user="alice", queue="normal", submit=3))
    assert state.moved_order(3, True, "alice") == 1.0, "before alice's first, not bob's"
    assert state.moved_order(3, True, None) == 0.0
    assert state.moved_order(1, False, "bob") == 1.0, "bob has no other job: in place"
    with pytest.raises(SubmitError, match="not pending"):
        state.moved_order(9, True, None)


def test_switch_to_a_higher_priority_queue_starts_it_first() -> None:
    state = state_with(JobSpec(id=1, queue="normal", n=4, submit=1),
                       JobSpec(id=2, queue="normal", n=4, submit=2))
    changed(state, 2, "switched to queue short", queue="short")
    assert state.pending[2].key[0] == -60
    assert started(state) == [2]


def test_a_refused_modification_changes_nothing() -> None:
    state = state_with(JobSpec(id=1, queue="normal", n=2, submit=1),
                       JobSpec(id=2, queue="normal", submit=2, res="rusage[mem=100]"))
    before = list(state_events(state))
    version = state.capacity_version
    bad = [
        (msgspec.structs.replace(_spec(state, 1), queue="nope"), "unknown queue"),
        (msgspec.structs.replace(_spec(state, 1), n=0), "at least 1"),
        (msgspec.structs.replace(_spec(state, 1), run_limit=9000.0), "max_run_limit"),
        (msgspec.structs.replace(_spec(state, 1), res="rusage[bogus=1]"), "bogus"),
        (JobSpec(id=5, queue="normal"), "neither pending nor running"),
    ]
    for spec, words in bad:
        with pytest.raises(SubmitError, match=words):
            state.modified(spec)
        with pytest.raises((SubmitError, SchedulerInputError)):
            state.apply(JobModified(spec.id, spec, 5.0))
    # (a condition naming a job not found: refused when asked, as a submission; the
    # event itself takes the job as gone, as JobSubmitted does)
    with pytest.raises(SubmitError, match="77"):
        state.modified(msgspec.structs.replace(_spec(state, 1), depend="done(77)"))
    with pytest.raises(SchedulerInputError):
        state.apply(JobModified(2, _spec(state, 1), 5.0))
    assert list(state_events(state)) == before
    assert state.capacity_version == version


def test_run_limit_of_a_running_job_moves_the_plans_expected_start() -> None:
    state = state_with(JobSpec(id=1, queue="normal", n=4, submit=1, run_limit=600.0),
                       JobSpec(id=2, queue="normal", n=4, submit=2, run_limit=60.0))
    assert started(state, 10.0) == [1]
    result = run_session(state, 10.0)
    assert [(r.job, r.start) for r in result.reservations] == [(2, 610.0)]
    changed(state, 1, "-W 30", run_limit=1800.0)
    assert state.running[1].end == 1810.0
    result = run_session(state, 10.0)
    assert [(r.job, r.start) for r in result.reservations] == [(2, 1810.0)]
    with pytest.raises(SubmitError, match="only its run limit"):
        state.modified(msgspec.structs.replace(_spec(state, 1), n=2))
    with pytest.raises(SubmitError, match="max_run_limit"):
        state.modified(msgspec.structs.replace(_spec(state, 1), run_limit=9000.0))


def test_a_held_job_stays_held_and_a_new_dependency_holds_a_job(tmp_path: Path) -> None:
    state = state_with(JobSpec(id=1, queue="normal", n=4, submit=1),
                       JobSpec(id=2, queue="normal", submit=2, hold=True),
                       JobSpec(id=3, queue="normal", submit=3))
    changed(state, 2, "-n 2", n=2)
    assert 2 in state.held and state.held[2].spec.n == 2
    changed(state, 3, "-w 'done(1)'", depend="done(1)")
    assert 3 in state.waiting
    assert started(state) == [1]
    state.apply(JobFinished(1, 20.0))
    assert 3 in state.pending
    changed(state, 3, "-wn", depend="")
    assert 3 in state.pending and not state.waits.dependencies


def test_a_recording_with_modifications_replays_with_no_divergence(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    recorder = Recorder(path, source="live")
    state = SchedulerState()
    events: list[SchedulerEvent] = [ConfigLoaded(load_config_text(CONFIG))]
    events += [JobSubmitted(JobSpec(id=i, queue="normal", n=4, submit=i, run_limit=600.0))
               for i in (1, 2, 3)]
    for event in events:
        state.apply(event)
        recorder.event(1.0, event)
    spec = msgspec.structs.replace(state.pending[3].spec, order=state.moved_order(3, True, None))
    for event in (JobModified(3, spec, 2.0, "top"),):
        state.apply(event)
        recorder.event(2.0, event)
    for now in (3.0, 4.0):
        result = run_session(state, now)
        recorder.session(now, result)
        for decision in result.dispatch:
            event2 = JobStarted(decision.job, dict(decision.hosts), now)
            state.apply(event2)
            recorder.event(now, event2)
        modified = msgspec.structs.replace(state.running[3].spec, run_limit=60.0)
        if now == 3.0:
            state.apply(JobModified(3, modified, now, "-W 1"))
            recorder.event(now, JobModified(3, modified, now, "-W 1"))
    recorder.close()
    report = replay(path)
    assert report.divergence is None, str(report.divergence)
    rebuilt = SchedulerState()
    rebuilt.apply_all(state_events(state))
    assert rebuilt.running[3].spec.run_limit == 60.0
    assert rebuilt.running[3].end == 63.0


def test_switch_to_a_queue_the_user_may_not_use_is_refused() -> None:
    config = load_config_text(CONFIG.replace(
        "  - {name: short, priority: 60}", "  - {name: short, priority: 60, users: [bob]}"
    ))
    state = SchedulerState(config)
    state.apply(JobSubmitted(JobSpec(id=1, user="alice", queue="normal")))
    spec = msgspec.structs.replace(_spec(state, 1), queue="short")
    with pytest.raises(SubmitError, match="User alice cannot use queue short"):
        state.modified(spec)
    assert state.pending[1].spec.queue == "normal"
