"""Issue 18 in the simulator: the scheduler's supply inputs (when in-flight hosts were
requested, each template's expected lead time), the policy's new actions and timers
(surplus hosts cancelled in flight, the scale-down delay after a request), the
summary's `host_hours_busy` and `requests` (FORMATS.md "Simulator summary"), what a
run keeps of hosts given back, and the LLNL-Atlas runaway under a memory limit."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from xce.config import load_config_text
from xce.model.cluster import ClusterConfig
from xce.model.events import SupplyChanged
from xce.model.policy import LeadTime, ProviderModel
from xce.model.recording import Recorder, read_recording
from xce.sim.driver import Simulator
from xce.sim.providers import HostProvider
from xce.sim.supply import mean_lead_time
from xce.sim.workload import Workload, load_workload

TRACE = (Path(__file__).resolve().parents[2] / "shared" / "traces"
         / "LLNL-Atlas-2006-2.1-cln.swf.gz")

BURST = """
    cluster: burst
    session_interval: 10
    hosts:
      - {name: n01, slots: 4}
    queues: [{name: normal, priority: 30}]
    catalog:
      idle_time: 300
      templates:
        - {name: cloud, provider: sim, slots: 4, max: 4}
    policy: {persistence: 0}
    simulation:
      providers: {sim: {lead_time: 120}}
"""

# Job 1 fills n01; job 2 (8 slots) needs two cloud hosts, job 3 (2 slots) a third.
BURST_JOBS = """
    jobs:
      - {id: 1, submit: 0, run: 1000, n: 4}
      - {id: 2, submit: 0, run: 200, n: 8}
      - {id: 3, submit: 0, run: 300, n: 2}
"""

RANDOM = """
    cluster: dice
    session_interval: 10
    hosts:
      - {name: n01, slots: 4}
    queues: [{name: normal, priority: 30}]
    catalog:
      idle_time: 120
      templates:
        - {name: cloud, provider: sim, slots: 4, max: 6}
    policy: {persistence: 0}
    simulation:
      seed: 3
      providers:
        sim: {lead_time: {dist: uniform, low: 30, high: 90}, failure_rate: 0.5}
"""

RANDOM_JOBS = """
    jobs:
      - {ids: "1-8", submit: 0, run: 200, n: 4}
      - {ids: "9-14", submit: 400, run: 100, n: 2}
"""

# The cluster (the quoted host range included).
RUNAWAY = (Path(__file__).resolve().parents[1] / "examples" / "llnl-atlas-elastic.yaml").read_text(
)


def cluster(text: str) -> ClusterConfig:
    return load_config_text(textwrap.dedent(text), "cluster.yaml")


def workload(tmp_path: Path, text: str) -> Workload:
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(text))
    return load_workload(path)


def supply_events(tmp_path: Path, config: ClusterConfig, jobs: Workload,
                  **kwargs: Any) -> tuple[Simulator, list[tuple[float, SupplyChanged]]]:
    """A run recorded; its SupplyChanged events with their times."""
    recorder = Recorder(tmp_path / "run.jsonl")
    sim = Simulator(config, jobs, recorder=recorder, **kwargs)
    sim.run()
    recorder.close()
    events = [(t, item) for _line, t, item in read_recording(tmp_path / "run.jsonl")
              if isinstance(item, SupplyChanged)]
    return sim, events


# ------------------------------------------------------------------ scheduler inputs


def test_in_flight_hosts_carry_their_request_times(tmp_path: Path) -> None:
    """t=0 RequestHosts(cloud, 3): in flight 3, requested at 0; t=120 all three join:
    none in flight, no request time left. The expected lead time comes first."""
    _sim, events = supply_events(tmp_path, cluster(BURST), workload(tmp_path, BURST_JOBS))
    assert [(t, e.in_flight, e.requested, e.lead_time) for t, e in events] == [
        (0, {}, {}, {"cloud": 120.0}),
        (0, {"cloud": 3}, {"cloud": [0.0, 0.0, 0.0]}, {}),
        (120, {"cloud": 0}, {"cloud": []}, {}),
    ]


def test_request_times_follow_joins_and_failures(tmp_path: Path) -> None:
    """Random lead times and failures: whenever the in-flight count changes, the
    request times are those of the hosts still in flight, one each."""
    sim, events = supply_events(tmp_path, cluster(RANDOM), workload(tmp_path, RANDOM_JOBS))
    changes = [(t, e) for t, e in events if e.in_flight]
    assert sim.metrics.hosts_failed and sim.metrics.hosts_joined
    assert len({t for t, _e in changes}) > 2, "requests at several times"
    before: list[float] = []
    for t, event in changes:
        times = event.requested["cloud"]
        assert len(times) == event.in_flight["cloud"]
        assert times == sorted(times)
        if len(times) > len(before):  # hosts requested now, after those in flight
            assert times[: len(before)] == before
            assert set(times[len(before):]) == {t}
        else:  # hosts that joined or failed taken out
            assert Counter(times) <= Counter(before)
        before = times
    assert before == []
    assert sim.state.requested == {"cloud": []}
    assert sim.state.lead_times == {"cloud": 60.0}  # uniform 30..90



def test_surplus_hosts_in_flight_are_cancelled_and_never_join(tmp_path: Path) -> None:
    """Job 2 waits for a cloud host (lead time 300 s), requested at 0; job 1 ends at 100
    and job 2 starts on n01: the host in flight is surplus, CancelHosts(cloud, 1). It
    never joins, its provider's capacity is free, and the run ends when job 2 does."""
    config = cluster(BURST.replace("lead_time: 120", "lead_time: 300"))
    jobs = workload(tmp_path, """
        jobs:
          - {id: 1, submit: 0, run: 100, n: 4}
          - {id: 2, submit: 0, run: 50, n: 4}
    """)
    sim, events = supply_events(tmp_path, config, jobs)
    assert [(t, e.in_flight, e.requested) for t, e in events if e.in_flight] == [
        (0, {"cloud": 1}, {"cloud": [0.0]}),
        (100, {"cloud": 0}, {"cloud": []}),
    ]
    assert [(t, type(a).__name__) for t, a in sim.actions_log] == [
        (0, "RequestHosts"), (100, "CancelHosts"),
    ]
    summary = sim.summary()
    assert summary["hosts_cancelled"] == 1
    assert summary["hosts_joined"] == 0
    assert summary["sim_seconds"] == 150
    assert sim.template_providers["cloud"].active == 0


