"""Bad input against a real controller (no agents needed): every refused request gets an
HTTP 4xx with the JSON body `{"error": str, "status": int}`, a message that says what is
wrong, and changes nothing (jobs, hosts, queues and the durable log's last fact are the
same after it). Then schemathesis fuzzes the whole API from its OpenAPI document.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import LiveCluster, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  mem: {type: numeric, consumable: true}
hosts:
  - {name: n1, slots: 2, resources: {mem: 8000}}
  - {name: n2, slots: 2, resources: {mem: 8000}}
queues:
  - {name: normal, priority: 30}
"""
HUGE = 2**70  # valid JSON, but no 64-bit integer


class Refusal:
    """One bad request and what the answer must say."""

    def __init__(self, method: str, path: str, body: Any = None, *, who: str | None,
                 status: int, words: tuple[str, ...], raw: bytes | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.method, self.path, self.body, self.who = method, path, body, who
        self.status, self.words, self.raw, self.headers = status, words, raw, headers


def job(**fields: Any) -> dict[str, Any]:
    return {"command": ["true"], **fields}


# Job 1 is bob's (pending: no agent runs), job 2 a finished (killed) job of the admin.
CASES = {
    # malformed or unknown requirement strings
    "res-missing-number": Refusal("POST", "/jobs", job(res="rusage[mem=]"), who="alice",
                                  status=400, words=("requirement error at column 12",
                                                     "expected a number")),
    "res-unclosed": Refusal("POST", "/jobs", job(res="select["), who="alice", status=400,
                            words=("requirement error at column 8", "expected an expression")),
    "res-unknown-section": Refusal("POST", "/jobs", job(res="bogus[x]"), who="alice",
                                   status=400, words=("requirement error", "section 'bogus'")),
    "res-unknown-resource": Refusal("POST", "/jobs", job(res="rusage[nosuch=1]"), who="alice",
                                    status=400, words=("unknown resource 'nosuch'",)),
    "res-bad-ptile": Refusal("POST", "/jobs", job(res="span[ptile=0]"), who="alice",
                             status=400, words=("requirement error", "ptile", ">= 1")),
    # queues and sizes
    "unknown-queue": Refusal("POST", "/jobs", job(queue="nosuch"), who="alice", status=400,
                             words=("unknown queue 'nosuch'",)),
    "larger-than-cluster": Refusal(
        "POST", "/jobs", job(n=64), who="alice", status=400,
        words=("job requests 64 slots; the most this cluster offers is 4 (all hosts)",)),
    "larger-than-any-host": Refusal(
        "POST", "/jobs", job(n=3, res="span[hosts=1]"), who="alice", status=400,
        words=("3 slots on one host", "the most this cluster offers is 2")),
    # bodies: JSON, types, fields
    "bad-json": Refusal("POST", "/jobs", raw=b'{"command": ["true"', who="alice", status=400,
                        words=("bad request body",)),
    "not-json": Refusal("POST", "/jobs", raw=b"{not json", who="alice", status=400,
                        words=("bad request body", "malformed")),
    "empty-body": Refusal("POST", "/jobs", raw=b"", who="alice", status=400,
                          words=("bad request body",)),
    "command-not-a-list": Refusal("POST", "/jobs", {"command": "true"}, who="alice", status=400,
                                  words=("bad request body", "Expected `array`, got `str`",
                                         "$.command")),
    "n-as-string": Refusal("POST", "/jobs", job(n="2"), who="alice", status=400,
                           words=("Expected `int`, got `str`", "$.n")),
    "n-zero": Refusal("POST", "/jobs", job(n=0), who="alice", status=400,
                      words=("Expected `int` >= 1", "$.n")),
    "empty-command": Refusal("POST", "/jobs", {"command": []}, who="alice", status=400,
                             words=("length >= 1", "$.command")),
    "missing-command": Refusal("POST", "/jobs", {}, who="alice", status=400,
                               words=("missing required field `command`",)),
    "env-not-strings": Refusal("POST", "/jobs", job(env={"A": 1}), who="alice", status=400,
                               words=("Expected `str`, got `int`", "$.env")),
    "unknown-field": Refusal("POST", "/jobs", job(bogus=1), who="alice", status=400,
                             words=("unknown field `bogus`",)),
    "huge-priority": Refusal("POST", "/jobs", job(priority=HUGE), who="alice", status=400,
                             words=("bad request body", "<= 100", "$.priority")),  # (-sp)
    "huge-slots": Refusal("POST", "/agents/n1/register", {"slots": HUGE}, who="n1", status=400,
                          words=("64-bit", "$.slots")),
    "huge-exit-code": Refusal(
        "POST", "/agents/n1/heartbeat", {"finished": [{"job": 1, "exit_code": HUGE}]},
        who="n1", status=400, words=("64-bit", "$.finished[0].exit_code")),
    "register-wrong-type": Refusal("POST", "/agents/n1/register", {"slots": "x"}, who="n1",
                                   status=400, words=("Expected `int`, got `str`", "$.slots")),
    "heartbeat-unknown-field": Refusal("POST", "/agents/n1/heartbeat", {"jobs": []}, who="n1",
                                       status=400, words=("unknown field `jobs`",)),
    "bad-state-filter": Refusal("GET", "/jobs?state=nope", who="alice", status=400,
                                words=("state must be one of", "unfinished")),
    "bad-limit": Refusal("GET", "/jobs?limit=abc", who="alice", status=400,
                         words=("limit must be a whole number",)),
    "negative-limit": Refusal("GET", "/jobs?limit=-1", who="alice", status=400,
                              words=("limit must be a whole number",)),
    # authentication
    "no-token": Refusal("POST", "/jobs", job(), who=None, status=401,
                        words=("authentication required", "Bearer")),
    "no-token-read": Refusal("GET", "/hosts", who=None, status=401,
                             words=("authentication required",)),
    "wrong-token": Refusal("POST", "/jobs", job(), who=None, status=401,
                           headers={"Authorization": "Bearer xce_not-a-token"},
                           words=("unknown or revoked token",)),
    "not-bearer": Refusal("POST", "/hosts/n1/close", who=None, status=401,
                          headers={"Authorization": "Basic YWRtaW46YWRtaW4="},
                          words=("authentication required",)),
    "revoked-token": Refusal("GET", "/jobs", who="carol", status=401,
                             words=("unknown or revoked token",)),
    # roles and ownership
    "user-closes-host": Refusal("POST", "/hosts/n1/close", who="alice", status=403,
                                words=("role user may not POST /hosts/n1/close",)),
    "user-opens-host": Refusal("POST", "/hosts/n1/open", who="alice", status=403,
                               words=("role user may not",)),
    "user-kills-other-users-job": Refusal("POST", "/jobs/1/kill", who="alice", status=403,
                                          words=("Job <1>", "not the owner of the job")),
    "user-holds-other-users-job": Refusal("POST", "/jobs/1/stop", who="alice", status=403,
                                          words=("not the owner of the job",)),
    "user-submits-as-other": Refusal("POST", "/jobs", job(user="bob"), who="alice", status=403,
                                     words=("only an admin may submit as another user",
                                            "bob")),
    "agent-registers-as-other-host": Refusal(
        "POST", "/agents/n2/register", {"slots": 2}, who="n1", status=403,
        words=("agent n1 may only speak for its own host, not n2",)),
    "agent-heartbeats-as-other-host": Refusal(
        "POST", "/agents/n2/heartbeat", {}, who="n1", status=403,
        words=("agent n1 may only speak for its own host",)),
    "agent-submits": Refusal("POST", "/jobs", job(), who="n1", status=403,
                             words=("role agent may not POST /jobs",)),
    "agent-reads-jobs": Refusal("GET", "/jobs", who="n1", status=403,
                                words=("role agent may not GET /jobs",)),
    "agent-kills": Refusal("POST", "/jobs/1/kill", who="n1", status=403,
                           words=("role agent may not",)),
    "user-registers-host": Refusal("POST", "/agents/n1/register", {}, who="alice", status=403,
                                   words=("role user may not POST /agents/n1/register",)),
    "scheduler-submits": Refusal("POST", "/jobs", job(), who="sched", status=403,
                                 words=("role scheduler may not POST /jobs",)),
    "admin-registers-host": Refusal("POST", "/agents/n1/register", {}, who="admin", status=403,
                                    words=("role admin may not",)),
    # things that do not exist, or are in the wrong state
    "no-such-job": Refusal("GET", "/jobs/999", who="alice", status=404,
                           words=("Job <999>: No matching job found",)),
    "kill-no-such-job": Refusal("POST", "/jobs/999/kill", who="admin", status=404,
                                words=("No matching job found",)),
    "no-such-host": Refusal("POST", "/hosts/nosuch/close", who="admin", status=404,
                            words=("host nosuch: no such host",)),
    "no-such-path": Refusal("GET", "/nosuch", who="alice", status=404, words=("Not Found",)),
    "wrong-method": Refusal("DELETE", "/jobs", who="alice", status=405,
                            words=("Method Not Allowed",)),
    "kill-finished-job": Refusal("POST", "/jobs/2/kill", who="admin", status=409,
                                 words=("Job <2>: Job has already finished",)),
    "hold-finished-job": Refusal("POST", "/jobs/2/stop", who="admin", status=409,
                                 words=("only a pending job",)),
    "open-unavail-host": Refusal("POST", "/hosts/n1/open", who="admin", status=409,
                                 words=("host n1 is unavail",
                                        "only an ok or closed host can be opened or closed")),
    "heartbeat-before-register": Refusal("POST", "/agents/n1/heartbeat", {}, who="n1",
                                         status=409, words=("not registered", "register first")),
}


def last_fact(cluster: LiveCluster) -> int:
    """The durable log's last seq, read with a read-only connection beside the running
    controller (SQLite WAL: readers do not disturb the writer)."""
    db = sqlite3.connect(f"file:{cluster.state / 'xce.db'}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COALESCE(MAX(seq), 0) FROM facts").fetchone()[0])
    finally:
        db.close()


