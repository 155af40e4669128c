"""The controller's metrics in process (issue 22): jobs per state and queue, kept as
facts apply, always equal a walk over the jobs (through holds, starts, stops, ends,
kills, requeues, switches, forgetting, a snapshot and recovery); provider requests
are counted once by outcome, released hosts by cause; sessions and commits are
timed. Two controllers in one process keep their metrics apart."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from xce.config.loader import load_config_text
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.metrics import ControllerMetrics
from xce.controller.store import SqliteStore
from xce.model.api import SubmitRequest
from xce.model.events import JobFinished, JobStarted

CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 4}
queues:
  - {name: normal, priority: 30}
  - {name: short, priority: 60}
catalog:
  templates:
    - {name: cloud, provider: aws, slots: 4, max: 5, price: 2}
"""
ALICE = Identity("alice", "user")
ADMIN = Identity("root", "admin")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(metrics: ControllerMetrics) -> Samples:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def jobs_shown(found: Samples) -> Counter[tuple[str, str]]:
    shown: Counter[tuple[str, str]] = Counter()
    for (name, labels), count in found.items():
        if name == "xce_jobs" and count:
            label = dict(labels)
            shown[(label["state"], label["queue"])] = int(count)
    return shown


def walked(ctl: Controller) -> Counter[tuple[str, str]]:
    """What the API shows (USUSP for a stopped running job), by walking every job."""
    return Counter(
        ("ususp" if ctl.control.suspended(job) is not None else job.state.lower(),
         job.spec.queue)
        for job in ctl.view.jobs.values())


def controller(path: Path) -> tuple[Controller, ControllerMetrics]:
    ctl = Controller(load_config_text(CONFIG), SqliteStore(path / "xce.db"),
                     clock=lambda: 1000.0)
    return ctl, ControllerMetrics(ctl)


def test_job_counts_follow_every_fact_and_recovery(tmp_path: Path) -> None:
    async def test() -> None:
        ctl, metrics = controller(tmp_path)
        await ctl.start()
        ids = [(await ctl.submit(ALICE, SubmitRequest(["true"], queue=q, n=n)))[0]
               for q, n in (("normal", 1), ("normal", 2), ("short", 1), ("short", 1),
                            ("normal", 1))]
        await ctl.hold(ALICE, ids[4], True)
        assert jobs_shown(samples(metrics)) == walked(ctl)
        await ctl.commit(1000.0, [JobStarted(ids[0], {"n1": 1}, 1000.0),
                                  JobStarted(ids[1], {"n1": 2}, 1000.0)])
        assert ctl.view.hosts["n1"].used == 3
        await ctl.control.stop(ALICE, ids[1])  # USUSP
        await ctl.changes.switch(ALICE, ids[2], "normal")
        await ctl.kill(ALICE, ids[3])
        await ctl.commit(1001.0, [JobFinished(ids[0], 1001.0, 0, None)])
        found = samples(metrics)
        assert jobs_shown(found) == walked(ctl) == Counter({
            ("done", "normal"): 1, ("ususp", "normal"): 1, ("pend", "normal"): 1,
            ("exit", "short"): 1, ("psusp", "normal"): 1})
        assert value(found, "xce_jobs", state="run", queue="normal") == 0
        assert value(found, "xce_slots", state="used") == 2 == ctl.view.hosts["n1"].used
        await ctl.control.requeue(ALICE, ids[1])
        assert jobs_shown(samples(metrics)) == walked(ctl)
        await ctl.snapshot()
        ctl.view.forget_finished(2000.0)
        assert jobs_shown(samples(metrics)) == walked(ctl)
        await ctl.close()

        again, metrics_again = controller(tmp_path)  # recovery: snapshot, then the log
        await again.start()
        assert jobs_shown(samples(metrics_again)) == walked(again)
        assert value(samples(metrics_again), "xce_jobs", state="pend", queue="normal") == 2
        await again.close()

    asyncio.run(test())


def test_request_outcomes_releases_sessions_and_commits(tmp_path: Path) -> None:
    async def test() -> None:
        ctl, metrics = controller(tmp_path)
        other = Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "other.db"))
        other_metrics = ControllerMetrics(other)
        await ctl.start()
        made = await ctl.request_hosts(ADMIN, "cloud", "aws", "r1", 2, 600.0)
        await ctl.accept_request(ADMIN, "r1", {e.name: f"i-{e.name}" for e, _ in made})
        await ctl.accept_request(ADMIN, "r1", {})  # (again: nothing new to count)
        await ctl.request_hosts(ADMIN, "cloud", "aws", "r2", 1, 600.0)
        await ctl.refuse_request(ADMIN, "r2", "no capacity")
        await ctl.remove(ADMIN, made[0][0].name)  # cancelled before it joined
        await ctl.run_session()
        found = samples(metrics)
        outcomes = {o: value(found, "xce_provider_requests_total", provider="aws",
                             template="cloud", outcome=o) for o in ("accepted", "refused")}
        assert outcomes == {"accepted": 1, "refused": 1}
        assert value(found, "xce_hosts_released_total", template="cloud", cause="refused") == 1
        assert value(found, "xce_hosts_released_total", template="cloud",
                     cause="cancelled") == 1
        assert value(found, "xce_supply_in_flight", template="cloud") == 1
        assert value(found, "xce_hosts", state="expected", template="cloud") == 1
        assert value(found, "xce_session_duration_seconds_count", phase="real_pass") == 1
        assert value(found, "xce_sessions_total") == 1
        assert value(found, "xce_store_append_seconds_count") >= 4
        assert value(found, "xce_cost_per_hour", template="cloud") == 0
        assert value(samples(other_metrics), "xce_provider_requests_total", provider="aws",
                     template="cloud", outcome="accepted") == 0
        later = await ctl.request_hosts(ADMIN, "cloud", "aws", "r3", 1, 600.0)
        await ctl.close()

        again, metrics_again = controller(tmp_path)  # answered after a restart: counted
        await again.start()
        assert value(samples(metrics_again), "xce_provider_requests_total", provider="aws",
                     template="cloud", outcome="accepted") == 0
        await again.accept_request(ADMIN, "r3", {later[0][0].name: "i-3"})
        assert value(samples(metrics_again), "xce_provider_requests_total", provider="aws",
                     template="cloud", outcome="accepted") == 1
        await again.close()

    asyncio.run(test())
