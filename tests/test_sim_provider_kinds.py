"""`xce sim run --providers FILE`: simulated provider models derived from a site's real
providers file and each provider's own settings, read offline (docs/simulator.md
"Evaluating your real providers offline").

The site: provider `aws` (ec2: one on-demand and one spot template), `site` (script:
an LSF resource connector plugin) and `lab` (license: lends the countable `vcs`). No
provider is contacted: the ec2 endpoint, the plugin's scripts and the license pool do
not exist.
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from xce.cli.main import main
from xce.config import ConfigError, load_config
from xce.config.providers.file import load_providers
from xce.model.policy import LeadTime, ProviderModel, TokenModel
from xce.sim.driver import Simulator
from xce.sim.provider_kinds import (
    GRANT_DELAY,
    SPOT_RECLAIM_RATE,
    UNLIMITED,
    ProviderKinds,
    derive,
    load_provider_kinds,
)
from xce.sim.workload import load_workload

CLUSTER = """\
cluster: eval
session_interval: 10
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n01, slots: 4}
shared:
  vcs: {total: 0}
queues:
  - {name: normal, priority: 30}
catalog:
  idle_time: 300
  templates:
    - {name: aws.od, provider: aws, slots: 4, max: 2, rank: 1}
    - {name: aws.spot, provider: aws, slots: 4, max: 6, rank: 2}
    - {name: site.c16, provider: site, slots: 16, max: 1, rank: 3}
  countables:
    - {resource: vcs, max_borrow: 4, idle_time: 120, provider: lab}
policy:
  persistence: 0
"""
PROVIDERS = """\
{"providers": [
  {"name": "aws", "type": "ec2", "confPath": "conf/aws"},
  {"name": "site", "type": "script", "confPath": "conf/site", "scriptPath": "plugins/site"},
  {"name": "lab", "type": "license", "confPath": "conf/lab"}
]}
"""
EC2_YAML = """\
region: us-east-1
endpoint_url: http://127.0.0.1:9      # never contacted
templates:
  aws.od: {instance_type: c5.xlarge, image_id: ami-0abc}
  aws.spot: {instance_type: c5.xlarge, image_id: ami-0abc, market: spot, max: 5,
             lead_time: 180}
"""
SCRIPTCONF = "lead_time: 240\n"
LICENSE_YAML = "url: http://127.0.0.1:9\npools: {vcs: vcs}\n"
JOBS = """\
jobs:
  - {ids: "1-24", submit: 0, run: 1800, n: 4}
  - {ids: "25-30", submit: 60, run: 600, n: 1, res: "rusage[vcs=1]"}
"""
# Explicit values that win over the derived ones (reclaim_rate: spot templates only).
EXPLICIT = """\
simulation:
  seed: 3
  providers:
    aws: {reclaim_rate: 2.0, lead_time: {dist: uniform, low: 60, high: 90}, capacity: 6}
    site: {failure_rate: 0.1}
  countables:
    vcs: {grant_delay: 5}
