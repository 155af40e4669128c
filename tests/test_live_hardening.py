"""Hardening of the provisioning side, live (issue 8): a provisioner acts only for the
providers it holds the lease on, with the lease's current fencing token.

One controller for the module, with four providers: `alpha` (template asmall, the
countable vcs) leased by provisioner `pa`; `beta` (template bsmall, the countable lic)
leased by `pb`, whose host bsmall-1 joined for real (an agent with its join token) and
whose bsmall-2 is still expected; `gamma` and `delta` (templates gsmall, dsmall),
leased by `pb` for one second only, so that `pa` can take them over (rule 5, and the
log test). `pc` is a provisioner that holds no lease at all; `alice` a user.

One test per rule: each sends the refused requests, checks the HTTP status and the
exact error, and that nothing changed (hosts, requests, pools, catalog and leases read
before and after each one); then a positive control shows the right caller may do it.
The last tests check that every refusal is logged with the role, the name and the
reason, and that admins are not fenced.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from live import Answer, LiveCluster, live_cluster, skip_unless_linux, wait_for

from xce.model.api import FENCING_HEADER

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  vcs: {type: numeric, consumable: true, shared: true}
  lic: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 1}
shared:
  vcs: {total: 0}
  lic: {total: 0}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: asmall, provider: alpha, slots: 2, max: 8}
    - {name: bsmall, provider: beta, slots: 2, max: 8}
    - {name: gsmall, provider: gamma, slots: 2, max: 8}
    - {name: dsmall, provider: delta, slots: 2, max: 8}
  countables:
    - {resource: vcs, max_borrow: 4, idle_time: 60, provider: alpha}
    - {resource: lic, max_borrow: 4, idle_time: 60, provider: beta}
"""
# Agents that join by API only do not heartbeat: keep them from becoming unreach.
QUIET = ("--heartbeat-interval", "0.3", "--unreach-after", "60", "--requeue-after", "120")
PROVISIONERS = ("pa", "pb", "pc")

ALPHA = 2  # pa's token on alpha: taken, released, taken again
BETA = 1  # pb's token on beta
# What pa is told when it acts for beta with its own (alpha) token, or with none.
STALE_PA = f"stale fencing token {ALPHA} for provider beta (current {BETA}, held by pb)"
NOT_PA = "provider beta is leased to pb, not pa"
NOT_PC = "provider beta is leased to pb, not pc"


# ---------------------------------------------------------------- helpers
class World(NamedTuple):
    cluster: LiveCluster
    b_joined: str  # bsmall host that joined (request rb-1), its agent running
    b_expected: str  # bsmall host still expected (request rb-2)
    a_expected: str  # asmall host of pa's (request ra-1)
    g_expected: str  # gsmall host of pb's (request rg-1), lease of 1 s
    d_expected: str  # dsmall host of pb's (request rd-1), lease of 1 s


class Case(NamedTuple):
    """One request that must be refused, and the exact error (a prefix if `prefix`)."""

    who: str
    fence: int | None  # the X-XCE-Fencing-Token sent (None: no header)
    path: str
    body: Any
    status: int
    error: str
    prefix: bool = False

    def __str__(self) -> str:
        return f"{self.who} (fence {self.fence}) POST {self.path} {self.body}"


def call(cluster: LiveCluster, who: str, fence: int | None, path: str, body: Any = None,
         method: str = "POST") -> Answer:
    """One request as `who`, with the fencing token `fence` (None: no header)."""
    headers = {} if fence is None else {FENCING_HEADER: str(fence)}
    return cluster.api(method, path, body, who, headers=headers)


def made(answer: Answer) -> Any:
    assert 200 <= answer.status < 300, answer
    return answer.json


def keep_token(cluster: LiveCluster, key: str, token: str) -> None:
    path = cluster.root / f"join-{key}.token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    cluster.tokens[key] = path


def request(cluster: LiveCluster, who: str, fence: int | None, template: str, rid: str,
            count: int = 1) -> list[dict[str, Any]]:
    """POST /requests; the expected hosts made (their join tokens kept by name)."""
    body = {"template": template, "request": rid, "count": count, "deadline": 600}
    hosts: list[dict[str, Any]] = made(call(cluster, who, fence, "/requests", body))["hosts"]
    for host in hosts:
        keep_token(cluster, host["name"], host["join_token"])
    return hosts


