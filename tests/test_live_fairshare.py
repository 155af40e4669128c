"""Fairshare with real processes (docs/scheduling.md, "Fairshare"): a controller and
an agent of one slot, a fairshare queue where alice has ten times the admin's shares.
Jobs start in fairshare order, not submit order; `xce fairshare` shows the usage the
controller's events built; a restarted controller keeps it; `xce queues -l` shows the
shares."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from live import ME, LiveCluster, live_cluster, skip_unless_linux

pytestmark = skip_unless_linux

CONFIG = f"""\
cluster: t
session_interval: 0.2
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: shared, priority: 30, fairshare: {{{ME}: 1, alice: 10}}}}
  - {{name: normal, priority: 10}}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-fairshare")
    with live_cluster(root, CONFIG, agents=("n1",), users=("alice",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=1)
        yield made


def shares(cluster: LiveCluster) -> dict[str, dict[str, float]]:
    done = cluster.xce("fairshare", "shared", "--json")
    assert done.returncode == 0, done.stderr
    (queue,) = json.loads(done.stdout)["queues"]
    return {row["user"]: row for row in queue["users"]}


def test_the_user_with_more_shares_starts_first_and_usage_is_shown(
    cluster: LiveCluster,
) -> None:
    blocker = cluster.submit(["sleep", "2"], queue="shared")
    cluster.wait_state(blocker, "RUN")
    mine = cluster.submit(["true"], queue="shared")  # submitted first ...
    theirs = cluster.submit(["true"], queue="shared", who="alice")
    # (alice's job runs as alice: EXIT where the machine has no such user)
    first = cluster.wait_state(theirs, ("DONE", "EXIT"))
    second = cluster.wait_state(mine, "DONE")
    assert first["start_time"] < second["start_time"], (
        "alice (10 shares, nothing used) goes before the admin (1 share, 2 s used)"
    )
    rows = shares(cluster)
    assert list(rows) == ["alice", ME], "by dynamic priority, highest first"
    assert rows[ME]["cpu_time"] > rows["alice"]["cpu_time"] >= 0
    assert (rows[ME]["shares"], rows["alice"]["shares"]) == (1.0, 10.0)
    assert rows["alice"]["started"] == rows[ME]["started"] == 0
    text = cluster.xce("fairshare").stdout.splitlines()
    assert text[:4] == [
        "QUEUE: shared",
        f"USER_SHARES:  [{ME}, 1] [alice, 10]",
        "CPU_TIME_FACTOR 0.7  RUN_TIME_FACTOR 0.7  RUN_JOB_FACTOR 3  HIST_HOURS 5",
        "",
    ]
    assert text[4].split() == [
        "USER", "ACCOUNT", "SHARES", "PRIORITY", "STARTED", "PEND", "CPU_TIME", "RUN_TIME"
    ]
    assert [line.split()[0] for line in text[5:]] == ["alice", ME]


def test_a_restarted_controller_keeps_the_usage(cluster: LiveCluster) -> None:
    before = shares(cluster)
    assert before[ME]["cpu_time"] > 0
    listen = cluster.url.removeprefix("http://")  # (the same address: the agent's)
    cluster.stop_controller()
    cluster.start_controller(listen=listen)
    after = shares(cluster)
    for user in (ME, "alice"):  # (decayed by the seconds between: a 5 h half-life)
        assert after[user]["cpu_time"] == pytest.approx(before[user]["cpu_time"], rel=1e-3)
        assert after[user]["priority"] == pytest.approx(before[user]["priority"], rel=1e-3)


def test_queues_l_shows_the_shares_and_bad_queues_are_refused(cluster: LiveCluster) -> None:
    lines = cluster.xce("queues", "-l").stdout.splitlines()
    assert "SCHEDULING POLICIES:  FAIRSHARE" in lines
    assert f"USER_SHARES:  [{ME}, 1] [alice, 10]" in lines
    done = cluster.xce("fairshare", "normal")
    assert (done.returncode, done.stderr.strip()) == (1, "xce: 'normal' is not a fairshare queue")
    done = cluster.xce("fairshare", "nosuch")
    assert (done.returncode, done.stderr.strip()) == (1, "xce: 'nosuch' is not a queue")