"""


@dataclass
class Site:
    cluster: Path
    providers: Path
    jobs: Path
    root: Path


def make_site(tmp_path: Path, simulation: str = "") -> Site:
    for directory in ("conf/aws", "conf/site", "conf/lab"):
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
    (tmp_path / "conf/aws/ec2.yaml").write_text(EC2_YAML)
    (tmp_path / "conf/site/scriptconf.yaml").write_text(SCRIPTCONF)
    (tmp_path / "conf/lab/license.yaml").write_text(LICENSE_YAML)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER + simulation)
    providers = tmp_path / "providers.json"
    providers.write_text(PROVIDERS)
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    return Site(cluster, providers, jobs, tmp_path)


def kinds_of(site: Site) -> ProviderKinds:
    return load_provider_kinds(site.cluster, load_config(site.cluster), site.providers)


def simulate(site: Site, seed: int | None = None) -> tuple[Simulator, dict[str, Any]]:
    kinds = kinds_of(site)
    sim = Simulator(kinds.cluster, load_workload(site.jobs), seed=seed,
                    host_providers=kinds.host_providers())
    sim.run()
    return sim, sim.summary()


def sim_cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["sim", *args])


# --------------------------------------------------------------------------- derived
def test_models_are_derived_per_provider_type_from_the_providers_own_settings(tmp_path):
    kinds = kinds_of(make_site(tmp_path))
    od, spot, c16 = (kinds.templates[n] for n in ("aws.od", "aws.spot", "site.c16"))
    # ec2: ec2.yaml's lead time (default 120 s) unless the template has its own; the
    # template's max as capacity; spot reclaims, on-demand none; no failures.
    assert (od.type, od.market) == ("ec2", "on-demand")
    assert od.model == ProviderModel(lead_time=LeadTime(mean=120.0), failure_rate=0.0,
                                     capacity=UNLIMITED, reclaim_rate=0.0)
    assert (spot.type, spot.market) == ("ec2", "spot")
    assert spot.model == ProviderModel(lead_time=LeadTime(mean=180.0), failure_rate=0.0,
                                       capacity=5, reclaim_rate=SPOT_RECLAIM_RATE)
    assert SPOT_RECLAIM_RATE == 0.05
    # The provider's max (5) caps the catalog's (6), as the provisioner's allowance does.
    assert spot.limit == 5 and od.limit is None
    assert {t.name: t.max for t in kinds.cluster.catalog.templates} == {
        "aws.od": 2, "aws.spot": 5, "site.c16": 1}
    # script: scriptconf's lead time, no failures, no reclaims.
    assert c16.type == "script"
    assert c16.model == ProviderModel(lead_time=LeadTime(mean=240.0))
    # license: the countable's max_borrow (license.yaml has no size), 1 s, no refusals;
    # handed to the simulator as its simulation.countables entry.
    assert kinds.cluster.simulation.countables == {
        "vcs": TokenModel(grant_delay=GRANT_DELAY, refusal_rate=0.0, pool=None)}
    assert GRANT_DELAY == 1.0
    assert kinds.pools["vcs"].provider == "lab" and kinds.pools["vcs"].size == 4
    assert kinds.shared_capacity == {}
    shown = kinds.shown()
    assert shown["aws"]["templates"]["aws.spot"] == {
        "market": "spot", "lead_time": 180.0, "failure_rate": 0.0, "capacity": 5,
        "reclaim_rate": 0.05, "max": 5}
    assert shown["aws"]["templates"]["aws.od"]["capacity"] is None
    assert shown["site"]["templates"]["site.c16"]["lead_time"] == 240.0
    assert shown["lab"] == {"type": "license", "explicit": [], "pools": {
        "vcs": {"grant_delay": 1.0, "refusal_rate": 0.0, "pool": 4.0}}}


def test_defaults_without_settings_local_pools_and_templates_of_unlisted_providers(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(textwrap.dedent("""\
        cluster: eval
        resources:
          vcs: {shared: true}
        shared:
          vcs: {total: 0}
        catalog:
          templates:
            - {name: loc, provider: local, slots: 2, max: 2}
            - {name: plug, provider: rc, slots: 8, max: 4}
            - {name: other, provider: elsewhere, slots: 8, max: 4}
          countables:
            - {resource: vcs, max_borrow: 3}
        simulation:
          providers:
            elsewhere: {lead_time: 33}
    """))
    (tmp_path / "local").mkdir()
    (tmp_path / "local/local.yaml").write_text("lead_time: 7\npools: {vcs: 2}\n")
    (tmp_path / "rc").mkdir()  # a plugin's conf dir without scriptconf.yaml
    providers = tmp_path / "providers.yaml"
    providers.write_text(textwrap.dedent("""\
        providers:
          - {name: local, type: local, confPath: local}
          - {name: rc, type: script, confPath: rc, scriptPath: nowhere}
    """))
    kinds = load_provider_kinds(cluster, load_config(cluster), providers)
    assert kinds.templates["loc"].model == ProviderModel(lead_time=LeadTime(mean=7.0))
    assert kinds.templates["plug"].model == ProviderModel(lead_time=LeadTime(mean=300.0))
    other = kinds.templates["other"]
    assert other.type is None and other.model.lead_time.mean == 33
    assert set(kinds.host_providers()) == {"loc", "plug"}, "others keep the simulator's"
    assert kinds.cluster.simulation.countables["vcs"] == TokenModel(grant_delay=1.0, pool=2.0)
    assert kinds.pools["vcs"].size == 2
    assert "not in the providers file" in kinds.shown()["elsewhere"]["note"]


def test_explicit_simulation_values_win_key_by_key(tmp_path):
    kinds = kinds_of(make_site(tmp_path, EXPLICIT))
    od, spot, c16 = (kinds.templates[n] for n in ("aws.od", "aws.spot", "site.c16"))
    uniform = LeadTime(dist="uniform", mean=75.0, low=60.0, high=90.0)
    assert od.model.lead_time == uniform and spot.model.lead_time == uniform
    # reclaim_rate of an ec2 provider: its spot templates only.
    assert spot.model.reclaim_rate == 2.0 and od.model.reclaim_rate == 0.0
    # capacity of the provider: all its templates together; each keeps its own.
    assert kinds.shared_capacity == {"aws": 6}
    assert spot.model.capacity == 5 and od.model.capacity == UNLIMITED
    # What the file does not set stays derived.
    assert c16.model == ProviderModel(lead_time=LeadTime(mean=240.0), failure_rate=0.1)
    assert kinds.cluster.simulation.countables["vcs"] == TokenModel(grant_delay=5.0)
    assert kinds.shown()["aws"]["explicit"] == ["capacity", "lead_time", "reclaim_rate"]
    assert kinds.shown()["lab"]["pools"]["vcs"]["explicit"] == ["grant_delay"]
    # Without the file's keys (a cluster built in code), every key of an entry counts.
    everything = derive(kinds.cluster, load_providers(make_site(tmp_path).providers))
    assert everything.templates["site.c16"].model.lead_time == LeadTime(mean=120.0)


def test_an_explicit_provider_capacity_is_shared_by_its_templates(tmp_path):
    site = make_site(tmp_path, "simulation:\n  providers:\n    aws: {capacity: 1}\n")
    providers = kinds_of(site).host_providers()
    rng = random.Random(1)
    assert providers["aws.od"].answer(rng)[0] == "join"
    assert providers["aws.spot"].answer(rng) == ("capacity", 0.0), "aws has 1 at once"
    providers["aws.od"].released()
    assert providers["aws.spot"].answer(rng)[0] == "join"
    assert providers["site.c16"].answer(rng)[0] == "join", "another provider"


# --------------------------------------------------------------------------- runs
def test_spot_hosts_are_reclaimed_and_on_demand_hosts_are_not(tmp_path):
    sim, summary = simulate(make_site(tmp_path, EXPLICIT))
    metrics = sim.metrics
    assert metrics.hosts_joined["aws.od"] >= 2 and metrics.hosts_joined["aws.spot"] >= 5
    assert metrics.hosts_lost.get("aws.spot", 0) > 0, "2 reclaims/host-hour, 30 min jobs"
    assert "aws.od" not in metrics.hosts_lost and "site.c16" not in metrics.hosts_lost
    assert summary["hosts_lost"] == metrics.hosts_lost["aws.spot"]
    assert summary["finished"] == 30, "jobs of reclaimed hosts are requeued and finish"
    assert metrics.hosts_requested["site.c16"] >= 1


def test_default_spot_reclaims_do_not_stretch_the_run(tmp_path):
    """A reclaim drawn for a host given back earlier is no work left: the run ends when
    the jobs and the supply are done (at 0.05/host-hour the draws are hours away)."""
    sim, summary = simulate(make_site(tmp_path))
    assert summary["finished"] == 30 and summary["hosts_failed"] == 0
    assert summary["sim_seconds"] < 2 * 3600
    assert sim.done


def test_same_seed_same_results_through_the_cli(tmp_path):
    site = make_site(tmp_path, EXPLICIT)
    args = ["run", str(site.cluster), "--workload", str(site.jobs), "--providers",
            str(site.providers), "--json"]
    runs = [sim_cli(*args, "--seed", "11") for _ in range(2)]
    for result in runs:
        assert result.exit_code == 0, result.output
    first, second = (json.loads(r.output) for r in runs)
    for summary in (first, second):
        summary.pop("wall_seconds")
    assert first == second
    assert first["hosts_lost"] > 0
    assert first["provider_models"]["aws"]["templates"]["aws.spot"]["reclaim_rate"] == 2.0
    assert first["provider_models"]["aws"]["capacity"] == 6


def test_the_summary_table_and_the_report_show_the_models(tmp_path):
    site = make_site(tmp_path)
    report = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "sim", "run", str(site.cluster), "--workload", str(site.jobs), "--providers",
        str(site.providers), "--report", str(report)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert ("ec2 spot: lead 180 s; failures 0; capacity 5; reclaims 0.05/h; "
            "max 5 (the provider's)") in result.output
    assert "model lab/vcs" in result.output and "license: grant 1 s" in result.output
    assert "model aws/aws.od" in (report / "index.html").read_text()


def test_the_repl_takes_the_same_option(tmp_path):
    site = make_site(tmp_path)
    result = CliRunner().invoke(main, [
        "sim", "repl", str(site.cluster), "--workload", str(site.jobs), "--providers",
        str(site.providers)], input="info supply\nrun\n", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    spot = next(line for line in result.output.splitlines() if "aws.spot" in line)
    assert spot.split("│")[4].strip() == "5", "the provider's max caps the template"
    assert "30 finished" in result.output


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("entry, expected", [
    ('{"name": "aws", "type": "ec3", "confPath": "conf/aws"}',
     "providers.json:2: providers[0].type: unknown provider type 'ec3' "
     "(known: local, script, ec2, license)"),
    ('{"name": "aws", "type": "ec2", "confpath": "conf/aws"}',
     "providers.json:2: providers[0].confpath: unknown field "
     "(known: name, type, confPath, scriptPath)"),
    ('{"name": "lab", "type": "license"}',
     "providers.json:2: lab.confPath: a license provider needs confPath: the directory "
     "of its license.yaml"),
])
def test_a_bad_providers_file_is_one_line_naming_file_line_and_field(tmp_path, monkeypatch,
                                                                     entry, expected):
    site = make_site(tmp_path)
    site.providers.write_text('{"providers": [\n  ' + entry + '\n]}\n')
    monkeypatch.chdir(tmp_path)
    result = sim_cli("run", "cluster.yaml", "--workload", "jobs.yaml",
                     "--providers", "providers.json")
    assert result.exit_code == 1
    assert result.output == f"Error: {expected}\n"
    if "license" not in entry:  # the provisioner's own reading gives the same error
        with pytest.raises(ConfigError) as err:
            load_providers("providers.json")
        assert str(err.value) == expected


def test_a_bad_provider_setting_names_its_own_file(tmp_path):
    site = make_site(tmp_path)
    ec2 = tmp_path / "conf/aws/ec2.yaml"
    ec2.write_text(EC2_YAML.replace("market: spot", "market: reserved"))
    result = sim_cli("run", str(site.cluster), "--workload", str(site.jobs),
                     "--providers", str(site.providers))
    assert result.exit_code == 1
    assert result.output == (f"Error: {ec2}:5: templates.aws.spot.market: expected one of "
                             "on-demand, spot, got 'reserved'\n")


def test_providers_needs_a_cluster_file(tmp_path):
    site = make_site(tmp_path)
    result = sim_cli("run", "--workload", str(site.jobs), "--providers", str(site.providers))
    assert result.exit_code == 2
    assert "--providers needs a CLUSTER file" in result.output


def test_a_recorded_run_with_real_providers_replays(tmp_path):
    """The recording starts with the configuration the simulator ran (the provider's
    max capping the template's), so replaying it finds no divergence."""
    site = make_site(tmp_path, EXPLICIT)
    recording = tmp_path / "run.jsonl"
    result = sim_cli("run", str(site.cluster), "--workload", str(site.jobs), "--providers",
                     str(site.providers), "--record", str(recording), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["hosts_lost"] > 0
    replayed = sim_cli("replay", str(recording))
    assert replayed.exit_code == 0, replayed.output
    assert "no divergence" in replayed.output