def state(cluster: LiveCluster) -> dict[str, Any]:
    """Everything a refused request could have changed (heartbeat times aside)."""
    hosts = cluster.ok("GET", "/hosts")["hosts"]
    for host in hosts:
        host.pop("last_heartbeat", None)
    return {
        "hosts": hosts,
        "requests": cluster.ok("GET", "/requests?all=1")["requests"],
        "resources": cluster.ok("GET", "/resources")["resources"],
        "catalog": cluster.ok("GET", "/catalog"),
        "leases": cluster.ok("GET", "/leases")["leases"],
    }


def check(cluster: LiveCluster, case: Case) -> Answer:
    """Send `case`: refused with its status and error, and nothing changed."""
    before = state(cluster)
    answer = call(cluster, case.who, case.fence, case.path, case.body)
    assert answer.status == case.status, f"{case}: {answer!r}"
    assert answer.json is not None and answer.json["status"] == case.status, f"{case}: {answer!r}"
    error = answer.json["error"]
    if case.prefix:
        assert error.startswith(case.error), f"{case}: {error!r}"
    else:
        assert error == case.error, f"{case}: {error!r}"
    after = state(cluster)
    for key in before:
        assert after[key] == before[key], f"{case} changed {key}"
    return answer


def lease_of(cluster: LiveCluster, provider: str) -> dict[str, Any]:
    [lease] = [x for x in cluster.ok("GET", "/leases")["leases"] if x["provider"] == provider]
    return lease


def take_over(cluster: LiveCluster, provider: str) -> dict[str, Any]:
    """pb's short lease on `provider` expires; pa takes it (the token grows by one)."""
    def take() -> dict[str, Any] | None:
        answer = call(cluster, "pa", None, f"/leases/{provider}", {"ttl": 3600})
        return answer.json if answer.status == 200 else None

    return wait_for(take, 10, f"pb's lease on {provider} to expire")


def role(who: str) -> str:
    return "provisioner" if who in PROVISIONERS else "user"


def log_count(cluster: LiveCluster, line: str) -> int:
    return cluster.logs["controller"].read_text(errors="replace").count(line)


# ---------------------------------------------------------------- the cluster
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("hardening")
    with live_cluster(root, CONFIG, agents=(), users=("alice",)) as cluster:
        for name in PROVISIONERS:
            cluster.add_token("provisioner", name)
        cluster.start_controller(extra=QUIET)
        # The short leases first: they have expired by the time a test takes them over.
        for provider in ("gamma", "delta"):
            assert made(call(cluster, "pb", None, f"/leases/{provider}", {"ttl": 1}))[
                "token"] == 1
        [g] = request(cluster, "pb", 1, "gsmall", "rg-1")
        [d] = request(cluster, "pb", 1, "dsmall", "rd-1")

        # pa: alpha, token 2 (a release then a new lease: the token grows).
        assert made(call(cluster, "pa", None, "/leases/alpha", {"ttl": 3600}))["token"] == 1
        made(call(cluster, "pa", 1, "/leases/alpha/release", {"token": 1}))
        assert made(call(cluster, "pa", None, "/leases/alpha", {"ttl": 3600}))["token"] == ALPHA
        # pb: beta, token 1; one host joins for real, another stays expected.
        assert made(call(cluster, "pb", None, "/leases/beta", {"ttl": 3600}))["token"] == BETA
        [b1] = request(cluster, "pb", BETA, "bsmall", "rb-1")
        made(call(cluster, "pb", BETA, "/requests/rb-1/accepted",
                  {"instances": {b1["name"]: "i-b1"}}))
        cluster.start_agent(b1["name"], slots=1)
        [b2] = request(cluster, "pb", BETA, "bsmall", "rb-2")
        [a] = request(cluster, "pa", ALPHA, "asmall", "ra-1")

        joined = cluster.host(b1["name"])
        assert (joined["state"], joined["provider"], joined["request"]) == ("ok", "beta", "rb-1")
        yield World(cluster, b1["name"], b2["name"], a["name"], g["name"], d["name"])


