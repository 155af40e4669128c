"""The job surface LSF users live in (issue 21: 1), with real processes: a controller,
agents and real jobs, driven through the CLI.

* Why a job failed, centrally: the agent reports the failure (unknown user, command
  not found, working directory missing or output file not writable, a signal it did
  not get from XCE) and `xce jobs -l` says it.
* `xce peek` (bpeek): the output so far of a running job, fetched from its agent.
* `xce hist` (bhist): a requeued job's life from the durable log, with its hosts.
* `xce acct` (bacct): counts and times equal to what the test ran, the same after a
  controller restart (durable accounting records).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import ME, LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30}
  - {name: other, priority: 20}
"""
SUBMITTED = re.compile(r"^Job <(\d+)> is submitted to queue <\w+>\.$")
as_root = pytest.mark.skipif(os.geteuid() != 0,
                             reason="an agent runs jobs as their users only as root")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-job-surface")
    with live_cluster(root, CONFIG, agents=("n1",), users=("alice",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=4)
        yield made


def submit(cluster: LiveCluster, *args: str, who: str = "admin") -> int:
    done = cluster.xce("submit", *args, who=who)
    assert done.returncode == 0, done.stderr
    match = SUBMITTED.match(done.stdout.strip())
    assert match is not None, done.stdout
    return int(match.group(1))


def ended(cluster: LiveCluster, job: int) -> dict[str, Any]:
    return cluster.wait_state(job, ("DONE", "EXIT"))


def last_line(cluster: LiveCluster, job: int) -> str:
    """The last line of `xce jobs -l JOB` once the job has ended."""
    ended(cluster, job)
    shown = cluster.xce("jobs", "-l", str(job))
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.rstrip().splitlines()[-1]


# ---------------------------------------------------------------- why a job failed
@as_root
def test_a_job_of_an_unknown_user_says_so_in_jobs_l(cluster: LiveCluster) -> None:
    job = submit(cluster, "-u", "nosuchuser-xce", "--", "true")
    info = ended(cluster, job)
    assert (info["state"], info["exit_code"]) == ("EXIT", 127)
    failure = ("unknown user 'nosuchuser-xce' on n1 (the user must exist on the execution "
               "hosts)")
    assert info["failure"] == failure
    assert last_line(cluster, job).endswith(f": Exited: {failure}.")


def test_a_command_not_found_and_a_missing_directory_say_so(cluster: LiveCluster) -> None:
    missing = submit(cluster, "--", "no-such-command-xce", "-x")
    assert last_line(cluster, missing).endswith(
        ": Exited: command 'no-such-command-xce' not found on n1.")
    gone = cluster.root / "gone"
    nowhere = submit(cluster, "--cwd", str(gone), "--", "true")
    assert ended(cluster, nowhere)["exit_code"] == 127
    assert last_line(cluster, nowhere).endswith(
        f": Exited: cannot change to directory '{gone}' on n1: No such file or directory.")


@as_root
def test_an_output_file_the_user_cannot_write_says_so(cluster: LiveCluster) -> None:
    """nobody's job in a directory only root may write: its output file cannot be made."""
    locked = cluster.root / "locked"
    locked.mkdir(mode=0o755)
    job = submit(cluster, "-u", "nobody", "--cwd", str(locked), "-o", "out.%J", "--", "true")
    info = ended(cluster, job)
    assert (info["state"], info["exit_code"]) == ("EXIT", 127)
    assert last_line(cluster, job).endswith(
        f": Exited: cannot open output file '{locked}/out.{job}' on n1: Permission denied.")


def test_a_signal_the_job_got_elsewhere_is_named(cluster: LiveCluster) -> None:
    job = submit(cluster, "--", "sh", "-c", "kill -SEGV $$")
    info = ended(cluster, job)
    assert (info["state"], info["signal"]) == ("EXIT", 11)
    assert last_line(cluster, job).endswith(
        ": Exited by signal 11: SIGSEGV (Segmentation fault) on n1.")
    # A job that exits non-zero on its own has no failure: its status says it all.
    plain = submit(cluster, "--", "sh", "-c", "exit 3")
    assert ended(cluster, plain)["failure"] == ""
    assert last_line(cluster, plain).endswith(": Exited with exit code 3.")


# ---------------------------------------------------------------- peek
def test_peek_shows_what_a_running_job_printed(cluster: LiveCluster) -> None:
    job = submit(cluster, "--", "sh", "-c",
                 "echo first line; echo second line; echo to stderr >&2; exec sleep 60")
    cluster.wait_state(job, "RUN")
    jobdir = cluster.root / "agent-n1" / "jobs" / str(job)
    wait_for(lambda: (jobdir / "stdout").exists()
             and "stderr" in (jobdir / "stdout").read_text(), 10, "the job's output")
    started = time.monotonic()
    shown = cluster.xce("peek", str(job))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "<< output from stdout >>", "first line", "second line", "to stderr"]
    assert time.monotonic() - started < 5, "the agent answers in its next heartbeat"
    # Only its owner (or an admin) may see it; only while it runs.
    other = cluster.xce("peek", str(job), who="alice")
    assert (other.returncode, other.stderr.strip()) == (
        1, f"xce: Job <{job}>: not the owner of the job")
    cluster.xce("kill", str(job))
    cluster.wait_state(job, "EXIT")
    late = cluster.xce("peek", str(job))
    assert (late.returncode, late.stderr.strip()) == (
        1, f"xce: Job <{job}>: the job is EXIT: only a running job's output can be peeked at")
    nothing = cluster.xce("peek", "99999")
    assert nothing.stderr.strip() == "xce: Job <99999>: No matching job found"