def test_idle_hosts_held_after_a_request_are_drained_when_the_delay_ends(tmp_path: Path) -> None:
    """scale_down_delay_after_add 2000 s after the request at 0: the hosts, idle since
    320 and 420 (idle_time 300), are drained at 2000, the policy's timer, and, empty,
    given back in the same round (each DecommissionHost right after its DrainHost), not
    left until something else wakes the run up: each is up 120..2000."""
    config = cluster(BURST.replace(
        "policy: {persistence: 0}", "policy: {persistence: 0, scale_down_delay_after_add: 2000}"
    ))
    sim = Simulator(config, workload(tmp_path, BURST_JOBS))
    sim.run()
    assert [(t, type(a).__name__) for t, a in sim.actions_log][:1] == [(0, "RequestHosts")]
    assert [(t, type(a).__name__, a.host) for t, a in sim.actions_log[1:]] == [
        (2000, kind, f"cloud-{k}") for k in (1, 2, 3) for kind in ("DrainHost", "DecommissionHost")
    ]
    assert sim.summary()["host_hours"] == {"cloud": round(3 * 1880 / 3600, 3)}

@pytest.mark.parametrize(("lead", "mean"), [
    (LeadTime(mean=45), 45.0),
    (LeadTime(dist="uniform", low=60, high=300), 180.0),
    (LeadTime(dist="exponential", mean=90), 90.0),
    (LeadTime(dist="normal", mean=120, sd=30), 120.0),
])
def test_the_expected_lead_time_is_the_mean_of_the_model(
    tmp_path: Path, lead: LeadTime, mean: float
) -> None:
    assert mean_lead_time(lead) == mean
    config = cluster(BURST)
    config = msgspec.structs.replace(config, simulation=msgspec.structs.replace(
        config.simulation, providers={"sim": ProviderModel(lead_time=lead)}))
    sim = Simulator(config, workload(tmp_path, BURST_JOBS))
    assert sim.state.lead_times == {"cloud": mean}
    assert sim.state.lead_time("cloud") == mean


def test_a_template_provider_of_its_own_gives_the_lead_time(tmp_path: Path) -> None:
    """host_providers (xce.sim.provider_kinds) replace the provider's model: theirs."""
    own = HostProvider("aws", ProviderModel(lead_time=LeadTime(dist="exponential", mean=45)))
    sim = Simulator(cluster(BURST), workload(tmp_path, BURST_JOBS), host_providers={"cloud": own})
    assert sim.state.lead_times == {"cloud": 45.0}


def test_a_configured_expected_lead_time_is_left_to_the_scheduler(tmp_path: Path) -> None:
    config = cluster(BURST)
    template = msgspec.structs.replace(config.catalog.templates[0], expected_lead_time=500)
    config = msgspec.structs.replace(
        config, catalog=msgspec.structs.replace(config.catalog, templates=(template,)))
    sim, events = supply_events(tmp_path, config, workload(tmp_path, BURST_JOBS))
    assert not any(e.lead_time for _t, e in events)
    assert sim.state.lead_time("cloud") == 500


# ------------------------------------------------------------------ summary


def test_host_hours_busy_and_requests(tmp_path: Path) -> None:
    """Job 2 uses both slots of two cloud hosts for 200 s (2 x 200 host-seconds), job 3
    half of a third for 300 s (150); hosts 1 and 2 are up 120..620, host 3 120..720
    (each drained idle 300 s after its last job and given back in the same round).
    One RequestHosts: one provider request."""
    sim = Simulator(cluster(BURST), workload(tmp_path, BURST_JOBS))
    sim.run()
    summary = sim.summary()
    assert summary["host_hours_busy"] == {"cloud": round(550 / 3600, 3)}
    assert summary["host_hours"] == {"cloud": round((2 * 500 + 600) / 3600, 3)}
    assert summary["requests"] == 1
    assert summary["hosts_requested"] == 3


