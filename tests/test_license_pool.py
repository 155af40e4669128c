"""`xce license-pool`, the real server as a subprocess, spoken to over HTTP: borrow,
renew, return (whole and in part), list; expiry of a lease nobody renews; refusal
when the pool is empty; bad input answered with a JSON error that changes nothing;
bearer authentication; leases kept across a restart with --state."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from licensepool import QUICK, XCE_POOL, PoolServer, pool_server
from live import wait_for

FEATURES = {"vcs": 4, "hspice": 2}


def snapshot(server: PoolServer) -> tuple[Any, Any]:
    """Everything the pool shows: its features and its leases."""
    return server.ok("GET", "/features"), server.ok("GET", "/leases")


def test_borrow_list_and_return(tmp_path: Path) -> None:
    with pool_server(tmp_path, FEATURES) as server:
        assert server.ok("GET", "/features") == {"features": [
            {"name": "hspice", "total": 2.0, "in_use": 0.0, "free": 2.0, "leases": 0},
            {"name": "vcs", "total": 4.0, "in_use": 0.0, "free": 4.0, "leases": 0},
        ]}
        before = time.time()
        answer = server.borrow("vcs", "lab/lic", 3)
        assert answer.status == 201, answer
        lease = answer.json
        assert lease["feature"] == "vcs" and lease["holder"] == "lab/lic"
        assert lease["amount"] == 3 and lease["ttl"] == 60
        assert before <= lease["granted"] == lease["renewed"] <= time.time()
        assert lease["expires"] == pytest.approx(lease["granted"] + 60)
        assert server.ok("GET", "/features/vcs") == {
            "name": "vcs", "total": 4.0, "in_use": 3.0, "free": 1.0, "leases": 1}
        assert server.features()["hspice"]["in_use"] == 0
        other = server.borrow("hspice", "other", 1).json
        assert server.leases("lab/lic") == [lease]
        assert server.ok("GET", "/leases?feature=hspice") == {"leases": [other]}
        assert server.ok("GET", "/leases?holder=lab/lic&feature=hspice") == {"leases": []}
        assert server.ok("GET", f"/leases/{lease['id']}") == lease

        returned = server.ok("POST", f"/leases/{lease['id']}/return")
        assert returned == {"id": lease["id"], "feature": "vcs", "holder": "lab/lic",
                            "returned": 3.0, "remaining": 0.0}
        assert server.features()["vcs"]["in_use"] == 0
        assert server.leases("lab/lic") == []
        gone = server.call("GET", f"/leases/{lease['id']}")
        assert gone.status == 404 and "no lease" in gone.json["error"]
        assert server.call("POST", f"/leases/{lease['id']}/return").status == 404


def test_partial_borrow_and_partial_return(tmp_path: Path) -> None:
    with pool_server(tmp_path, FEATURES) as server:
        big = server.borrow("vcs", "a", 3).json
        some = server.borrow("vcs", "b", 5, partial=True)
        assert some.status == 201 and some.json["amount"] == 1  # what was free
        assert server.features()["vcs"]["free"] == 0

        shrunk = server.ok("POST", f"/leases/{big['id']}/return", {"amount": 1})
        assert shrunk["returned"] == 1 and shrunk["remaining"] == 2
        lease = server.ok("GET", f"/leases/{big['id']}")
        assert lease["amount"] == 2 and lease["expires"] == big["expires"]  # not renewed
        assert server.features()["vcs"] == {"name": "vcs", "total": 4.0, "in_use": 3.0,
                                            "free": 1.0, "leases": 2}

        before = snapshot(server)
        too_much = server.call("POST", f"/leases/{big['id']}/return", {"amount": 2.5})
        assert too_much.status == 409, too_much
        assert too_much.json["error"] == f"cannot return 2.5 token(s): lease {big['id']} " \
                                         "holds 2 of vcs"
        assert snapshot(server) == before
        server.ok("POST", f"/leases/{big['id']}/return", {"amount": 2})
        assert server.features()["vcs"]["in_use"] == 1


def test_refusal_when_the_pool_is_empty_changes_nothing(tmp_path: Path) -> None:
    with pool_server(tmp_path, FEATURES) as server:
        server.borrow("vcs", "a", 3)
        not_enough = server.borrow("vcs", "b", 2)  # all or nothing without partial
        assert not_enough.status == 409
        assert not_enough.json == {
            "error": "cannot borrow 2 token(s) of vcs: 1 free (3 of 4 in use)", "status": 409}
        assert server.borrow("vcs", "b", 1).status == 201
        before = snapshot(server)
        for body in ({"holder": "c", "amount": 1}, {"holder": "c", "amount": 1, "partial": True}):
            empty = server.call("POST", "/features/vcs/borrow", body)
            assert empty.status == 409, empty
            assert empty.content_type == "application/json"
            assert empty.json["status"] == 409
            assert empty.json["error"] in (
                "cannot borrow 1 token(s) of vcs: 0 free (4 of 4 in use)",
                "no free token of vcs: 4 of 4 in use")
        assert snapshot(server) == before
        assert server.borrow("hspice", "c", 2).status == 201  # other features are apart


def test_renewal_keeps_a_lease_and_an_unrenewed_lease_expires(tmp_path: Path) -> None:
    with pool_server(tmp_path, FEATURES, lease_ttl=1) as server:
        kept = server.borrow("vcs", "a", 1).json
        dropped = server.borrow("vcs", "b", 2).json
        assert kept["ttl"] == dropped["ttl"] == 1
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # past the ttl, renewing one lease
            renewed = server.ok("POST", f"/leases/{kept['id']}/renew")
            assert renewed["expires"] == pytest.approx(renewed["renewed"] + 1)
            time.sleep(0.25)
        assert [lease["id"] for lease in server.leases()] == [kept["id"]]
        assert server.features()["vcs"]["in_use"] == 1  # the 2 tokens of b are free
        late = server.call("POST", f"/leases/{dropped['id']}/renew")
        assert late.status == 404 and "expired" in late.json["error"]

        longer = server.ok("POST", f"/leases/{kept['id']}/renew", {"ttl": 2})
        assert longer["ttl"] == 2 and longer["expires"] == pytest.approx(longer["renewed"] + 2)
        time.sleep(1.2)
        assert server.features()["vcs"]["in_use"] == 1  # a ttl of 2 now
        wait_for(lambda: server.features()["vcs"]["in_use"] == 0, 3, "the lease to expire")
        assert server.leases() == []
        assert "expired: 2 token(s) of vcs free again" in server.log.read_text()


BAD: list[tuple[str, str, bytes | None, int, str]] = [
    ("POST", "/features/vcs/borrow", b"not json", 400, "bad request body: JSON is malformed"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": 0}', 400,
     "bad request body: Expected `float` > 0.0 - at `$.amount`"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": -1}', 400, "> 0.0"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": "1"}', 400,
     "Expected `float`, got `str` - at `$.amount`"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": 1e999}', 400,
     "bad request body: Number out of range - at `$.amount`"),
    ("POST", "/features/vcs/borrow", b'{"amount": 1}', 400,
     "Object missing required field `holder`"),
    ("POST", "/features/vcs/borrow", b'{"holder": "", "amount": 1}', 400,
     "Expected `str` of length >= 1 - at `$.holder`"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": 1, "owner": "x"}', 400,
     "Object contains unknown field `owner`"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": 1, "ttl": 0}', 400,
     "Expected `float` > 0.0 - at `$.ttl`"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": 1, "ttl": 7200}', 400,
     "ttl must be above 0 and at most 3600 s, not 7200"),
    ("POST", "/features/vcs/borrow", b'{"holder": "a", "amount": 1, "partial": 1}', 400,
     "Expected `bool`"),
    ("POST", "/features/vcs/borrow", b"[]", 400, "Expected `object`, got `array`"),
    ("POST", "/features/matlab/borrow", b'{"holder": "a", "amount": 1}', 404,
     "unknown feature 'matlab' (features: hspice, vcs)"),
    ("GET", "/features/matlab", None, 404, "unknown feature 'matlab'"),
    ("GET", "/leases?feature=matlab", None, 404, "unknown feature 'matlab'"),
    ("GET", "/leases?owner=a", None, 400, "unknown query parameter 'owner'"),
    ("POST", "/leases/nosuch/renew", b"{}", 404, "no lease 'nosuch'"),
    ("POST", "/leases/nosuch/return", None, 404, "no lease 'nosuch'"),
    ("POST", "/leases/{id}/renew", b'{"ttl": -5}', 400, "Expected `float` > 0.0"),
    ("POST", "/leases/{id}/renew", b'{"ttl": 99999}', 400, "ttl must be above 0 and at most"),
    ("POST", "/leases/{id}/renew", b'{"id": "x"}', 400, "unknown field `id`"),
    ("POST", "/leases/{id}/return", b'{"amount": 0}', 400, "Expected `float` > 0.0"),
    ("POST", "/leases/{id}/return", b'{"amount": 3}', 409, "cannot return 3 token(s)"),
    ("POST", "/leases/{id}/return", b'{"amount": 1', 400, "bad request body"),
    ("DELETE", "/leases/{id}", None, 405, "Method Not Allowed"),
    ("GET", "/features/vcs/borrow", None, 405, "Method Not Allowed"),
    ("GET", "/nowhere", None, 404, "Not Found"),
    ("POST", "/features/vcs/borrow", b"{" + b" " * 70_000 + b"}", 413, "Request Entity Too Large"),
]


def test_bad_input_is_a_json_error_and_changes_nothing(tmp_path: Path) -> None:
    with pool_server(tmp_path, FEATURES) as server:
        lease = server.borrow("vcs", "a", 2).json
        before = snapshot(server)
        for method, path, raw, status, message in BAD:
            answer = server.call(method, path.replace("{id}", lease["id"]), raw=raw)
            where = f"{method} {path} {raw!r:.60}"
            assert answer.status == status, f"{where}: {answer!r}"
            assert answer.content_type == "application/json", where
            assert answer.json["status"] == status, where
            assert message in answer.json["error"], f"{where}: {answer.json['error']}"
            assert snapshot(server) == before, where


def test_a_token_file_makes_every_request_authenticate(tmp_path: Path) -> None:
    token = tmp_path / "pool.token"
    token.write_text("s3cret-pool-token\n")
    with pool_server(tmp_path, FEATURES, token_file=token) as server:
        assert server.borrow("vcs", "a", 1).status == 201  # with the token
        before = snapshot(server)
        for bearer in ("", "wrong"):
            for method, path, body in (("GET", "/features", None),
                                       ("POST", "/features/vcs/borrow",
                                        {"holder": "a", "amount": 1})):
                refused = server.call(method, path, body, token=bearer)
                assert refused.status == 401, refused
                assert refused.json["error"] in (
                    "authentication required: Authorization: Bearer <token>", "wrong token")
        assert snapshot(server) == before


def test_the_state_file_keeps_the_leases_across_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "pool-state.json"
    server = PoolServer(tmp_path, FEATURES, state=state, command=XCE_POOL)
    server.start()
    try:
        first = server.borrow("vcs", "lab/lic", 3).json
        server.ok("POST", f"/leases/{first['id']}/return", {"amount": 1})
        second = server.ok("POST", f"/leases/{server.borrow('hspice', 'x', 1).json['id']}"
                                   "/renew", {"ttl": 120})
        short = server.borrow("vcs", "y", 1, ttl=1).json
        kept = server.leases()
        assert json.loads(state.read_text())["leases"] == kept  # on disk at every change
        server.stop(signal.SIGKILL)  # a crash: nothing written on the way out
        time.sleep(1.2)  # the short lease runs out while the pool is down
        server.start()
        assert server.leases() == [lease for lease in kept if lease["id"] != short["id"]]
        assert server.ok("GET", f"/leases/{second['id']}")["ttl"] == 120
        assert server.features()["vcs"] == {"name": "vcs", "total": 4.0, "in_use": 2.0,
                                            "free": 2.0, "leases": 1}
        renewed = server.ok("POST", f"/leases/{first['id']}/renew")  # alive, renewable
        assert renewed["amount"] == 2
        assert server.borrow("vcs", "z", 3).status == 409  # 2 still in use
    finally:
        server.stop()


def test_command_line_errors(tmp_path: Path) -> None:
    def run(*args: str, command: list[str] = QUICK) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, "--listen", "127.0.0.1:0", *args],
                              capture_output=True, text=True, timeout=30)

    bad = run("--feature", "vcs=4", "--feature", "vcs=2", command=XCE_POOL)
    assert bad.returncode == 2 and "feature vcs is given twice" in bad.stderr
    state = tmp_path / "broken.json"
    state.write_text('{"leases": [{"id": 1}]}')
    broken = run("--feature", "vcs=four", "--state", str(state))
    assert broken.returncode == 2 and "vcs=four: expected NAME=TOTAL" in broken.stderr
    broken = run("--feature", "vcs=4", "--state", str(state))
    assert broken.returncode == 1
    assert f"{state}: not a license pool state file" in broken.stderr