def test_peek_of_separate_output_and_error_files(cluster: LiveCluster) -> None:
    job = submit(cluster, "-o", "peek.%J.out", "-e", "peek.%J.err", "--", "sh", "-c",
                 "echo out; echo err >&2; exec sleep 60")
    cluster.wait_state(job, "RUN")
    wait_for(lambda: (cluster.root / f"peek.{job}.err").exists()
             and (cluster.root / f"peek.{job}.err").read_text(), 10, "the job's error file")
    answer = json.loads(cluster.xce("peek", "--json", str(job)).stdout)
    assert answer["host"] == "n1"
    assert (answer["stdout"]["text"], answer["stderr"]["text"]) == ("out\n", "err\n")
    assert answer["stdout"]["path"] == str(cluster.root / f"peek.{job}.out")
    shown = cluster.xce("peek", str(job)).stdout.splitlines()
    assert shown == ["<< output from stdout >>", "out", "<< output from stderr >>", "err"]
    cluster.xce("kill", str(job))
    cluster.wait_state(job, "EXIT")


# ---------------------------------------------------------------- hist and acct
def test_hist_of_a_job_requeued_when_its_agent_was_killed(tmp_path: Path) -> None:
    config = CONFIG.replace("  - {name: n1, slots: 4}", "  - {name: n1, slots: 1}\n"
                            "  - {name: n2, slots: 1}")
    with live_cluster(tmp_path, config) as cluster:
        cluster.start_controller()
        cluster.start_agent("n1", slots=1)
        cluster.start_agent("n2", slots=1)
        cluster.ok("POST", "/hosts/n2/close")  # so that the job starts on n1
        script = '[ "$LSB_HOSTS" = n2 ] && exit 0; exec sleep 60'
        job = submit(cluster, "-J", "again", "--", "sh", "-c", script)
        cluster.wait_state(job, "RUN")
        cluster.stop("n1")  # SIGKILL to the agent: n1 becomes unreach, then lost
        cluster.wait_state(job, "PEND", timeout=15)
        cluster.ok("POST", "/hosts/n2/open")
        info = cluster.wait_state(job, "DONE", timeout=15)
        shown = cluster.xce("hist", str(job))
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == (f"Job <{job}>, Job Name <again>, User <{ME}>, Queue <normal>, "
                            f"Command <sh -c '{script}'>")
        events = [line.split(": ", 1)[1] for line in lines[1:6]]
        assert events[0] == f"Submitted, CWD <{cluster.root}>, 1 Task(s) Requested;"
        assert events[1:4] == ["Started 1 Task(s) on Host(s) <n1>;",
                               "Requeued from Host(s) <n1>: host n1 unreachable;",
                               "Started 1 Task(s) on Host(s) <n2>;"]
        assert re.fullmatch(r"Done successfully\. The CPU time used is \d+\.\d seconds;",
                            events[4]), events[4]
        assert lines[6] == ""
        assert lines[7].startswith("Summary of time in seconds spent in various states by ")
        assert lines[8].split() == ["PEND", "PSUSP", "RUN", "TOTAL"]
        pend, psusp, run, total = map(int, lines[9].split())
        assert psusp == 0 and abs(total - (info["end_time"] - info["submit_time"])) <= 1
        assert run >= 2, "it ran on n1 until n1 was found lost (unreach 1.5 s + 1.5 s)"
        assert abs(pend + run - total) <= 1
        life = json.loads(cluster.xce("hist", "--json", str(job)).stdout)
        assert [e["kind"] for e in life["events"]] == [
            "submitted", "started", "requeued", "started", "finished"]
        assert life["events"][3]["hosts"] == {"n2": 1}


