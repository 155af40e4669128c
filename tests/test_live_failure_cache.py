"""Acceptance of issue 19, part 1 ("the core's surface"), live: a provisioner renewing
its lease every round does not void the scheduler's cross-session failure cache.

A real `xce controller` holds 10,000 pending jobs in 16 shapes that nothing can run
(no host or template has `gpu`, none is a SPARC, the one open host has too few slots
for the widest and the template is of another type), and a real `xce provisioner`
(local provider) renews its lease on `local` every 0.1 s while sessions run every
0.2 s. Every renewal is a durable fact; none reaches the scheduler state. So every
session after the first reuses each bucket's failure, exactly as the simulator's core
does on the same events: the failure-cache hits the controller reports
(`GET /demand`, `failure_cache_hits`) equal those of `run_session` run as many times
on a SchedulerState built from the same events. (Before, each renewal bumped
`capacity_version` and the live scheduler re-evaluated every bucket every round,
which the simulator never sees.)

The jobs are written to the log before the controller starts (as bench/bench_controller.py
does: 10,000 API submissions would take most of a minute); the controller recovers
them, and the static hosts stay as the log says (no agents; unreach never declared).
"""

from __future__ import annotations

import signal
import time
from itertools import cycle, islice
from pathlib import Path

from live import ME, LiveCluster, live_cluster, skip_unless_linux, wait_for

from xce.config import load_config
from xce.controller.store import SqliteStore
from xce.model.events import (
    ConfigLoaded,
    HostStateChanged,
    JobSubmitted,
    LeaseGranted,
    SchedulerEvent,
    is_scheduler_event,
)
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState, run_session

pytestmark = skip_unless_linux

JOBS = 10_000
SESSIONS = 20  # sessions to wait for at least
RENEWALS = 5  # lease renewals, at least, while they run
CONFIG = """\
cluster: cache
session_interval: 0.2
resources:
  gpu: {type: boolean}
hosts:
  - {name: n1, slots: 4}
  - {name: n2, slots: 4}
queues:
  - {name: normal, priority: 30}
  - {name: high, priority: 50}
catalog:
  templates:
    - {name: loc, provider: local, slots: 4, max: 2, rank: 1, type: ARM64}
"""
# No host and no template has gpu; none is a SPARC; n1 (4 slots, n2 closed) is too
# small for 5 or 6, and the template is no X86_64: every bucket fails, every session.
SHAPES = [
    *((n, "select[gpu]") for n in (1, 2, 3, 4)),
    *((n, "select[type==X86_64]") for n in (5, 6)),
    *((n, "select[type==SPARC] span[hosts=1]") for n in (1, 2)),
]
# Never started, never run (the controller has no agent to give them to).
COMMAND = ["false"]
# The controller's timings: no agents run, so hosts must never be declared unreach.
STILL = ("--heartbeat-interval", "0.3", "--unreach-after", "1e9", "--requeue-after", "1e9")


def scheduler_facts(config_path: Path, at: float) -> list[SchedulerEvent]:
    """The log the controller starts from: the configuration, n2 closed by an admin,
    10,000 submissions (of every shape and both queues, interleaved)."""
    config = load_config(config_path)
    resolver = SchedulerState(config)
    facts: list[SchedulerEvent] = [
        ConfigLoaded(config), HostStateChanged("n2", "closed", at, "closed by an admin")]
    shapes = [(n, res, queue) for queue in ("normal", "high") for n, res in SHAPES]
    for job, (n, res, queue) in enumerate(islice(cycle(shapes), JOBS), 1):
        spec = resolver.resolve(JobSpec(
            id=job, user=ME, queue=queue, n=n, res=res, submit=at + job * 1e-3,
            command=COMMAND))
        facts.append(JobSubmitted(spec))
    return facts


def hits_and_sessions(cluster: LiveCluster) -> tuple[int, int, float]:
    """(failure-cache hits, sessions, the last one's time), read in one answer."""
    answer = cluster.ok("GET", "/demand")
    return int(answer.get("failure_cache_hits", 0)), int(answer["session"]), answer["time"]


def test_lease_renewals_keep_the_failure_cache_as_in_the_simulator(tmp_path: Path) -> None:
    with live_cluster(tmp_path, CONFIG, agents=()) as cluster:
        written = time.time() - 60
        facts = scheduler_facts(cluster.config_path, written)
        with SqliteStore(cluster.state / "xce.db") as store:
            store.append(written + JOBS * 1e-3, facts)
        cluster.add_token("provisioner", "prov")
        cluster.start_controller(extra=STILL)
        assert cluster.job(JOBS)["state"] == "PEND"
        cluster._spawn("provisioner", [
            "provisioner", "run", "--controller", cluster.url, "--token-file",
            str(cluster.tokens["prov"]), "--config", str(cluster.config_path),
            "--work", str(tmp_path / "provider"), "--name", "prov-a", "--interval", "0.1",
        ])
        wait_for(lambda: any(lease["holder"] == "prov" and not lease["released"]
                             for lease in cluster.ok("GET", "/leases")["leases"]),
                 20, "the provisioner to lease the local provider")
        # SESSIONS more sessions once the lease is held (the controller may have run
        # many before the provisioner started): the renewals come while they run
        leased_at = hits_and_sessions(cluster)[1]
        hits, sessions, last_session = wait_for(
            lambda: (found := hits_and_sessions(cluster))[1] >= leased_at + SESSIONS and found,
            30, f"{SESSIONS} sessions after the lease")
        assert cluster.ok("GET", "/demand")["demand"]["hosts"] == [], \
            "no template can run any of the jobs: the provisioner has nothing to obtain"
        cluster.stop("provisioner", signal.SIGTERM)
        cluster.stop_controller(signal.SIGTERM)

        with SqliteStore(cluster.state / "xce.db") as store:
            log = [fact.event for fact in store.read(0)]
        assert [e for e in log if is_scheduler_event(e)] == facts, \
            "nothing but the jobs, hosts and configuration written before ever reached " \
            "the scheduler: the simulator below starts from the very same events"
        renewals = [e for e in log if isinstance(e, LeaseGranted) and e.time <= last_session]
        assert len(renewals) >= RENEWALS, \
            f"the lease was renewed {len(renewals)} times while the sessions ran"

    simulated = SchedulerState()
    simulated.apply_all(facts)
    assert len(simulated.pending) == JOBS and len(simulated.buckets) == 2 * len(SHAPES)
    for session in range(sessions):
        result = run_session(simulated, last_session - (sessions - 1 - session) * 0.2)
        assert not result.dispatch and not result.demand.hosts
    assert simulated.failure_cache_hits > 0, \
        "the simulator's sessions reuse failures (SchedulerState.failure_cache_hits counts " \
        "Evaluator.quick_failure's reuses of Bucket.failure)"
    assert hits == simulated.failure_cache_hits, (
        f"over {sessions} sessions and {len(renewals)} lease renewals the live scheduler "
        f"reused {hits} bucket failures, the simulator's core {simulated.failure_cache_hits} "
        f"on the same events: a fact that is not the scheduler's (a lease renewal) must "
        f"not reach it, or the live scheduler re-evaluates every bucket every round")
