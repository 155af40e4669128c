"""Job arrays and dependencies end to end (issue 21), with real processes: a controller,
two agents and real jobs, driven through the CLI as a user would (`xce submit -J
"name[1-1000]%10"`, `-w`, `-ti`, `xce jobs -A`, `xce kill ID` and `"ID[3]"`).

The 1,000-element array runs real processes, ten at a time: its elements stamp their
start and end (with LSB_JOBINDEX) into one file, from which the test checks that no
more than ten ever ran at once and that every index from 1 to 1,000 ran once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from live import ME, LiveCluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.05
hosts:
  - {name: n1, slots: 8}
  - {name: n2, slots: 8}
queues:
  - {name: normal, priority: 30}
"""
TIMINGS = ("--heartbeat-interval", "0.05", "--unreach-after", "5", "--requeue-after", "5")
SUBMITTED = re.compile(r"^Job <(\d+)> is submitted to queue <normal>\.$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-arrays")
    cluster = LiveCluster(root, CONFIG)
    try:
        cluster.start_controller(extra=TIMINGS)
        cluster.start_agent("n1", slots=8, wait=False)
        cluster.start_agent("n2", slots=8, wait=False)
        wait_for(lambda: all(h["state"] == "ok" for h in cluster.hosts().values()), 20,
                 "both agents to register")
        yield cluster
    finally:
        cluster.close()


def submit(cluster: LiveCluster, *args: str) -> int:
    done = cluster.xce("submit", *args, cwd=cluster.root)
    found = SUBMITTED.match(done.stdout.strip())
    assert found is not None and done.returncode == 0, (done.stdout, done.stderr)
    return int(found.group(1))


def states(cluster: LiveCluster, array: int) -> list[str]:
    return [job["state"] for job in cluster.ok("GET", f"/jobs?array={array}&state=all")["jobs"]]


def most_at_once(stamps: list[tuple[int, str, int]]) -> int:
    """The most intervals open at once: (time, s|e, index) stamps, an end before a
    start at the same time."""
    running = most = 0
    for _time, kind, _index in sorted(stamps, key=lambda s: (s[0], s[1] != "e")):
        running += 1 if kind == "s" else -1
        most = max(most, running)
    return most


def test_an_array_of_1000_runs_ten_at_a_time_with_its_index(cluster: LiveCluster) -> None:
    stamps, out = cluster.root / "stamps", cluster.root / "out"
    out.mkdir()
    script = (f'echo "s $(date +%s%N) $LSB_JOBINDEX" >> {stamps}; '
              f'echo "e $(date +%s%N) $LSB_JOBINDEX" >> {stamps}')
    array = submit(cluster, "-J", "big[1-1000]%10", "-o", f"{out}/o.%J.%I", "--",
                   "sh", "-c", script)
    lines = cluster.xce("jobs", "-A", str(array)).stdout.splitlines()
    assert lines[0].split() == ["JOBID", "ARRAY_SPEC", "OWNER", "NJOBS", "PEND", "DONE",
                                "RUN", "EXIT", "SSUSP", "USUSP", "PSUSP"]
    assert lines[1].split()[:4] == [str(array), "big[1-1000]", ME, "1000"]
    wait_for(lambda: states(cluster, array).count("DONE") == 1000, 600,
             "the 1,000 elements to end DONE", interval=1.0)
    found = [line.split() for line in stamps.read_text().splitlines()]
    parsed = [(int(t), kind, int(index)) for kind, t, index in found]
    assert sorted(i for _t, kind, i in parsed if kind == "s") == list(range(1, 1001)), (
        "LSB_JOBINDEX: every index from 1 to 1,000, once"
    )
    assert most_at_once(parsed) <= 10, "%10: never more than ten elements at once"
    assert most_at_once(parsed) >= 2, "and more than one at a time on 16 slots"
    assert (out / f"o.{array}.1000").exists() and (out / f"o.{array}.1").exists(), (
        "%J is the array's id and %I the element's index in -o"
    )
    summary = cluster.xce("jobs", "-A", str(array)).stdout.splitlines()[1].split()
    assert summary[3:8] == ["1000", "0", "1000", "0", "0"]