def test_acct_figures_are_what_the_jobs_did(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        cluster.start_controller()
        cluster.start_agent("n1", slots=4)
        busy = "import time; end = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
        jobs = [submit(cluster, "--", "python3", "-c", busy),
                submit(cluster, "--", "sleep", "1"),
                submit(cluster, "--", "sh", "-c", "exit 3"),
                submit(cluster, "-q", "other", "--", "sleep", "0.5")]
        infos = [ended(cluster, job) for job in jobs]
        assert [i["state"] for i in infos] == ["DONE", "DONE", "EXIT", "DONE"]
        answer = json.loads(cluster.xce("acct", "--json").stdout)
        rows = {(r["user"], r["queue"]): r for r in answer["rows"]}
        assert set(rows) == {(ME, "normal"), (ME, "other")}
        normal, other = infos[:3], infos[3:]
        for row, group in ((rows[ME, "normal"], normal), (rows[ME, "other"], other)):
            assert (row["done"], row["exited"]) == (
                sum(i["state"] == "DONE" for i in group), sum(i["state"] == "EXIT" for i in group))
            expected_wall = sum(i["end_time"] - i["start_time"] for i in group)
            assert row["wall_time"] == pytest.approx(expected_wall, abs=1e-6)
            waits = [i["start_time"] - i["submit_time"] for i in group]
            assert row["wait_mean"] == pytest.approx(sum(waits) / len(waits), abs=1e-6)
            assert row["wait_max"] == pytest.approx(max(waits), abs=1e-6)
            turnarounds = [i["end_time"] - i["submit_time"] for i in group]
            assert row["turnaround_max"] == pytest.approx(max(turnarounds), abs=1e-6)
        assert 0.5 <= rows[ME, "normal"]["cpu_time"] < 3, "the busy job's 0.6 s of CPU"
        assert infos[0]["cpu_time"] >= 0.5
        assert answer["total"]["done"] + answer["total"]["exited"] == 4
        # The table, one window that has them all and one that has none.
        table = cluster.xce("acct", "-C", f"@{infos[0]['submit_time'] - 1},").stdout.splitlines()
        assert table[0].endswith(": 4 job(s)")
        assert table[1].split()[:4] == ["USER", "QUEUE", "DONE", "EXIT"]
        assert table[2].split()[:4] == [ME, "normal", "2", "1"]
        assert table[3].split()[:4] == [ME, "other", "1", "0"]
        assert table[4].split()[:4] == ["TOTAL", "-", "3", "1"]
        before = cluster.xce("acct", "--until", f"@{infos[0]['submit_time'] - 1}").stdout
        assert before.strip().endswith(": 0 job(s)")
        queue = json.loads(cluster.xce("acct", "-q", "other", "--json").stdout)
        assert [r["queue"] for r in queue["rows"]] == ["other"]
        # Durable: the same after the controller's restart (kill -9).
        cluster.stop_controller()
        cluster.start_controller()
        assert json.loads(cluster.xce("acct", "--json").stdout) == answer