# ---------------------------------------------------------------- the refusals of each rule
def rule1_cases(w: World) -> list[Case]:
    """Expected hosts of another provider's template; a provisioner without a lease."""
    bsmall = {"template": "bsmall", "deadline": 600}
    return [
        # pa, with its own valid alpha token, with beta's token guessed, with none
        Case("pa", ALPHA, "/requests", bsmall, 409, STALE_PA),
        Case("pa", ALPHA, "/hosts/expected", bsmall, 409, STALE_PA),
        Case("pa", BETA, "/requests", bsmall, 409, NOT_PA),
        Case("pa", BETA, "/hosts/expected", bsmall, 409, NOT_PA),
        Case("pa", None, "/requests", bsmall, 409, NOT_PA),
        Case("pa", None, "/hosts/expected", bsmall, 409, NOT_PA),
        Case("pa", ALPHA, "/requests", {**bsmall, "provider": "alpha"}, 403,
             "template bsmall belongs to provider beta, not alpha"),
        Case("pa", ALPHA, "/requests", {**bsmall, "count": 2}, 409, STALE_PA),
        # its own provider, but no token, or a stale one
        Case("pa", None, "/requests", {"template": "asmall"}, 409,
             "provider alpha is leased: send the fencing token (header X-XCE-Fencing-Token)"),
        Case("pa", 1, "/requests", {"template": "asmall"}, 409,
             "stale fencing token 1 for provider alpha (current 2, held by pa)"),
        # pc holds no lease at all
        Case("pc", None, "/requests", bsmall, 409, NOT_PC),
        Case("pc", None, "/hosts/expected", bsmall, 409, NOT_PC),
        Case("pc", BETA, "/requests", bsmall, 409, NOT_PC),
        Case("pc", ALPHA, "/requests", {"template": "asmall"}, 409,
             "provider alpha is leased to pa, not pc"),
    ]


def rule2_cases(w: World) -> list[Case]:
    """Resources pa does not serve: the pool lic (beta's), beta's template allowance."""
    one = {"amount": 1}
    return [
        *(Case("pa", ALPHA, f"/resources/lic/{step}", one, 409, STALE_PA)
          for step in ("borrow", "grant", "refuse", "return")),
        Case("pa", ALPHA, "/resources/lic/default/borrow", one, 409, STALE_PA),
        Case("pa", None, "/resources/lic/borrow", one, 409, NOT_PA),
        Case("pa", BETA, "/resources/lic/borrow", one, 409, NOT_PA),
        Case("pa", ALPHA, "/catalog", {"headroom": {"lic": 2}}, 409, STALE_PA),
        Case("pa", ALPHA, "/catalog", {"headroom": {"lic/default": 2}}, 409, STALE_PA),
        Case("pa", ALPHA, "/catalog", {"headroom": {"lic": None}}, 409, STALE_PA),
        Case("pa", ALPHA, "/catalog", {"allowance": {"bsmall": 0}}, 409, STALE_PA),
        Case("pa", None, "/catalog", {"allowance": {"bsmall": 0}}, 409, NOT_PA),
        # refused whole: its own part (asmall, vcs) is not applied either
        Case("pa", ALPHA, "/catalog",
             {"allowance": {"asmall": 1, "bsmall": 0}, "headroom": {"vcs": 1}}, 409, STALE_PA),
        Case("pa", ALPHA, "/catalog",
             {"allowance": {"asmall": 1}, "headroom": {"vcs": 1, "lic": 2}}, 409, STALE_PA),
        Case("pc", None, "/resources/lic/borrow", one, 409, NOT_PC),
        Case("pc", None, "/catalog", {"headroom": {"vcs": 1}}, 409,
             "provider alpha is leased to pa, not pc"),
    ]


def rule3_cases(w: World) -> list[Case]:
    """Hosts and records beta made: pa may neither change nor report on them."""
    b1, b2 = w.b_joined, w.b_expected
    return [
        *(Case("pa", ALPHA, f"/hosts/{b1}/{action}", None, 409, STALE_PA)
          for action in ("close", "close?reason=idle", "open", "decommission", "remove",
                         "reclaimed")),
        Case("pa", None, f"/hosts/{b1}/close", None, 409, NOT_PA),
        Case("pa", BETA, f"/hosts/{b1}/reclaimed", None, 409, NOT_PA),
        Case("pa", ALPHA, f"/hosts/{b2}/remove", None, 409, STALE_PA),  # cancel
        Case("pa", ALPHA, "/requests/rb-1/accepted", {"instances": {b1: "i-evil"}}, 409,
             STALE_PA),
        Case("pa", ALPHA, "/requests/rb-2/accepted", {"instances": {b2: "i-evil"}}, 409,
             STALE_PA),
        Case("pa", ALPHA, "/requests/rb-2/refused", {"reason": "not yours"}, 409, STALE_PA),
        Case("pa", ALPHA, "/requests/rb-1/refused", {"reason": "not yours"}, 409, STALE_PA),
        Case("pa", ALPHA, f"/instances/{b1}/vanished", {"reason": "not yours"}, 409, STALE_PA),
        Case("pa", ALPHA, f"/instances/{b2}/vanished", {}, 409, STALE_PA),
        Case("pc", None, f"/hosts/{b1}/decommission", None, 409, NOT_PC),
        Case("pc", None, f"/hosts/{b2}/remove", None, 409, NOT_PC),
        Case("pc", None, f"/instances/{b1}/vanished", {}, 409, NOT_PC),
    ]