def everything(cluster: LiveCluster) -> tuple[Any, ...]:
    return (
        cluster.ok("GET", "/jobs?user=all&state=all"),
        cluster.ok("GET", "/hosts"),
        cluster.ok("GET", "/queues"),
        last_fact(cluster),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-bad-input")
    with live_cluster(root, CONFIG, users=("alice", "bob", "carol"), agents=("n1",)) as cluster:
        cluster.add_token("scheduler", "sched")
        cluster.start_controller()
        assert cluster.submit(["true"], who="bob") == 1
        assert cluster.submit(["true"]) == 2
        cluster.ok("POST", "/jobs/2/kill")
        revoked = cluster.run("token", "revoke", "--state", str(cluster.state), "--name", "carol")
        assert revoked.stdout.strip() == "1 token(s) revoked."
        again = cluster.run("token", "revoke", "--state", str(cluster.state), "--name", "carol",
                            check=False)
        assert (again.returncode, again.stdout, again.stderr.strip()) == (
            1, "", "Error: no token of 'carol': nothing revoked"
        ), "a name with no token (misspelt, or revoked already) is no revocation"
        # Pend reasons are those of a session (the comparisons need them settled).
        wait_for(lambda: cluster.job(1)["pend_kind"] not in ("", "new"), 10, "a session")
        yield cluster


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_refused_with_a_clear_message_and_nothing_changes(cluster: LiveCluster,
                                                          case: Refusal) -> None:
    before = everything(cluster)
    answer = cluster.api(case.method, case.path, case.body, who=case.who, raw=case.raw,
                         headers=case.headers)
    assert answer.status == case.status, answer
    assert answer.content_type == "application/json"
    assert isinstance(answer.json, dict) and set(answer.json) == {"error", "status"}, answer
    assert answer.json["status"] == case.status
    message = answer.json["error"]
    assert isinstance(message, str)
    for word in case.words:
        assert word in message, (word, message)
    assert everything(cluster) == before


def test_wrong_method_names_the_allowed_ones(cluster: LiveCluster) -> None:
    request = urllib.request.Request(f"{cluster.url}/queues", method="DELETE")
    request.add_header("Authorization", f"Bearer {cluster.token('alice')}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        opener.open(request, timeout=10)
    except urllib.error.HTTPError as err:
        assert err.code == 405
        assert err.headers.get("Allow") == "GET"
    else:
        raise AssertionError("DELETE /queues was accepted")


def test_cli_shows_the_controller_message(cluster: LiveCluster) -> None:
    big = cluster.xce("submit", "-n", "64", "--", "true", who="alice")
    assert (big.returncode, big.stdout) == (1, "")
    assert big.stderr.strip() == (
        "xce: job requests 64 slots; the most this cluster offers is 4 (all hosts)")
    close = cluster.xce("host", "close", "n1", who="alice")
    assert (close.returncode, close.stderr.strip()) == (
        1, "xce: role user may not POST /hosts/n1/close")


def test_the_controller_still_works_after_all_refusals(cluster: LiveCluster) -> None:
    """Nothing refused took a job id, and the durable log still takes facts."""
    jobs_before = cluster.jobs()
    fact = last_fact(cluster)
    assert [j["id"] for j in jobs_before] == [1, 2]
    assert cluster.submit(["true"], who="alice") == 3
    assert last_fact(cluster) == fact + 1
    assert cluster.job(3)["user"] == "alice"
    assert cluster.host("n1")["state"] == "unavail"  # no refused registration took it


def schemathesis() -> str:
    beside = Path(sys.executable).with_name("schemathesis")
    found = str(beside) if beside.exists() else shutil.which("schemathesis")
    if found is None:
        pytest.fail("schemathesis is not installed: pip install '.[test]'")
    return found


def test_schemathesis_finds_no_server_error(tmp_path: Path) -> None:
    """Every operation of /openapi.json, fuzzed with the admin token: no 5xx, and
    the answers conform to the document (status codes, content types, schemas, auth).
    `positive_data_acceptance` is left out: a schema-valid submission may still be
    refused for what it means (an unknown queue, a job larger than the cluster)."""
    with live_cluster(tmp_path, CONFIG) as cluster:
        cluster.start_controller()
        done = subprocess.run(
            [schemathesis(), "run", f"{cluster.url}/openapi.json",
             "-H", f"Authorization: Bearer {cluster.token('admin')}",
             "--checks", "all", "--exclude-checks", "positive_data_acceptance",
             "--max-examples", "25", "--seed", "1", "--generation-database", "none",
             "--no-color", "--request-timeout", "10"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
        assert " passed" in done.stdout
        log = cluster.log_tail("controller", 10_000)
        assert "CRITICAL" not in log and "internal error" not in log, log[-3000:]
