"""Elastic shared resources, live: a real controller, real agents and real jobs that
hold license tokens of a shared pool (`vcs`: base total 0, a catalog countable with
max_borrow 3; `hspice`: a `site` pool of 1 and a countable `cloud` pool).

* Jobs with `rusage[vcs=1]` pend and the demand asks for vcs tokens; a borrow and
  its grant raise the pool's total and the jobs start.
* A return asked for while the tokens are in use takes them out of the total at
  once: no new job gets them (a pending vcs job stays pending), and the return
  completes (`returned`) only once the running jobs end.
* The controller is killed -9 between steps and restarted: tokens in flight,
  borrowed and returning survive (recovery from a snapshot plus the facts after it).
* Refusals (unknown pool, not countable, too much, a user, bad amounts) are 4xx
  and change nothing; the runtime catalog (allowance, headroom) is set and lifted.

The tests share one cluster and run in order; each leaves every pool as it found it
(nothing borrowed, in flight or returning) and every job finished.
"""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from live import FAST, LiveCluster, free_port, live_cluster, skip_unless_linux, wait_for

from xce.model.events import Event, TokensChanged
from xce.sim.replay import replay

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  vcs: {type: numeric, consumable: true, shared: true}
  hspice: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 2}
  - {name: n2, slots: 2}
shared:
  vcs: {total: 0}
  hspice:
    - {pool: site, total: 1}
    - {pool: cloud, total: 0}
catalog:
  templates:
    - {name: aws.c5, provider: aws, slots: 2, max: 4}
  countables:
    - {resource: vcs, max_borrow: 3}
    - {resource: hspice, pool: cloud, max_borrow: 2}
