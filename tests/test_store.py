"""The controller's durable state store (xce.controller.store): facts, snapshots,
recovery, group commit, and durability under kill -9; every test that is not about
SQLite's file runs on both stores, SQLite and PostgreSQL (a private server,
tests/pg_server.py: `location` is a file path or a fresh database's URL)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, get_args

import psycopg
import pytest

from xce.config import load_config
from xce.controller.store import (
    Fact,
    GroupCommitter,
    SqliteStore,
    Store,
    StoreError,
    open_store,
    recover,
    take_snapshot,
)
from xce.model.cluster import ClusterConfig
from xce.model.events import (
    ConfigLoaded,
    EndedJob,
    EndedJobsRestored,
    Event,
    ExpectedHostEnded,
    FairshareRestored,
    HostAdded,
    HostExpected,
    HostRemoved,
    HostStateChanged,
    InstanceChanged,
    InstanceRecorded,
    JobAccounted,
    JobFinished,
    JobHeld,
    JobKilled,
    JobModified,
    JobPreempted,
    JobRequeued,
    JobResumed,
    JobStarted,
    JobSubmitted,
    JobSuspended,
    LeaseGranted,
    LeaseReleased,
    PoolHistoryRestored,
    RequestChanged,
    RequestRecorded,
    SharedTotalChanged,
    ShareUsage,
    SupplyChanged,
    TokensChanged,
)
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState
from xce.sched.rebuild import state_events

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cluster.yaml"


@pytest.fixture(scope="module")
def config() -> ClusterConfig:
    return load_config(EXAMPLE)


@pytest.fixture
def location(store_location: str) -> str:
    return store_location


@pytest.fixture
def db(location: str) -> Iterator[Store]:
    store = open_store(location)
    yield store
    store.close()


def one_of_each(config: ClusterConfig) -> list[Event]:
    return [
        ConfigLoaded(config=config),
        JobSubmitted(job=JobSpec(id=7, user="alice", queue="normal", n=4,
                                 res="select[ssd] rusage[mem=100]", submit=1.5, hold=True,
                                 run=30.0)),
        JobKilled(job=7, time=2.0),
        JobStarted(job=8, hosts={"n01": 2, "n02": 2}, time=3.0, pools={"hspice": "site"}),
        JobFinished(job=8, time=4.0, exit_code=3),
        JobRequeued(job=9, time=5.0),
        JobHeld(job=9, held=False),
        HostAdded(name="c1", slots=16, resources={"mem": 30000.0, "ssd": True},
                  template="aws.c5", state="expected", time=6.0, idle_since=7.0),
        HostStateChanged(name="n03", state="closed", time=8.0),
        HostRemoved(name="c1", time=9.0),
        SharedTotalChanged(resource="hspice", total=12.5, pool="site"),
        SupplyChanged(in_flight={"aws.c5": 2}, tokens_in_flight={"vcs": 1.0},
                      borrowed={"hspice/cloud": 4.0}, headroom={"vcs": 3.0},
                      allowance={"aws.r5": -1}, time=10.0),
        PoolHistoryRestored(pool="vcs", history=[(0.0, 0.0, 0.0), (10.0, 2.0, 4.0)]),
        EndedJobsRestored(jobs=[EndedJob(id=9, time=5.0, done=False, exit_code=3, user="alice",
                                         name="sweep", array=0, submit=1.0)]),
        HostExpected(name="aws.c5-1", template="aws.c5", provider="aws", request="r1",
                     token_sha256="ab" * 32, deadline=600.0, time=11.0),
        ExpectedHostEnded(name="aws.c5-1", state="failed", reason="join deadline passed",
                          time=12.0),
        TokensChanged(pool="hspice/cloud", step="granted", amount=2.0, time=13.0),
        LeaseGranted(provider="aws", holder="prov-a", token=3, expires=74.0, time=14.0),
        LeaseReleased(provider="aws", holder="prov-a", token=3, time=15.0),
        RequestRecorded(request="r1", provider="aws", template="aws.c5", count=2,
                        holder="prov-a", time=16.0),
        InstanceRecorded(host="aws.c5-1", request="r1", provider="aws", template="aws.c5",
                         time=16.0),
        InstanceChanged(host="aws.c5-1", state="running", reason="started by the provider",
                        time=17.0, instance_id="i-0abc"),
        RequestChanged(request="r1", state="in flight", reason="accepted by the provider",
                       time=17.0),
        JobAccounted(job=8, user="alice", queue="normal", state="EXIT", submit=1.0, end=4.0,
                     start=3.0, n=4, hosts={"n01": 2, "n02": 2}, exit_code=3,
                     failure="SIGSEGV (Segmentation fault) on n01", cpu_time=1.5, time=4.0),
        JobSuspended(job=8, suspended=True, time=3.5, by="alice"),
        JobModified(job=7, spec=JobSpec(id=7, user="alice", queue="normal", n=2, submit=1.5,
                                        order=0.5, hosts=("n01",), exclusive=True),
                    time=2.5, change="-n 2"),
        JobPreempted(job=8, by=7, action="suspend", time=3.6),
        JobResumed(job=8, time=3.7),
        FairshareRestored(usage=[ShareUsage(queue="normal", user="alice", hist=1.25,
                                            as_of=3.0)]),
    ]


def test_round_trip_of_every_event_type(db: Store, config: ClusterConfig) -> None:
    events = one_of_each(config)
    assert {type(e) for e in events} == set(get_args(Event)), "an Event type is not covered"
    assert db.append(100.0, events[:5]) == 5
    assert db.append(101.0, events[5:]) == len(events)
    facts = list(db.read())
    assert [f.event for f in facts] == events
    assert [f.seq for f in facts] == list(range(1, len(events) + 1))
    assert [f.time for f in facts] == [100.0] * 5 + [101.0] * (len(events) - 5)
    assert [f.seq for f in db.read(after=4)] == list(range(5, len(events) + 1))
    assert list(db.read(after=len(events))) == []
    assert db.append(102.0, []) == len(events)  # nothing appended: the last seq


def test_read_pages_through_a_long_log(db: Store) -> None:
    db.append(0.0, [JobKilled(job=i) for i in range(2500)])
    facts = list(db.read(after=10))
    assert [f.seq for f in facts] == list(range(11, 2501))
    assert facts[-1].event == JobKilled(job=2499)


def test_reopen_keeps_everything_and_seqs_keep_increasing(
    location: str, config: ClusterConfig
) -> None:
    path = location
    events = one_of_each(config)
    seqs = []
    for round_ in range(3):
        with open_store(path) as store:
            seqs.append(store.append(float(round_), events))
            store.write_snapshot(seqs[-1], events[:1])
    k = len(events)
    assert seqs == [k, 2 * k, 3 * k]
    store = open_store(path)
    facts = list(store.read())
    assert [f.seq for f in facts] == list(range(1, 3 * k + 1))
    assert [f.event for f in facts] == events * 3
    assert store.latest_snapshot() == (3 * k, events[:1])
    assert store.append(9.0, [JobKilled(job=1)]) == 3 * k + 1
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append(9.0, [JobKilled(job=1)])


def test_seqs_never_reuse_a_snapshot_seq(db: Store) -> None:
    db.append(0.0, [JobKilled(job=1), JobKilled(job=2)])
    db.write_snapshot(2, [])
    with pytest.raises(ValueError, match="outside the log"):
        db.write_snapshot(3, [])
    assert db.latest_snapshot() == (2, [])
    assert db.append(1.0, [JobKilled(job=3)]) == 3


def test_garbage_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(StoreError, match=str(path)):
        SqliteStore(path)


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE facts (x)")
    with pytest.raises(StoreError, match=f"{path}.*not an XCE store"):
        SqliteStore(path)
    with sqlite3.connect(path) as other:  # untouched
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_corrupt_fact_is_a_clear_error(location: str) -> None:
    path = location
    with open_store(path) as store:
        store.append(0.0, [JobKilled(job=1), JobKilled(job=2)])
    if path.startswith("postgresql://"):
        with psycopg.connect(path) as pg:
            pg.execute("UPDATE facts SET body = %s WHERE seq = 2", (b"\xc1junk",))
    else:
        with sqlite3.connect(path) as raw:
            raw.execute("UPDATE facts SET body = ? WHERE seq = 2", (b"\xc1junk",))
    with open_store(path) as store, pytest.raises(StoreError, match=f"{path}: fact 2"):
        list(store.read())


def test_store_uses_wal_and_full_sync(tmp_path: Path) -> None:
    db = SqliteStore(tmp_path / "xce.db")
    raw = db._db
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    db.close()


# ---------------------------------------------------------------- recovery
def history(config: ClusterConfig) -> list[tuple[float, list[Event]]]:
    """A valid history in groups: (time, events)."""

    def job(i: int, queue: str = "normal", n: int = 4) -> JobSubmitted:
        return JobSubmitted(job=JobSpec(id=i, user=f"u{i % 3}", queue=queue, n=n,
                                        res="rusage[mem=1000]", submit=float(i)))

    return [
        (0.0, [ConfigLoaded(config=config)]),
        (1.0, [job(i) for i in range(1, 9)]),
        (2.0, [JobStarted(job=1, hosts={"n01": 4}, time=2.0),
               JobStarted(job=2, hosts={"n02": 2, "n03": 2}, time=2.0)]),
        (3.0, [HostAdded(name="c1", slots=16, resources={"mem": 30000.0}, template="aws.c5",
                         time=3.0),
               SupplyChanged(in_flight={"aws.c5": 2}, headroom={"vcs": 3.0},
                             allowance={"aws.r5": 5}, time=3.0)]),
        (4.0, [JobStarted(job=3, hosts={"c1": 4}, time=4.0), JobHeld(job=5)]),
        # -- the snapshot is taken here in the test
        (5.0, [HostStateChanged(name="n04", state="closed", time=5.0),
               SharedTotalChanged(resource="vcs", total=12.0),
               SharedTotalChanged(resource="hspice", total=6.0, pool="site")]),
        (6.0, [JobFinished(job=1, time=6.0), JobKilled(job=6, time=6.0),
               JobRequeued(job=2, time=6.0), JobStarted(job=4, hosts={"n01": 4}, time=6.0)]),
        (7.0, [JobFinished(job=3, time=7.0), HostRemoved(name="c1", time=7.0),
               JobHeld(job=5, held=False), job(9, queue="short", n=1),
               HostAdded(name="c2", slots=32, resources={"mem": 250000.0},
                         template="aws.r5", state="expected", time=7.0)]),
    ]


def summary(state: SchedulerState) -> dict[str, Any]:
    def host_name(index: int) -> str:
        host = state.hosts[index]
        assert host is not None
        return host.name

    return {
        "pending": sorted(state.pending),
        "held": sorted(state.held),
        "running": {job: {host_name(i): n for i, n in run.hosts.items()}
                    for job, run in state.running.items()},
        "hosts": {h.name: (h.state, h.slots, h.template) for h in state.hosts if h is not None},
        "free_slots": {h.name: state.free_slots[h.index] for h in state.hosts if h is not None},
        "pools": {p.label: (p.base, p.borrowed, p.total, p.headroom)
                  for pools in state.pools.values() for p in pools},
        "in_flight": state.in_flight,
        "allowance": state.allowance,
    }


class SpyStore:
    """A Store that records the `after` of every read."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.reads: list[int] = []

    def append(self, time: float, events: Sequence[Event]) -> int:
        return self.inner.append(time, events)

    def append_batches(self, batches: Sequence[tuple[float, Sequence[Event]]]) -> list[int]:
        return self.inner.append_batches(batches)

    def read(self, after: int = 0) -> Iterator[Fact]:
        self.reads.append(after)
        return self.inner.read(after)

    def write_snapshot(self, seq: int, events: Sequence[Event]) -> None:
        self.inner.write_snapshot(seq, events)

    def latest_snapshot(self) -> tuple[int, list[Event]] | None:
        return self.inner.latest_snapshot()

    def close(self) -> None:
        self.inner.close()


