"""License-bound jobs, live, end to end: a real controller, a real agent, a real
`xce license-pool` and a real `xce provisioner run --providers FILE` whose providers
file has the `license` provider. Jobs needing a `vcs` token pend while the pool has
none free (the provisioner asks, the pool refuses); when tokens free up at the pool the
provisioner borrows them and the jobs run; once the borrowed tokens have been idle for
the countable's idle_time they go back to the pool, which then shows none in use.

The countable names its lender (`provider: lic`): the provisioner takes that
provider's lease and acts for the pool under it.
"""

from __future__ import annotations

from pathlib import Path

from licensepool import XCE_POOL, pool_server
from live import FAST, live_cluster, skip_unless_linux, wait_for

pytestmark = skip_unless_linux

CONFIG = """\
cluster: lab
session_interval: 0.2
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 4}
shared:
  vcs: {total: 0}
queues:
  - {name: normal, priority: 30}
catalog:
  countables:
    - {resource: vcs, max_borrow: 4, idle_time: 2, provider: lic}
policy:
  persistence: 0.5
  max_lifetime: 0
"""
HOLDER = "lab/lic"  # the cluster's name / the provider's name


def test_license_bound_jobs_get_tokens_from_the_pool_and_give_them_back(
        tmp_path: Path) -> None:
    with pool_server(tmp_path, {"vcs": 4}, command=XCE_POOL) as pool, \
            live_cluster(tmp_path, CONFIG, agents=("n1",)) as cluster:
        other = pool.borrow("vcs", "another-site", 4).json  # the pool is empty at first
        conf = tmp_path / "conf" / "lic"
        conf.mkdir(parents=True)
        (conf / "license.yaml").write_text(
            f"url: {pool.url}\nlease_ttl: 30\npools:\n  vcs: vcs\n")
        providers = tmp_path / "providers.json"
        providers.write_text('{"providers": [{"name": "lic", "type": "license", '
                             '"confPath": "conf/lic"}]}')
        work = tmp_path / "work"
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=FAST)
        cluster.start_agent("n1", slots=4)
        provisioner = cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(work), "--providers", str(providers),
            "--name", "prov-a", "--interval", "0.3",
        ])
        jobs = [cluster.submit(["sleep", "1"], res="rusage[vcs=1]") for _ in range(3)]

        # The pool has nothing free: asked, refused; the jobs pend.
        wait_for(lambda: "RequestTokens 3 vcs" in cluster.log_tail("provisioner", 10_000)
                 and "granted 0 of 3" in cluster.log_tail("provisioner", 10_000), 20,
                 "the provisioner to be refused by the pool")
        # Between a refusal and the provisioner's next catalog sync the runtime headroom
        # is what the borrow left (docs/elastic.md), and a session then may show jobs
        # beyond it as plainly short: wait for the sync.
        wait_for(lambda: all(cluster.job(job)["pend_reason"].startswith(
            "Short 1 of vcs; waiting for provisioning") for job in jobs), 10,
            "every job to wait for provisioning")
        assert all(cluster.job(job)["state"] == "PEND" for job in jobs)
        assert pool.leases(HOLDER) == []

        # Tokens free up at the pool: borrowed, granted, the jobs run.
        pool.ok("POST", f"/leases/{other['id']}/return")
        wait_for(lambda: pool.leases(HOLDER), 15, "the cluster to borrow from the pool")
        for job in jobs:
            done = cluster.wait_state(job, "DONE", timeout=30)
            assert done["state"] == "DONE" and list(done["exec_hosts"]) == ["n1"], done
        borrowed = sum(float(line.split("granted ")[1].split(" of")[0])
                       for line in cluster.log_tail("provisioner", 10_000).splitlines()
                       if "RequestTokens" in line and "granted" in line)
        assert borrowed == 3  # exactly what the jobs needed, in one or more leases
        assert "to lab/lic" in pool.log.read_text()

        # Idle for the countable's idle_time: returned to the controller and the pool.
        wait_for(lambda: pool.features()["vcs"]["in_use"] == 0, 30,
                 "the tokens to go back to the pool")
        assert pool.features()["vcs"] == {"name": "vcs", "total": 4.0, "in_use": 0.0,
                                          "free": 4.0, "leases": 0}
        wait_for(lambda: cluster.ok("GET", "/resources")["resources"][0]["borrowed"] == 0,
                 10, "the controller's borrowed tokens to be 0")
        log = cluster.log_tail("provisioner", 10_000)
        assert "ReturnTokens" in log and "round failed" not in log, log
        assert provisioner.poll() is None, "the provisioner stopped"
