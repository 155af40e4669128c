"""Metrics, live (issue 22): the controller, a provisioner instance and the license
pool serve `GET /metrics`, read here with prometheus_client's own parser and checked
against their APIs: jobs per state equal what `GET /jobs` lists, demand what
`GET /demand` says, each provider request's outcome is counted once, each join and
each release once. Scraping needs a metrics (or admin) token, or the separate
`--metrics-listen` address, which needs none; a metrics token reads nothing else."""

from __future__ import annotations

import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from licensepool import pool_server
from live import FAST, LiveCluster, free_port, live_cluster, skip_unless_linux, wait_for
from prometheus_client.parser import text_string_to_metric_families

pytestmark = skip_unless_linux

CONFIG = """\
cluster: metrics
session_interval: 0.2
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 1}
shared:
  vcs: {total: 0}
queues:
  - {name: normal, priority: 30}
  - {name: short, priority: 40}
catalog:
  idle_time: 2
  templates:
    - {name: loc, provider: local, slots: 2, max: 3, rank: 1, price: 0.5}
  countables:
    - {resource: vcs, max_borrow: 2, idle_time: 2}
policy:
  persistence: 0.5
  max_lifetime: 0
"""
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def parse(text: str) -> Samples:
    """Every sample of an exposition: (name, labels) -> value."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value (0 when absent: a series not made yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)


def scrape(url: str) -> Samples:
    with _opener.open(url, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        return parse(answer.read().decode())


def api_scrape(cluster: LiveCluster, who: str = "scraper") -> Samples:
    answer = cluster.api("GET", "/metrics", who=who)
    assert answer.status == 200, answer
    return parse(answer.raw.decode())


def job_states(cluster: LiveCluster) -> Counter[tuple[str, str]]:
    return Counter((j["state"].lower(), j["queue"]) for j in cluster.jobs())


def jobs_metric(samples: Samples) -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for (name, labels), count in samples.items():
        if name == "xce_jobs" and count:
            shown = dict(labels)
            found[(shown["state"], shown["queue"])] = int(count)
    return found


def settled(cluster: LiveCluster) -> dict[str, Any]:
    """GET /demand of a session that started after everything so far."""
    first = int(cluster.ok("GET", "/demand")["session"])
    answer: dict[str, Any] = wait_for(
        lambda: (a := cluster.ok("GET", "/demand"))["session"] >= first + 2 and a,
        10, "two more sessions")
    return answer


def test_controller_and_provisioner_metrics_match_their_apis(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=("n1",), users=("alice",)) as cluster:
        cluster.add_token("provisioner", "prov")
        cluster.add_token("metrics", "scraper")
        port = free_port()
        cluster.start_controller(extra=(*FAST, "--metrics-listen", f"127.0.0.1:{port}"))
        metrics_url = (cluster.state / "metrics.url").read_text().strip()
        assert metrics_url == f"http://127.0.0.1:{port}/metrics"
        cluster.start_agent("n1", slots=1)

        # Who may scrape: a metrics or admin token, anyone on --metrics-listen.
        bare = cluster.api("GET", "/metrics", who=None)
        assert bare.status == 401 and bare.json == {
            "error": "authentication required: Authorization: Bearer <token>", "status": 401}
        assert cluster.api("GET", "/metrics", who="alice").status == 403
        assert cluster.api("GET", "/metrics", who="prov").status == 403
        assert cluster.api("GET", "/metrics", who="admin").status == 200
        refused = cluster.api("GET", "/jobs", who="scraper")
        assert refused.status == 403 and "role metrics may not GET /jobs" in refused.json["error"]
        assert cluster.api("POST", "/jobs", {"command": ["true"]}, who="scraper").status == 403
        assert cluster.api("GET", "/hosts", who="scraper").status == 403
        first = api_scrape(cluster)
        assert value(first, "xce_build_info", version="0.1.0", daemon="controller") == 1
        assert value(first, "xce_api_requests_total", route="/jobs", status="403") == 2
        assert value(first, "xce_api_requests_total", route="/metrics", status="401") == 1

        # Jobs waiting: one held, two too big for n1 (demand for loc), one licensed.
        held = cluster.submit(["sleep", "30"], hold=True, queue="short")
        big = [cluster.submit(["sleep", "0.5"], n=2) for _ in range(2)]
        licensed = cluster.submit(["sleep", "0.5"], res="rusage[vcs=1]")
        demand = settled(cluster)
        samples = scrape(metrics_url)
        assert jobs_metric(samples) == job_states(cluster)
        pend = [j for j in cluster.jobs() if j["state"] == "PEND"]
        assert value(samples, "xce_jobs", state="pend", queue="normal") == len(pend) == 3
        assert value(samples, "xce_jobs", state="psusp", queue="short") == 1
        wanted = {h["template"]: h["count"] for h in demand["demand"]["hosts"]}
        assert wanted == {"loc": 2}  # (a 2-slot host per 2-slot job)
        assert value(samples, "xce_demand_hosts", template="loc") == wanted["loc"]
        [tokens] = demand["demand"]["resources"]
        assert value(samples, "xce_demand_tokens", resource="vcs") == tokens["amount"] == 1
        assert value(samples, "xce_session_last_timestamp_seconds") >= demand["time"]
        assert value(samples, "xce_pending_jobs", reason_kind="provisioning") >= 2
        assert value(samples, "xce_slots", state="free") == 1
        assert value(samples, "xce_hosts", state="ok", template="") == 1
        assert total(samples, "xce_session_duration_seconds_count", phase="session") >= 2
        assert value(samples, "xce_store_append_seconds_count") >= 4

        # The provisioner obtains the supply, and gives it back once idle.
        prov_port = free_port()
        work = tmp_path / "provider"
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(work), "--pool", "vcs=2", "--name", "prov-a", "--interval", "0.3",
            "--metrics-listen", f"127.0.0.1:{prov_port}",
        ])
        prov_url = f"http://127.0.0.1:{prov_port}/metrics"
        for job in [*big, licensed]:
            assert cluster.wait_state(job, "DONE", timeout=40)["state"] == "DONE"
        leased = wait_for(lambda: value(scrape(prov_url), "xce_lease_held", provider="local",
                                        holder="prov-a") == 1, 10, "the lease")
        assert leased
        ctl = scrape(metrics_url)
        assert value(ctl, "xce_lease_held", provider="local", holder="prov") == 1
        assert value(ctl, "xce_cost_per_hour", template="loc") == 0.5 * sum(
            1 for h in cluster.hosts().values()
            if h.get("template") == "loc" and h["state"] in ("ok", "closed", "unreach"))
        wait_for(lambda: not any(h.startswith("loc-") for h in cluster.hosts()), 40,
                 "the provisioned hosts to go away")
        wait_for(lambda: cluster.ok("GET", "/resources")["resources"][0]["borrowed"] == 0, 20,
                 "the borrowed tokens to be returned")
        requests = cluster.ok("GET", "/requests?all=1")["requests"]
        instances = [i for r in requests for i in r["instances"]]
        assert requests and all(r["state"] == "returned" for r in requests), requests
        ctl = scrape(metrics_url)
        prov = scrape(prov_url)
        for shown in (ctl, prov):
            assert value(shown, "xce_provider_requests_total", provider="local",
                         template="loc", outcome="accepted") == len(requests)
            assert total(shown, "xce_provider_requests_total", outcome="refused") == 0
            assert value(shown, "xce_provider_join_seconds_count", provider="local",
                         template="loc") == len(instances)
            assert value(shown, "xce_supply_in_flight", template="loc") == 0
        assert value(prov, "xce_build_info", version="0.1.0", daemon="provisioner") == 1
        assert value(ctl, "xce_hosts_released_total", template="loc",
                     cause="idle") == len(instances)
        assert total(ctl, "xce_hosts", template="loc") == 0
        assert value(ctl, "xce_tokens_borrowed", resource="vcs") == 0
        assert value(ctl, "xce_cost_per_hour", template="loc") == 0
        assert jobs_metric(ctl) == job_states(cluster)
        assert value(ctl, "xce_jobs", state="done", queue="normal") == 3

        # Counters restart at 0 with the process; the gauges are rebuilt from the log.
        cluster.stop_controller()
        cluster.start_controller(extra=(*FAST, "--metrics-listen", f"127.0.0.1:{port}"))
        again = scrape(metrics_url)
        assert total(again, "xce_provider_requests_total") == 0
        assert jobs_metric(again) == job_states(cluster)
        assert value(again, "xce_jobs", state="psusp", queue="short") == 1
        cluster.ok("POST", f"/jobs/{held}/kill")


def test_the_license_pool_serves_its_tokens_under_its_own_token(tmp_path: Path) -> None:
    secret = tmp_path / "pool.token"
    secret.write_text("s3cret\n")
    with pool_server(tmp_path, {"vcs": 4, "hspice": 2}, token_file=secret) as pool:
        assert pool.call("GET", "/metrics", token="wrong").status == 401
        lease = pool.borrow("vcs", "prov-a", 3)
        assert lease.status == 201, lease
        answer = pool.call("GET", "/metrics")
        assert answer.status == 200, answer
        samples = parse(answer.raw.decode())
        for name, feature in pool.features().items():
            for state in ("total", "in_use", "free"):
                assert value(samples, "xce_license_tokens", pool=name,
                             state=state) == feature[state]
            assert value(samples, "xce_license_leases", pool=name) == feature["leases"]
        assert value(samples, "xce_license_tokens", pool="vcs", state="in_use") == 3
        assert value(samples, "xce_build_info", version="0.1.0", daemon="license-pool") == 1