def rule4_cases(w: World) -> list[Case]:
    """beta's lease: neither renewed (taken) nor released by anyone but pb."""
    return [
        Case("pa", ALPHA, "/leases/beta", {"ttl": 3600}, 409,
             "provider beta is leased to pb for ", prefix=True),
        Case("pa", None, "/leases/beta", {"ttl": 1}, 409,
             "provider beta is leased to pb for ", prefix=True),
        Case("pc", None, "/leases/beta", {"ttl": 3600}, 409,
             "provider beta is leased to pb for ", prefix=True),
        Case("pa", BETA, "/leases/beta/release", {"token": BETA}, 409, NOT_PA),
        Case("pa", None, "/leases/beta/release", {"token": BETA}, 409, NOT_PA),
        Case("pa", ALPHA, "/leases/beta/release", {"token": ALPHA}, 409, STALE_PA),
        Case("pc", BETA, "/leases/beta/release", {"token": BETA}, 409, NOT_PC),
        Case("alice", None, "/leases/beta", {"ttl": 3600}, 403,
             "role user may not POST /leases/beta"),
        Case("alice", None, "/leases/beta/release", {"token": BETA}, 403,
             "role user may not POST /leases/beta/release"),
    ]


def stale_cases(provider: str, template: str, rid: str, host: str) -> list[Case]:
    """pb after pa took `provider` over (token 2): its old token 1 is refused."""
    stale = f"stale fencing token 1 for provider {provider} (current 2, held by pa)"
    not_pb = f"provider {provider} is leased to pa, not pb"
    return [
        Case("pb", 1, "/requests", {"template": template}, 409, stale),
        Case("pb", 1, "/hosts/expected", {"template": template}, 409, stale),
        Case("pb", 1, f"/hosts/{host}/remove", None, 409, stale),
        Case("pb", 1, f"/requests/{rid}/accepted", {"instances": {host: "i-old"}}, 409, stale),
        Case("pb", 1, f"/requests/{rid}/refused", {"reason": "old"}, 409, stale),
        Case("pb", 1, f"/instances/{host}/vanished", {}, 409, stale),
        Case("pb", 1, f"/leases/{provider}/release", {"token": 1}, 409, stale),
        Case("pb", 1, f"/leases/{provider}", {"ttl": 3600}, 409,
             f"provider {provider} is leased to pa for ", prefix=True),
        Case("pb", None, f"/hosts/{host}/remove", None, 409, not_pb),
        Case("pb", 2, f"/hosts/{host}/remove", None, 409, not_pb),  # the new token, guessed
        Case("pb", 2, f"/leases/{provider}/release", {"token": 2}, 409, not_pb),
    ]


# ---------------------------------------------------------------- rule 1
def test_expected_hosts_only_of_a_provider_it_holds(world: World) -> None:
    cluster = world.cluster
    for case in rule1_cases(world):
        check(cluster, case)
    assert [r["request"] for r in cluster.ok("GET", "/requests?all=1&provider=beta")[
        "requests"]] == ["rb-1", "rb-2"]

    # Positive control: pa adds (and cancels) an expected host of its own template.
    [host] = request(cluster, "pa", ALPHA, "asmall", "ra-control")
    assert (host["template"], host["provider"]) == ("asmall", "alpha")
    made(call(cluster, "pa", ALPHA, f"/hosts/{host['name']}/remove"))
    assert host["name"] not in cluster.hosts()