def test_dependency_chains_start_in_order(cluster: LiveCluster) -> None:
    order = cluster.root / "order"

    def step(name: str, *extra: str, code: int = 0, sleep: float = 0.0) -> int:
        return submit(cluster, *extra, "-o", "/dev/null", "--", "sh", "-c",
                      f"echo {name} >> {order}; sleep {sleep}; exit {code}")

    prep = step("prep", "-J", "prep", sleep=0.5)
    after_prep = step("after_prep", "-w", "done(prep)")
    bad = step("bad", "-J", "bad", code=3)
    assert cluster.job(bad)["name"] == "bad"
    arr = step("arr$LSB_JOBINDEX", "-J", "arr[1-3]%1", "-w", f"done({after_prep})")
    after_arr = step("after_arr", "-w", "ended(arr) && exit(bad, 3)")
    started = step("started", "-w", f"started({prep})")
    never = step("never", "-w", "done(bad)")
    ended = step("ended", "-w", "done(bad)", "-ti")
    wait_for(lambda: cluster.job(after_arr)["state"] == "DONE", 60, "the chain to end")
    ran = order.read_text().split()
    assert ran.index("prep") < ran.index("after_prep") < ran.index("arr1")
    assert ran.index("arr1") < ran.index("arr2") < ran.index("arr3") < ran.index("after_arr")
    assert ran.index("bad") < ran.index("after_arr") and "started" in ran
    assert "never" not in ran and "ended" not in ran
    pending = cluster.xce("jobs", "-p", str(never)).stdout
    assert " Dependency condition can never be satisfied;" in pending
    orphan = wait_for(lambda: (j := cluster.job(ended))["state"] == "EXIT" and j, 10)
    assert orphan["exit_reason"] == "dependency condition can never be satisfied"
    assert orphan["start_time"] is None, "-ti: ended without running"
    assert cluster.job(started)["state"] == "DONE" and cluster.job(arr + 3)["index"] == 3
    assert cluster.xce("kill", str(never)).returncode == 0


def test_kill_an_array_or_one_element(cluster: LiveCluster) -> None:
    array = submit(cluster, "-J", "held[1-4]", "-w", "done(bad) && done(prep)", "--", "true")
    killed = cluster.xce("kill", f"{array}[2]")
    assert killed.stdout.strip() == f"Job <{array}[2]> is being terminated"
    assert states(cluster, array) == ["PEND", "EXIT", "PEND", "PEND"]
    missing = cluster.xce("kill", f"{array}[9]")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"xce: Job <{array}[9]>: No matching job found"
    killed = cluster.xce("kill", str(array))
    assert killed.stdout.strip() == f"Job <{array}> is being terminated"
    assert states(cluster, array) == ["EXIT"] * 4
    listed = cluster.xce("jobs", "-a", str(array)).stdout.splitlines()
    assert [line.split()[0] for line in listed[1:]] == [f"{array}[{i}]" for i in range(1, 5)]
    assert listed[1].split()[4] == "held[1]", "JOB_NAME (EXEC_HOST is empty): name[index]"


@pytest.mark.parametrize(("args", "message"), [
    (("-w", "done(12"), "xce: dependency error at column 8: expected ')' to close done(, "
     "not end of input"),
    (("-w", "done(99999)"), "xce: dependency error at column 6: job 99999 is not found"),
    (("-w", "done(nosuch)"), "xce: dependency error at column 6: no job of {user} is named "
     "'nosuch'"),
    (("-J", "a[1-5"), "xce: job array error at column 6: expected ']' to close the index "
     "list"),
    (("-J", "a[1-2000]"), "xce: job array error at column 5: index 2000 exceeds "
     "max_job_array_size 1000"),
])
def test_errors_in_an_expression_or_an_array_name_the_column(
    cluster: LiveCluster, args: tuple[str, ...], message: str
) -> None:
    done = cluster.xce("submit", *args, "--", "true")
    assert (done.returncode, done.stderr.strip()) == (1, message.format(user=ME))