"""
# Snapshots every few facts: recovery reads a snapshot (with the token ledger) and
# the facts after it.
EXTRA = (*FAST, "--snapshot-every", "4")
VCS = "rusage[vcs=1]"
# A job that runs until the test creates `release.<job id>`.
HOLD = "while [ ! -e release.$XCE_JOBID ]; do sleep 0.05; done"


class Cluster(LiveCluster):
    """A live cluster whose controller restarts on the same address."""

    listen = ""

    def restart(self) -> None:
        """kill -9 the controller and start it again (the agents keep their jobs and
        find it where it was)."""
        self.stop_controller()
        self.start_controller(self.listen, extra=EXTRA)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("live-tokens")
    cluster = Cluster(root, CONFIG, users=("alice",))
    cluster.add_token("provisioner", "prov")
    cluster.listen = f"127.0.0.1:{free_port()}"
    try:
        cluster.start_controller(cluster.listen, extra=EXTRA)
        cluster.lease("prov", "aws")  # a provisioner acts under a lease it holds
        cluster.start_agent("n1", wait=False)
        cluster.start_agent("n2", wait=False)
        wait_for(lambda: all(h["state"] == "ok" for h in cluster.hosts().values()), 20,
                 "both agents to register")
        yield cluster
        log = cluster.log_tail("controller", 100_000)
        assert "ERROR" not in log and "internal error" not in log, log[-3000:]
    finally:
        cluster.close()


def pools(cluster: LiveCluster, who: str = "admin") -> dict[str, dict[str, Any]]:
    return {p["pool"]: p for p in cluster.ok("GET", "/resources", who=who)["resources"]}


def tokens(cluster: LiveCluster, pool: str = "vcs") -> tuple[float, ...]:
    """(base, borrowed, in flight, returning, in use, free, headroom) of a pool."""
    p = pools(cluster)[pool]
    return tuple(p[k] for k in ("base", "borrowed", "in_flight", "returning", "in_use", "free",
                                "headroom"))


def step(cluster: LiveCluster, pool: str, action: str, amount: float,
         who: str = "prov") -> dict[str, Any]:
    return dict(cluster.ok("POST", f"/resources/{pool}/{action}", {"amount": amount}, who))


def facts(cluster: LiveCluster) -> list[Event]:
    """The durable log, read beside the running controller (SQLite WAL)."""
    db = sqlite3.connect(f"file:{cluster.state / 'xce.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT body FROM facts ORDER BY seq").fetchall()
    finally:
        db.close()
    decoder = msgspec.msgpack.Decoder(Event)
    return [decoder.decode(body) for (body,) in rows]


def token_steps(cluster: LiveCluster) -> list[tuple[str, str, float]]:
    return [(f.pool, f.step, f.amount) for f in facts(cluster) if isinstance(f, TokensChanged)]


def pend_reason(cluster: LiveCluster, job: int) -> str:
    return str(wait_for(lambda: (j := cluster.job(job))["pend_kind"] not in ("new", "")
                        and j["pend_reason"], 5, f"a session's pend reason for job {job}"))


def release(cluster: LiveCluster, job: int) -> None:
    (cluster.root / f"release.{job}").touch()
    assert cluster.wait_state(job, ("DONE", "EXIT"))["state"] == "DONE"


def still_pending(cluster: LiveCluster, job: int, sessions: int = 5) -> None:
    """The job pends through `sessions` more sessions (by the session counter)."""
    first = cluster.ok("GET", "/demand")["session"]
    wait_for(lambda: cluster.ok("GET", "/demand")["session"] >= first + sessions, 10,
             f"{sessions} sessions")
    assert cluster.job(job)["state"] == "PEND", f"job {job} got tokens it must not have"


def test_borrow_grant_and_return_with_restarts(cluster: Cluster) -> None:
    a = cluster.submit(["sh", "-c", HOLD], res=VCS, name="a")
    b = cluster.submit(["sh", "-c", HOLD], res=VCS, name="b")
    assert pend_reason(cluster, a) == "Short 1 of vcs; waiting for provisioning (headroom 3)"
    # The demand asks for the two tokens, once a session has seen both jobs (one may run
    # between the two submissions and ask for a's token alone).
    pend_reason(cluster, b)
    wait_for(lambda: [sorted(w["jobs"]) for w in
                      cluster.ok("GET", "/demand")["demand"]["resources"]] == [[a, b]],
             5, "vcs demand for both jobs")
    [wanted] = cluster.ok("GET", "/demand")["demand"]["resources"]
    assert (wanted["resource"], wanted["amount"], sorted(wanted["jobs"])) == ("vcs", 2, [a, b])
    shown = cluster.xce("demand", "-l")
    assert shown.returncode == 0, shown.stderr
    assert any(line.split()[:3] == ["vcs", "-", "2"] for line in shown.stdout.splitlines())
    assert tokens(cluster) == (0, 0, 0, 0, 0, 0, 3)

    # Asked for: in flight, not usable; it survives a crash.
    answer = step(cluster, "vcs", "borrow", 2)
    assert (answer["in_flight"], answer["borrowed"], answer["headroom"]) == (2, 0, 1)
    cluster.restart()
    assert tokens(cluster) == (0, 0, 2, 0, 0, 0, 1), "tokens in flight survive a restart"
    still_pending(cluster, a, sessions=2)

    # Granted: the total grows and both jobs start.
    answer = step(cluster, "vcs", "grant", 2)
    assert (answer["in_flight"], answer["borrowed"]) == (0, 2)
    cluster.wait_state(a, "RUN")
    cluster.wait_state(b, "RUN")
    assert tokens(cluster) == (0, 2, 0, 0, 2, 0, 1)
    c = cluster.submit(["sh", "-c", HOLD], res=VCS, name="c")
    assert "vcs" in pend_reason(cluster, c)

    # A return while both tokens are in use: out of the total at once, not given back.
    answer = step(cluster, "vcs", "return", 1)
    assert (answer["borrowed"], answer["returning"], answer["in_use"], answer["free"]) == (
        1, 1, 2, 0)
    still_pending(cluster, c)
    assert tokens(cluster) == (0, 1, 0, 1, 2, 0, 2), "the return waits for a free token"
    cluster.restart()
    assert tokens(cluster) == (0, 1, 0, 1, 2, 0, 2), "a return under way survives a restart"
    still_pending(cluster, c, sessions=3)
    assert ("vcs", "returned", 1) not in token_steps(cluster)

    # One job ends: its token is the one given back; c still has none.
    release(cluster, a)
    # The API shows a fact as soon as it is applied; the log has it once it is durable.
    wait_for(lambda: tokens(cluster)[3] == 0 and ("vcs", "returned", 1) in token_steps(cluster),
             5, "the return to complete")
    assert tokens(cluster) == (0, 1, 0, 0, 1, 0, 2)
    still_pending(cluster, c)
    log = facts(cluster)
    ended = max(i for i, f in enumerate(log) if getattr(f, "job", None) == a)
    returned = [i for i, f in enumerate(log)
                if isinstance(f, TokensChanged) and f.step == "returned"]
    assert len(returned) == 1 and returned[0] > ended, "returned only after job a ended"
    assert token_steps(cluster) == [("vcs", "borrow_requested", 2), ("vcs", "granted", 2),
                                    ("vcs", "return_requested", 1), ("vcs", "returned", 1)]

    # The other ends: c gets the borrowed token that is left.
    release(cluster, b)
    cluster.wait_state(c, "RUN")
    release(cluster, c)
    # A return of free tokens completes at once (within a watch round).
    step(cluster, "vcs", "return", 1)
    wait_for(lambda: tokens(cluster) == (0, 0, 0, 0, 0, 0, 3), 5, "the last return")


# Each refusal: (who, path, body, status, words in the error).
REFUSALS: list[tuple[str, str, Any, int, str]] = [
    ("prov", "/resources/nosuch/borrow", {"amount": 1}, 404, "unknown pool 'nosuch'"),
    ("prov", "/resources/hspice/borrow", {"amount": 1}, 404, "pools: vcs, hspice/site"),
    ("prov", "/resources/hspice%2Fsite/borrow", {"amount": 1}, 400, "not countable"),
    ("prov", "/resources/vcs/borrow", {"amount": 4}, 409, "max_borrow 3 leaves 2"),
    ("prov", "/resources/vcs/grant", {"amount": 2}, 409, "cannot grant 2 tokens of vcs: 1 in"),
    ("prov", "/resources/vcs/refuse", {"amount": 1.5}, 409, "cannot refuse 1.5"),
    ("prov", "/resources/vcs/return", {"amount": 0.5}, 409, "cannot return 0.5 tokens of vcs: 0"),
    ("alice", "/resources/vcs/borrow", {"amount": 1}, 403, "role user may not"),
    ("alice", "/catalog", {"headroom": {"vcs": 1}}, 403, "role user may not"),
    ("prov", "/resources/vcs/borrow", {"amount": 0}, 400, "> 0"),
    ("prov", "/resources/vcs/borrow", {"amount": -1}, 400, "> 0"),
    ("prov", "/resources/vcs/borrow", {"amount": "one"}, 400, "Expected `float`"),
    ("prov", "/resources/vcs/borrow", {}, 400, "missing required field `amount`"),
    ("prov", "/resources/vcs/borrow", {"amount": 1, "pool": "x"}, 400, "unknown field"),
    ("prov", "/resources/vcs/lend", {"amount": 1}, 404, "Not Found"),
    ("prov", "/catalog", {"allowance": {"gcp.n2": 1}}, 400, "unknown template 'gcp.n2'"),
    ("prov", "/catalog", {"allowance": {"aws.c5": -1}}, 400, ">= 0"),
    ("prov", "/catalog", {"headroom": {"nosuch": 1}}, 400, "unknown pool 'nosuch'"),
    ("prov", "/catalog", {"headroom": {"hspice/site": 1}}, 400, "not countable"),
    ("prov", "/catalog", {"allowance": {"aws.c5": 1}, "headroom": {"vcs": -2}}, 400, ">= 0"),
]


def test_refusals_are_4xx_and_change_nothing(cluster: Cluster) -> None:
    step(cluster, "vcs", "borrow", 1)
    before = (pools(cluster), cluster.ok("GET", "/catalog"), len(facts(cluster)))
    for who, path, body, status, words in REFUSALS:
        answer = cluster.api("POST", path, body, who=who)
        assert answer.status == status, (path, body, answer)
        assert answer.json == {"error": answer.json["error"], "status": status}, answer
        assert words in answer.json["error"], (path, body, answer.json)
    after = (pools(cluster), cluster.ok("GET", "/catalog"), len(facts(cluster)))
    assert after == before, "a refused request changed something"
    # Readers read; a provisioner may refuse what it asked for.
    assert pools(cluster, who="alice")["vcs"]["in_flight"] == 1
    assert cluster.ok("GET", "/catalog", who="alice")["countables"][0]["in_flight"] == 1
    assert step(cluster, "vcs", "refuse", 1, who="admin")["in_flight"] == 0
    assert tokens(cluster) == (0, 0, 0, 0, 0, 0, 3)


def test_named_pool_runtime_catalog_and_cli(cluster: Cluster) -> None:
    # "hspice/cloud": the slash as %2F or as is.
    assert step(cluster, "hspice%2Fcloud", "borrow", 2)["in_flight"] == 2
    assert step(cluster, "hspice/cloud", "grant", 1)["borrowed"] == 1
    assert step(cluster, "hspice/cloud", "refuse", 1)["in_flight"] == 0
    listing = cluster.xce("resources", who="alice")
    assert listing.returncode == 0, listing.stderr
    assert [line.split() for line in listing.stdout.splitlines()] == [
        ["RESOURCE", "POOL", "BASE", "BORROWED", "IN_FLIGHT", "RETURNING", "IN_USE", "FREE",
         "HEADROOM"],
        ["vcs", "-", "0", "0", "0", "0", "0", "0", "3"],
        ["hspice", "site", "1", "0", "0", "0", "0", "1", "-"],
        ["hspice", "cloud", "0", "1", "0", "0", "0", "1", "1"],
    ]
    as_json = msgspec.json.decode(cluster.xce("resources", "--json").stdout)
    assert [p["pool"] for p in as_json["resources"]] == ["vcs", "hspice/site", "hspice/cloud"]

    # Runtime caps: an allowance per template, a headroom per countable pool (cut to
    # what max_borrow leaves).
    catalog = cluster.ok("POST", "/catalog", {"allowance": {"aws.c5": 1},
                                              "headroom": {"vcs": 1, "hspice/cloud": 5}}, "prov")
    [c5] = catalog["templates"]
    assert (c5["max"], c5["allowance"], c5["available"], c5["in_flight"]) == (4, 1, 1, 0)
    headroom = {c["pool"]: (c["headroom"], c["runtime_headroom"]) for c in catalog["countables"]}
    assert headroom == {"vcs": (1, 1), "hspice/cloud": (1, 1)}
    refused = cluster.api("POST", "/resources/vcs/borrow", {"amount": 2}, who="prov")
    assert (refused.status, refused.json["error"]) == (
        409, "cannot borrow 2 tokens of vcs: the headroom is 1")
    assert step(cluster, "vcs", "borrow", 1)["headroom"] == 0, "a borrow uses the headroom up"
    cluster.restart()
    shown = cluster.xce("demand", "-l")
    assert shown.returncode == 0, shown.stderr
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert ["aws.c5", "aws", "4", "0", "0", "1", "1"] in lines, shown.stdout
    assert ["vcs", "-", "3", "0", "1", "0", "0", "0"] in lines, "caps survive a restart"
    assert ["hspice", "cloud", "2", "1", "0", "0", "1", "1"] in lines, shown.stdout
    both = msgspec.json.decode(cluster.xce("demand", "-l", "--json").stdout)
    assert set(both) == {"demand", "catalog"}

    # null lifts them: max_borrow decides again.
    catalog = cluster.ok("POST", "/catalog", {"allowance": {"aws.c5": None},
                                              "headroom": {"vcs": None, "hspice/cloud": None}})
    assert catalog["templates"][0]["allowance"] is None
    assert catalog["templates"][0]["available"] == 4
    headroom = {c["pool"]: (c["headroom"], c["runtime_headroom"]) for c in catalog["countables"]}
    assert headroom == {"vcs": (2, None), "hspice/cloud": (1, None)}
    step(cluster, "vcs", "refuse", 1)
    step(cluster, "hspice/cloud", "return", 1)
    wait_for(lambda: tokens(cluster, "hspice/cloud")[1:4] == (0, 0, 0), 5, "the return")


def test_recorded_run_with_borrowed_tokens_replays(tmp_path: Path) -> None:
    """Borrow, grant, license-bound jobs run, a return waits for them and completes:
    the simulator replays the live recording with zero divergence."""
    record = tmp_path / "rec.jsonl"
    with live_cluster(tmp_path, CONFIG, users=("alice",)) as live:
        live.add_token("provisioner", "prov")
        live.start_controller(record=record)
        live.lease("prov", "aws")
        live.start_agent("n1")
        first = live.submit(["sh", "-c", HOLD], res=VCS)
        second = live.submit(["sh", "-c", HOLD], res=VCS)
        pend_reason(live, first)
        step(live, "vcs", "borrow", 2)
        step(live, "vcs", "grant", 2)
        assert live.wait_state(first, "RUN") and live.wait_state(second, "RUN")
        step(live, "vcs", "return", 2)
        third = live.submit(["true"], res=VCS)
        still_pending(live, third)
        for job in (first, second):
            release(live, job)
        wait_for(lambda: tokens(live)[3] == 0 and ("vcs", "returned", 2) in token_steps(live),
                 10, "the return to complete")
        live.stop_controller(signal.SIGTERM)
    report = replay(record)
    assert report.divergence is None, str(report.divergence)
    assert report.sessions >= 5