# ---------------------------------------------------------------- rule 2
def test_resources_only_of_a_provider_it_holds(world: World) -> None:
    cluster = world.cluster
    for case in rule2_cases(world):
        check(cluster, case)
    lic = [p for p in cluster.ok("GET", "/resources")["resources"] if p["pool"] == "lic"]
    assert [(p["in_flight"], p["borrowed"], p["returning"]) for p in lic] == [(0, 0, 0)]

    # Positive control: pa changes vcs (alpha's) and asmall's allowance.
    pool = made(call(cluster, "pa", ALPHA, "/resources/vcs/borrow", {"amount": 1}))
    assert (pool["pool"], pool["in_flight"]) == ("vcs", 1)
    pool = made(call(cluster, "pa", ALPHA, "/resources/vcs/refuse", {"amount": 1}))
    assert pool["in_flight"] == 0
    shown = made(call(cluster, "pa", ALPHA, "/catalog",
                      {"allowance": {"asmall": 1}, "headroom": {"vcs": 2}}))
    assert {t["name"]: t["allowance"] for t in shown["templates"]}["asmall"] == 1
    assert {c["pool"]: c["runtime_headroom"] for c in shown["countables"]}["vcs"] == 2
    shown = made(call(cluster, "pa", ALPHA, "/catalog",
                      {"allowance": {"asmall": None}, "headroom": {"vcs": None}}))
    assert {t["name"]: t["allowance"] for t in shown["templates"]}["asmall"] is None


# ---------------------------------------------------------------- rule 3
def test_hosts_and_records_only_of_a_provider_it_holds(world: World) -> None:
    cluster = world.cluster
    for case in rule3_cases(world):
        check(cluster, case)
    joined = cluster.host(world.b_joined)
    assert (joined["state"], joined["provider"]) == ("ok", "beta")
    assert cluster.host(world.b_expected)["state"] == "expected"

    # A closed host of beta's: pa may not open it either; pb (its provider) may.
    closed = made(call(cluster, "pb", BETA, f"/hosts/{world.b_joined}/close"))
    assert closed["state"] == "closed"
    check(cluster, Case("pa", ALPHA, f"/hosts/{world.b_joined}/open", None, 409, STALE_PA))
    check(cluster, Case("pc", None, f"/hosts/{world.b_joined}/open", None, 409, NOT_PC))
    assert made(call(cluster, "pb", BETA, f"/hosts/{world.b_joined}/open"))["state"] == "ok"

    # Positive control: pa reports on its own request.
    accepted = made(call(cluster, "pa", ALPHA, "/requests/ra-1/accepted",
                         {"instances": {world.a_expected: "i-a1"}}))
    assert [i["instance_id"] for i in accepted["instances"]] == ["i-a1"]


# ---------------------------------------------------------------- rule 4
def test_leases_are_renewed_and_released_only_by_their_holder(world: World) -> None:
    cluster = world.cluster
    before = lease_of(cluster, "beta")
    assert (before["holder"], before["token"], before["released"]) == ("pb", BETA, False)
    for case in rule4_cases(world):
        check(cluster, case)
    assert lease_of(cluster, "beta") == before  # holder, token, expiry, not released
    assert lease_of(cluster, "alpha")["token"] == ALPHA

    # Positive control: pb renews its lease: same token, a later expiry.
    time.sleep(0.01)
    renewed = made(call(cluster, "pb", BETA, "/leases/beta", {"ttl": 3600}))
    assert (renewed["holder"], renewed["token"]) == ("pb", BETA)
    assert renewed["expires"] > before["expires"]


# ---------------------------------------------------------------- rule 5
def test_a_stale_token_after_a_takeover_is_refused(world: World) -> None:
    cluster = world.cluster
    host = world.g_expected
    # pb's one-second lease on gamma has expired: its token no longer acts, even
    # before another instance takes the lease.
    wait_for(lambda: lease_of(cluster, "gamma")["expires"] < time.time(), 5,
             "pb's lease on gamma to expire")
    check(cluster, Case("pb", 1, f"/hosts/{host}/remove", None, 409,
                        "the lease on provider gamma has expired or was released: "
                        "take it again"))
    check(cluster, Case("pb", 1, "/requests", {"template": "gsmall"}, 409,
                        "the lease on provider gamma has expired or was released: "
                        "take it again"))

    taken = take_over(cluster, "gamma")
    assert (taken["holder"], taken["token"]) == ("pa", 2)
    for case in stale_cases("gamma", "gsmall", "rg-1", host):
        check(cluster, case)
    assert lease_of(cluster, "gamma") == taken
    assert cluster.host(host)["state"] == "expected"

    # Positive control: the new holder acts with the new token (and not the old one).
    check(cluster, Case("pa", 1, f"/hosts/{host}/remove", None, 409,
                        "stale fencing token 1 for provider gamma (current 2, held by pa)"))
    made(call(cluster, "pa", 2, f"/hosts/{host}/remove"))
    assert host not in cluster.hosts()


