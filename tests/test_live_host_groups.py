"""Issue 21 (part 5, -m/-x of part 4) with real processes: a controller and two
agents driven through the CLI. A queue's `users:` refuses a user with the reason;
`-m GROUP` runs the job on the group's host; `-x` runs a job alone (its host shows
`closed_Excl`, no other job starts there); `xce queues -l` shows the queues."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from live import ME, LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = f"""\
cluster: t
session_interval: 0.2
hosts:
  - {{name: n1, slots: 2}}
  - {{name: n2, slots: 2}}
host_groups:
  second: [n2]
user_groups:
  admins: [{ME}]
queues:
  - {{name: normal, priority: 30, run_limit: 600, max_run_limit: 3600}}
  - {{name: short, priority: 50, hosts: [second], users: ["group:admins"], backfill: true}}
limits:
  - {{name: per-user, users: each, slots: 64}}
  - {{name: short-q, queues: [short], jobs: 10}}
"""
SUBMITTED = re.compile(r"^Job <(\d+)> is submitted to queue <\w+>\.$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-host-groups")
    with live_cluster(root, CONFIG, agents=("n1", "n2"), users=("alice",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=2)
        made.start_agent("n2", slots=2)
        yield made


def submit(cluster: LiveCluster, *args: str, who: str = "admin") -> int:
    done = cluster.xce("submit", *args, who=who)
    assert done.returncode == 0, done.stderr
    match = SUBMITTED.match(done.stdout.strip())
    assert match is not None, done.stdout
    return int(match.group(1))


def test_a_queue_with_users_refuses_another_user_with_the_reason(cluster: LiveCluster) -> None:
    done = cluster.xce("submit", "-q", "short", "--", "true", who="alice")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "xce: User alice cannot use queue short (queue users: group:admins)"
    )
    # an admin submitting for alice is checked on the job's user too
    done = cluster.xce("submit", "-q", "short", "-u", "alice", "--", "true")
    assert done.returncode == 1 and "User alice cannot use queue short" in done.stderr
    job = submit(cluster, "-q", "short", "--", "true")
    assert cluster.wait_state(job, "DONE")["exec_hosts"] == {"n2": 1}


def test_m_with_a_group_places_on_its_host_and_unknown_names_are_refused(
    cluster: LiveCluster,
) -> None:
    job = submit(cluster, "-m", "second", "--", "true")
    assert cluster.wait_state(job, "DONE")["exec_hosts"] == {"n2": 1}
    done = cluster.xce("submit", "-m", "n1 nosuch", "--", "true")
    assert done.returncode == 1
    assert done.stderr.strip() == "xce: -m: unknown host or host group 'nosuch'"


def test_x_runs_alone_and_its_host_shows_closed_excl(cluster: LiveCluster) -> None:
    first = submit(cluster, "-x", "-m", "n1", "--", "sleep", "30")
    cluster.wait_state(first, "RUN")
    wait_for(lambda: cluster.host("n1")["status"] == "closed_Excl", 10, "n1 closed_Excl")
    shown = cluster.xce("hosts")
    assert re.search(r"^n1\s+closed_Excl\s", shown.stdout, re.M), shown.stdout
    other = submit(cluster, "-m", "n1", "--", "true")  # 1 slot free on n1, not for it
    for _ in range(3):
        cluster.xce("jobs", str(other))
    assert cluster.job(other)["state"] == "PEND"
    reason = wait_for(lambda: cluster.job(other)["pend_reason"] or None, 10, "a reason")
    assert reason == "Not enough job slots: 1 needed, 0 free on eligible hosts"
    cluster.xce("kill", str(first))
    assert cluster.wait_state(other, "DONE")["exec_hosts"] == {"n1": 1}


def test_queues_l_shows_each_queue_as_bqueues_l(cluster: LiveCluster) -> None:
    done = cluster.xce("queues", "-l")
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.split("-" * 78)
    normal = blocks[0].strip().splitlines()
    assert normal[:5] == [
        "QUEUE: normal",
        "",
        "PARAMETERS/STATISTICS",
        "PRIO  STATUS       NJOBS  PEND  RUN  SUSP",
        "  30  Open:Active      0     0    0     0",
    ]
    text = blocks[0]
    assert " DEFAULT LIMITS:\n RUNLIMIT\n 10.0 min\n" in text
    assert " MAXIMUM LIMITS:\n RUNLIMIT\n 60.0 min\n" in text
    assert " per-user: 64 slots; users: each" in text and "short-q" not in text
    assert "USERS: all\nHOSTS:  all" in text
    short = blocks[1]
    assert "QUEUE: short" in short and " short-q: 10 jobs; queues: short" in short
    assert "SCHEDULING POLICIES:  BACKFILL" in short
    assert "USERS: group:admins\nHOSTS:  second" in short
    answer = cluster.ok("GET", "/queues")["queues"][1]
    assert (answer["users"], answer["hosts"], answer["hosts_as_written"]) == (
        ["group:admins"], ["n2"], ["second"]
    )
