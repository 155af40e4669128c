"""Provider leases live: two provisioner instances, one provider. The holder's changes
carry its fencing token; another instance is refused until the lease expires, then
takes over with a larger token, and the old holder's token is refused with nothing
changed. Leases survive a kill -9 of the controller."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from live import FAST, LiveCluster, live_cluster, skip_unless_linux, wait_for

from xce.model.api import FENCING_HEADER

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
hosts:
  - {name: n1, slots: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: cloud, provider: aws, slots: 2, max: 4}
"""


def fenced(cluster: LiveCluster, who: str, token: int | None, path: str,
           body: Any = None) -> Any:
    headers = {} if token is None else {FENCING_HEADER: str(token)}
    return cluster.api("POST", path, body, who, headers=headers)


def expected_hosts(cluster: LiveCluster) -> list[str]:
    return [h["name"] for h in cluster.ok("GET", "/hosts")["hosts"] if h["state"] == "expected"]


def test_leases_fence_provisioner_changes(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        cluster.add_token("provisioner", "pa")
        cluster.add_token("provisioner", "pb")
        cluster.add_token("user", "alice")
        listen = cluster.start_controller()
        host = {"template": "cloud", "deadline": 600}
        # Never leased: nobody may act for it.
        never = fenced(cluster, "pb", None, "/hosts/expected", host)
        assert never.status == 409 and "aws is not leased" in never.json["error"], never

        lease = cluster.ok("POST", "/leases/aws", {"ttl": 2}, "pa")
        assert (lease["provider"], lease["holder"], lease["token"]) == ("aws", "pa", 1)
        refused = cluster.api("POST", "/leases/aws", {"ttl": 2}, "pb")
        assert refused.status == 409 and "leased to pa" in refused.json["error"], refused
        assert cluster.api("POST", "/leases/nosuch", {"ttl": 2}, "pa").status == 404
        assert cluster.api("POST", "/leases/aws", {"ttl": 2}, "alice").status == 403

        before = expected_hosts(cluster)
        for who, token, words in [("pa", None, "send the fencing token"),
                                  ("pa", 0, "stale fencing token 0"),
                                  ("pb", 1, "leased to pa, not pb")]:
            answer = fenced(cluster, who, token, "/hosts/expected", host)
            assert answer.status == 409 and words in answer.json["error"], answer
        assert expected_hosts(cluster) == before  # refused: nothing changed
        made = fenced(cluster, "pa", 1, "/hosts/expected", host)
        assert made.status == 201, made
        assert fenced(cluster, "pa", 1, f"/hosts/{made.json['name']}/remove").status == 200

        # The controller is killed -9: the lease survives (durable fact).
        cluster.stop_controller(signal.SIGKILL)
        cluster.start_controller(listen.removeprefix("http://"), extra=FAST)
        [kept] = cluster.ok("GET", "/leases")["leases"]
        assert (kept["holder"], kept["token"]) == ("pa", 1)

        # pa stops renewing: once its lease expires, pb takes over with token 2.
        taken = wait_for(lambda: (a := cluster.api("POST", "/leases/aws", {"ttl": 30}, "pb"))
                         .status == 200 and a.json, 10, "the lease to expire")
        assert (taken["holder"], taken["token"]) == ("pb", 2)
        before = expected_hosts(cluster)
        stale = fenced(cluster, "pa", 1, "/hosts/expected", host)
        assert stale.status == 409 and "stale fencing token 1" in stale.json["error"], stale
        assert expected_hosts(cluster) == before
        assert fenced(cluster, "pb", 2, "/hosts/expected", host).status == 201
        assert "refused provisioner pa" in cluster.log_tail("controller", 100_000)

        released = cluster.api("POST", "/leases/aws/release", {"token": 2}, "pb",
                               headers={FENCING_HEADER: "2"})
        assert released.status == 200 and released.json["released"] is True, released
        again = cluster.ok("POST", "/leases/aws", {"ttl": 30}, "pa")
        assert (again["holder"], again["token"]) == ("pa", 3)