def test_recover_from_snapshot_and_later_facts(location: str, config: ClusterConfig) -> None:
    path = location
    groups = history(config)
    live = SchedulerState()
    with open_store(path) as store:
        assert recover(store)[1] == 0
        for i, (at, events) in enumerate(groups):
            seq = store.append(at, events)
            live.apply_all(events)
            if i == 4:
                snap_seq = seq
                take_snapshot(store, live, seq)
    scratch = SchedulerState()
    with open_store(path) as store:
        facts = list(store.read())
        scratch.apply_all(f.event for f in facts)
        spy = SpyStore(store)
        recovered, last = recover(spy)
    assert spy.reads == [snap_seq], "recover must read only the facts after the snapshot"
    assert last == facts[-1].seq == sum(len(e) for _, e in groups)
    assert summary(recovered) == summary(scratch) == summary(live)
    # the history reached every interesting shape
    s = summary(recovered)
    assert s["running"] == {4: {"n01": 4}} and 2 in s["pending"] and 9 in s["pending"]
    assert s["hosts"]["n04"][0] == "closed" and "c1" not in s["hosts"]
    assert s["pools"]["vcs"][0] == 12.0 and s["in_flight"] == {"aws.c5": 2}
    # the snapshot alone rebuilds the state as of its seq
    with open_store(path) as store:
        snapshot = store.latest_snapshot()
    assert snapshot is not None and snapshot[0] == snap_seq
    at_snapshot = SchedulerState()
    at_snapshot.apply_all(snapshot[1])
    upto = SchedulerState()
    upto.apply_all(f.event for f in facts if f.seq <= snap_seq)
    assert summary(at_snapshot) == summary(upto)
    assert summary(at_snapshot) != summary(scratch)
    assert state_events(upto) == snapshot[1]