# ---------------------------------------------------------------- rule 6
def test_every_refusal_is_logged_with_who_and_why(world: World) -> None:
    """Every refusal above, sent again (on delta for the takeover): each adds exactly
    one `refused ROLE NAME: REASON` line to the controller's log."""
    cluster = world.cluster
    take_over(cluster, "delta")
    cases = [*rule1_cases(world), *rule2_cases(world), *rule3_cases(world),
             *rule4_cases(world), *stale_cases("delta", "dsmall", "rd-1", world.d_expected)]
    missing = []
    for case in cases:
        line = f"refused {role(case.who)} {case.who}: {case.error}"  # or its prefix
        count = log_count(cluster, line)
        answer = check(cluster, case)
        if log_count(cluster, line) != count + 1:
            missing.append(f"{case} -> {answer.status} {answer.json['error']!r}")
    assert not missing, "refusals not logged as `refused ROLE NAME: REASON`:\n" + "\n".join(
        missing)


# ---------------------------------------------------------------- admins
def test_admins_are_not_fenced(world: World) -> None:
    """An admin, with no lease and no fencing token, does for beta what pa may not."""
    cluster = world.cluster
    leases = cluster.ok("GET", "/leases")["leases"]
    # Hosts of beta's template; one joins (through the API, with its join token).
    x, y = request(cluster, "admin", None, "bsmall", "adm-1", count=2)
    [z] = request(cluster, "admin", None, "bsmall", "adm-2")
    [v] = request(cluster, "admin", None, "bsmall", "adm-3")
    made(call(cluster, "admin", None, "/requests/adm-1/accepted",
              {"instances": {x["name"]: "i-x", y["name"]: "i-y"}}))
    made(call(cluster, "admin", None, "/requests/adm-2/accepted",
              {"instances": {z["name"]: "i-z"}}))
    for host in (x, y):
        made(cluster.api("POST", f"/agents/{host['name']}/register",
                         {"slots": 1, "running": []}, host["name"]))
    # Close, open, close, decommission, remove; reclaimed; vanished; refused.
    for action, after in (("close", "closed"), ("open", "ok"), ("close?reason=idle", "closed"),
                          ("decommission", "decommissioned")):
        shown = made(call(cluster, "admin", None, f"/hosts/{x['name']}/{action}"))
        assert shown["state"] == after, action
    made(call(cluster, "admin", None, f"/hosts/{x['name']}/remove"))
    assert x["name"] not in cluster.hosts()
    assert made(call(cluster, "admin", None, f"/hosts/{y['name']}/reclaimed"))["state"] == "lost"
    made(call(cluster, "admin", None, f"/instances/{z['name']}/vanished", {"reason": "gone"}))
    assert cluster.host(z["name"])["state"] == "failed"
    refused = made(call(cluster, "admin", None, "/requests/adm-3/refused", {"reason": "no"}))
    assert refused["state"] == "failed"
    assert v["name"] not in cluster.hosts()

    # A host pb's provider made: the admin closes and opens it.
    b1 = world.b_joined
    assert made(call(cluster, "admin", None, f"/hosts/{b1}/close"))["state"] == "closed"
    assert made(call(cluster, "admin", None, f"/hosts/{b1}/open"))["state"] == "ok"

    # beta's pool and template.
    def lic() -> tuple[float, float, float]:
        [pool] = [p for p in cluster.ok("GET", "/resources")["resources"] if p["pool"] == "lic"]
        return pool["in_flight"], pool["borrowed"], pool["returning"]

    in_flight, borrowed, returning = lic()
    made(call(cluster, "admin", None, "/resources/lic/borrow", {"amount": 1}))
    assert lic() == (in_flight + 1, borrowed, returning)
    made(call(cluster, "admin", None, "/resources/lic/grant", {"amount": 1}))
    assert lic() == (in_flight, borrowed + 1, returning)
    made(call(cluster, "admin", None, "/resources/lic/return", {"amount": 1}))
    wait_for(lambda: lic() == (in_flight, borrowed, returning), 5,
             "the return of lic to complete")
    shown = made(call(cluster, "admin", None, "/catalog",
                      {"allowance": {"bsmall": 0}, "headroom": {"lic": 2}}))
    assert {t["name"]: t["allowance"] for t in shown["templates"]}["bsmall"] == 0
    assert {c["pool"]: c["runtime_headroom"] for c in shown["countables"]}["lic"] == 2
    shown = made(call(cluster, "admin", None, "/catalog",
                      {"allowance": {"bsmall": None}, "headroom": {"lic": None}}))
    assert {t["name"]: t["allowance"] for t in shown["templates"]}["bsmall"] is None

    # None of it touched the leases.
    assert cluster.ok("GET", "/leases")["leases"] == leases