def test_running_jobs_count_busy_up_to_now_and_a_summary_changes_nothing(tmp_path: Path) -> None:
    """At t=320 job 2 has ended (2 x 200 host-seconds) and job 3 has run 200 s on half
    of a host (100 so far)."""
    sim = Simulator(cluster(BURST), workload(tmp_path, BURST_JOBS))
    sim.run(until=320)
    assert sim.now == 320
    first = sim.summary()
    assert first["host_hours_busy"] == {"cloud": round(500 / 3600, 3)}
    assert sim.summary()["host_hours_busy"] == first["host_hours_busy"]
    sim.run()
    assert sim.summary()["host_hours_busy"] == {"cloud": round(550 / 3600, 3)}


class ReclaimOnce(HostProvider):
    """A provider that takes its first host back after 100 s, no other."""

    def __init__(self) -> None:
        super().__init__("spot", ProviderModel(lead_time=LeadTime(mean=30)))
        self.reclaims = 0

    def reclaim_after(self, rng: random.Random) -> float | None:
        self.reclaims += 1
        return 100.0 if self.reclaims == 1 else None


def test_a_requeued_run_counts_busy_until_the_host_is_lost(tmp_path: Path) -> None:
    """Job 1 (4 slots, 300 s) starts on cloud-1 at 30, which is lost at 130: 100 s;
    requeued, it runs its 300 s on cloud-2."""
    config = cluster("""
        cluster: spot
        session_interval: 10
        queues: [{name: normal, priority: 30}]
        catalog:
          idle_time: 60
          templates:
            - {name: spot, provider: sim, slots: 4, max: 2}
        policy: {persistence: 0}
    """)
    jobs = workload(tmp_path, "jobs:\n  - {id: 1, submit: 0, run: 300, n: 4}\n")
    sim = Simulator(config, jobs, host_providers={"spot": ReclaimOnce()})
    sim.run()
    summary = sim.summary()
    assert summary["hosts_lost"] == 1
    assert summary["finished"] == 1
    assert summary["host_hours_busy"] == {"spot": round(400 / 3600, 3)}
    assert summary["requests"] == 2


def test_token_requests_are_provider_requests(tmp_path: Path) -> None:
    config = cluster("""
        cluster: licenses
        session_interval: 10
        resources:
          vcs: {type: numeric, consumable: true, shared: true}
        hosts:
          - {name: n01, slots: 4}
        shared:
          vcs: {total: 1}
        queues: [{name: normal, priority: 30}]
        catalog:
          countables:
            - {resource: vcs, max_borrow: 2, idle_time: 100}
        policy: {persistence: 0}
        simulation:
          countables: {vcs: {grant_delay: 30}}
    """)
    jobs = workload(tmp_path, """
        jobs:
          - {ids: "1-3", submit: 0, run: 100, n: 1, res: "rusage[vcs=1]"}
    """)
    sim = Simulator(config, jobs)
    sim.run()
    assert sim.summary()["requests"] == 1  # RequestTokens(vcs, 2) at t=0
    assert sim.summary()["host_hours_busy"] == {}


def test_hosts_given_back_are_forgotten(tmp_path: Path) -> None:
    """What a run keeps of provisioned hosts is bounded by the hosts present."""
    sim = Simulator(cluster(BURST), workload(tmp_path, BURST_JOBS))
    sim.run()
    assert sim.used_hosts == {"n01"}
    assert not sim.provisioned


# ------------------------------------------------------------------ the runaway

# The child: an address-space limit, then `xce sim run` (its arguments after the limit).
LIMITED_RUN = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["xce", *sys.argv[2:]]
from xce.cli.main import main
main()
"""


@pytest.mark.skipif(not TRACE.is_file(), reason="the shared LLNL-Atlas trace is absent")
def test_the_llnl_atlas_runaway_finishes_within_2_gb(tmp_path: Path) -> None:
    """Issue 18: with a burst template able to hold the whole machine, the first 2,000
    jobs of LLNL-Atlas grew memory without bound (a livelock: hosts that joined were
    given back before the rest of a wide job's arrived). Under 2 GB of address space
    and 300 s, every job finishes."""
    path = tmp_path / "cluster.yaml"
    path.write_text(RUNAWAY)
    args = ["sim", "run", str(path), "--workload", str(TRACE), "--first", "2000", "--json"]
    try:
        done = subprocess.run([sys.executable, "-c", LIMITED_RUN, str(2 * 1024**3), *args],
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("still running after 300 s: the livelock")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["jobs"] == 2000
    assert summary["too_large"] == 0
    assert summary["finished"] == summary["jobs"]