def test_recover_reports_a_fact_that_does_not_apply(db: Store) -> None:
    db.append(0.0, [JobKilled(job=42)])
    with pytest.raises(StoreError, match="fact 1 cannot be applied"):
        recover(db)


# ---------------------------------------------------------------- group commit
def test_group_commit_of_concurrent_threads(db: Store) -> None:
    threads_n, each = 8, 50
    committer = GroupCommitter(db)
    acks: dict[int, list[int]] = {t: [] for t in range(threads_n)}
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def worker(t: int) -> None:
        try:
            start.wait()
            for i in range(each):
                acks[t].append(committer.submit(float(i), [JobKilled(job=t * 1000 + i)]))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    facts = list(db.read())
    total = threads_n * each
    assert [f.seq for f in facts] == list(range(1, total + 1))
    assert committer.facts == total
    assert 1 <= committer.commits < total, "no submissions shared a commit"
    by_seq = {f.seq: f.event for f in facts}
    for t, seqs in acks.items():
        assert seqs == sorted(seqs) and len(set(seqs)) == each  # per-thread order kept
        assert [by_seq[s] for s in seqs] == [JobKilled(job=t * 1000 + i) for i in range(each)]
    print(f"group commit: {total} facts in {committer.commits} commits")


def test_group_commit_errors_reach_every_caller_of_the_group(db: Store) -> None:
    committer = GroupCommitter(db)
    db.close()
    with pytest.raises(StoreError, match="closed"):
        committer.submit(0.0, [JobKilled(job=1)])
    assert committer.commits == 0 and committer.facts == 0


# ---------------------------------------------------------------- kill -9
WRITER = """
import sys
from xce.controller.store import open_store
from xce.model.events import JobKilled
store = open_store(sys.argv[1])
print("ready", flush=True)
i = 0
while True:
    seq = store.append(float(i), [JobKilled(job=i), JobKilled(job=-i)])
    print(seq, flush=True)
    i += 1
"""


def test_acknowledged_facts_survive_kill_9(location: str) -> None:
    path = location
    rng = random.Random(20240601)
    deadline = time.monotonic() + 12.0
    acked: set[int] = set()
    rounds = 0
    while rounds < 6 and time.monotonic() < deadline:
        rounds += 1
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.stderr.read() if proc.stderr else ""
        time.sleep(rng.uniform(0.02, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        lines = out.split("\n")[:-1]  # a last line without newline was not acknowledged
        round_acks = [int(line) for line in lines]
        assert round_acks, "the writer acknowledged nothing before the kill"
        assert min(round_acks) > max(acked, default=0), "seqs went back after a crash"
        acked.update(round_acks)
        with open_store(path) as store:
            facts = list(store.read())  # readable: every fact decodes
            seqs = [f.seq for f in facts]
            assert seqs == list(range(1, len(seqs) + 1))
            missing = acked - set(seqs)
            assert not missing, f"acknowledged facts lost: {sorted(missing)[:10]}"
            assert len(facts) % 2 == 0, "a transaction was half written"
            for first, second in zip(facts[::2], facts[1::2], strict=True):
                assert isinstance(first.event, JobKilled) and isinstance(second.event, JobKilled)
                assert second.event.job == -first.event.job
    with open_store(path) as store:
        last = max(f.seq for f in store.read())
        assert store.append(0.0, [JobKilled(job=1)]) == last + 1
    assert rounds >= 3


def test_a_write_queued_behind_another_transaction_counts_its_facts(postgres: Any) -> None:
    """A write queued behind another writer's open transaction (as a writer killed with
    its COMMIT on the way leaves one, which the server still carries out) takes its seq
    after that transaction's facts: the last seq is read once the leader row is locked,
    not from before the wait (was: duplicate key value, the seq taken twice)."""
    path = postgres.new_database()
    with open_store(path) as store:
        assert store.append(0.0, [JobKilled(job=1)]) == 1
        got: list[int | BaseException] = []

        def write() -> None:
            try:
                got.append(store.append(0.0, [JobKilled(job=3)]))
            except BaseException as err:  # (reported below, not lost in the thread)
                got.append(err)

        with psycopg.connect(path) as other:  # a transaction is open until commit()
            other.execute("SELECT term FROM leader FOR UPDATE")
            other.execute("INSERT INTO facts (seq, time, body) "
                          "SELECT 2, time, body FROM facts WHERE seq = 1")
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(0.5)
            assert writer.is_alive(), "the write waits for the leader row"
            other.commit()
            writer.join(10)
        assert got == [3]
        assert [f.seq for f in store.read()] == [1, 2, 3]
