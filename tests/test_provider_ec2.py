"""The `ec2` provider against moto's server, started by this module on loopback (no AWS
account; boto3 with `endpoint_url` and dummy credentials): launches with the
template's parameters, tags and user data; spot; idempotent retries; EC2's
insufficient-capacity error (answered by a proxy in front of moto, in EC2's own
protocol) as `capacity` with nothing left running; release; an instance terminated
behind XCE's back (a spot interruption) listed `gone`; an instance made behind XCE's
back with only the cluster's tag listed for reconciliation.

Each test has a cluster of its own (instances are found by the `xce:cluster` tag), so
they share one moto server.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ec2_cloud import AWS_ENV, IMAGE, CapacityProxy, ec2_client, moto_server, network
from live import free_port

from xce.config import ConfigError, load_config_text
from xce.config.providers.file import load_providers
from xce.provisioner.provider import HostGrant, Instance, ProviderError, TemplateOffer
from xce.provisioner.providers.ec2 import Ec2Provider, client_token
from xce.provisioner.registry import ProviderContext, build_providers

CONTROLLER = "http://10.0.0.5:6820"
CLUSTER = """\
cluster: {cluster}
resources:
  ssd: {{type: boolean}}
  scratch: {{type: numeric}}
hosts:
  - {{name: n1, slots: 1}}
queues:
  - {{name: normal, priority: 30}}
catalog:
  templates:
    - {{name: aws.od, provider: aws, slots: 4, max: 3, rank: 1,
        resources: {{ssd: true, scratch: 500}}}}
    - {{name: aws.spot, provider: aws, slots: 8, max: 5, rank: 2}}
    - {{name: aws.tight, provider: aws, slots: 2, max: 4, rank: 3}}
    - {{name: aws.multi, provider: aws, slots: 2, max: 4, rank: 4}}
    - {{name: loc, provider: local, slots: 2, max: 2}}
"""
EC2_YAML = """\
region: us-east-1
endpoint_url: {endpoint}
max_attempts: 1
connect_timeout: 2
lead_time: 90
tags: {{team: eda}}
templates:
  aws.od:
    instance_type: m5.xlarge
    image_id: {image}
    subnet_id: {subnet}
    security_group_ids: [{group}]
    cost_per_hour: 0.192
  aws.spot:
    instance_type: c5.2xlarge
    image_id: {image}
    subnet_id: {subnet}
    security_group_ids: [{group}]
    market: spot
    spot_max_price: "0.20"
    max: 2
    lead_time: 60
  aws.tight:
    instance_type: {tight}
    image_id: {image}
    subnet_id: {subnet}
  aws.multi:
    instance_types:
      - {{type: {multi[0]}, price: 0.34}}
      - {{type: {multi[1]}, price: 0.3}}
      - {{type: {multi[2]}, price: 0.25}}
    image_id: {image}
    subnet_id: {subnet}
"""


@dataclass
class World:
    moto: str  # moto's URL
    proxy: CapacityProxy  # in front of moto: what the providers talk to
    ec2: Any  # the test's own client, straight to moto
    subnet: str
    group: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("ec2")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in AWS_ENV.items():
            patch.setenv(key, value)
        with moto_server(root / "moto.log") as url:
            proxy = CapacityProxy(url)
            ec2 = ec2_client(url)
            subnet, group = network(ec2)
            try:
                yield World(url, proxy, ec2, subnet, group)
            finally:
                proxy.close()


@dataclass
class Setup:
    provider: Ec2Provider
    cluster: str
    tight: str  # the instance type of aws.tight (unique to the test)
    multi: list[str]  # the instance types of aws.multi, in their order (unique too)


def make(world: World, tmp_path: Path, endpoint: str | None = None) -> Setup:
    """An ec2 provider `aws` of a fresh cluster, built from a providers file as
    `xce provisioner run --providers` builds it."""
    cluster = f"c{uuid.uuid4().hex[:8]}"
    tight = f"x{uuid.uuid4().hex[:6]}.large"  # moto accepts unknown types
    multi = [f"{family}{uuid.uuid4().hex[:4]}.xlarge" for family in ("m", "c", "r")]
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "ec2.yaml").write_text(EC2_YAML.format(
        endpoint=endpoint or world.proxy.url, image=IMAGE, subnet=world.subnet,
        group=world.group, tight=tight, multi=multi))
    providers = tmp_path / "providers.json"
    providers.write_text('{"providers": [{"name": "aws", "type": "ec2", "confPath": "conf"}]}')
    context = ProviderContext(load_config_text(CLUSTER.format(cluster=cluster)), CONTROLLER,
                              str(tmp_path / "work"))
    built = build_providers(load_providers(providers), context)["aws"]
    assert isinstance(built, Ec2Provider)
    return Setup(built, cluster, tight, multi)


def grants(*names: str) -> list[HostGrant]:
    return [HostGrant(name, f"xcej_{uuid.uuid4().hex}") for name in names]


def described(world: World, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The instances as EC2 shows them (the test's own client, straight to moto)."""
    pages = world.ec2.get_paginator("describe_instances").paginate(InstanceIds=ids)
    return {i["InstanceId"]: i for page in pages for r in page["Reservations"]
            for i in r["Instances"]}


def tags(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def cluster_instances(world: World, cluster: str) -> list[dict[str, Any]]:
    pages = world.ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "tag:xce:cluster", "Values": [cluster]}])
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def refusal(call: Any, *args: Any) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        call(*args)
    return caught.value


# ---------------------------------------------------------------- describing
def test_describe_offers_the_catalog_shapes_with_the_ec2_settings(world: World,
                                                                   tmp_path: Path) -> None:
    offers = make(world, tmp_path).provider.describe()
    assert offers.provider == "aws" and offers.pools == ()
    assert offers.templates == (
        TemplateOffer("aws.od", 4, resources={"ssd": True, "scratch": 500.0}, max=3,
                      lead_time=90, cost_per_hour=0.192),
        TemplateOffer("aws.spot", 8, max=2, lead_time=60),  # ec2.yaml caps it below 5
        TemplateOffer("aws.tight", 2, max=4, lead_time=90),
        # no cost_per_hour: the dearest of its instance types (EC2 may give any)
        TemplateOffer("aws.multi", 2, max=4, lead_time=90, cost_per_hour=0.34),
    )


# ---------------------------------------------------------------- launching
def test_request_launches_one_tagged_instance_per_host(world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    hosts = grants("aws.od-1", "aws.od-2")
    made = setup.provider.request_hosts("prov-a-0001", "aws.od", hosts)
    assert [i.host for i in made] == ["aws.od-1", "aws.od-2"]
    assert all(i.state == "running" and i.cluster == setup.cluster and i.template == "aws.od"
               and i.request == "prov-a-0001" and i.started > 0 for i in made)
    assert len({i.id for i in made}) == 2
    seen = described(world, [i.id for i in made])
    for instance, grant in zip(made, hosts, strict=True):
        raw = seen[instance.id]
        assert tags(raw) == {"xce:cluster": setup.cluster, "xce:provider": "aws",
                             "xce:template": "aws.od", "xce:request": "prov-a-0001",
                             "xce:host": grant.name, "Name": grant.name, "team": "eda"}
        assert raw["InstanceType"] == "m5.xlarge" and raw["ImageId"] == IMAGE
        assert raw["SubnetId"] == world.subnet
        assert [g["GroupId"] for g in raw["SecurityGroups"]] == [world.group]
        assert raw.get("InstanceLifecycle") is None  # on-demand
    assert sorted(setup.provider.instances(), key=lambda i: i.host) == sorted(
        made, key=lambda i: i.host)


def test_user_data_starts_the_agent_of_its_host_with_its_token(world: World,
                                                               tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    hosts = grants("aws.od-7", "aws.od-8")
    made = setup.provider.request_hosts("prov-a-0002", "aws.od", hosts)
    for instance, grant in zip(made, hosts, strict=True):
        answer = world.ec2.describe_instance_attribute(InstanceId=instance.id,
                                                       Attribute="userData")
        script = base64.b64decode(answer["UserData"]["Value"]).decode()
        assert script.startswith("#!/bin/sh\n")
        assert f"printf '%s\\n' {grant.join_token} > \"$dir/join.token\"" in script
        other = next(g for g in hosts if g is not grant)
        assert other.join_token not in script  # each instance has only its own token
        agent = script[script.index("nohup "):]
        assert (f"xce agent --controller {CONTROLLER} --name {grant.name} \\\n"
                '    --token-file "$dir/join.token" --slots 4 --state-dir "$dir/agent" '
                "--resource ssd=true --resource scratch=500.0") in agent
        assert f"dir=/var/lib/xce/{grant.name}\n" in script
        checked = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True)
        assert checked.returncode == 0, checked.stderr


def user_data(world: World, instance: str) -> str:
    answer = world.ec2.describe_instance_attribute(InstanceId=instance, Attribute="userData")
    return base64.b64decode(answer["UserData"]["Value"]).decode()


def sent(world: World, request: str, host: str) -> list[dict[str, list[str]]]:
    """The RunInstances calls for `host` of `request`, as the provider sent them (seen
    by the proxy; its client token starts `request/host`)."""
    return [form for form in world.proxy.forms
            if form.get("ClientToken", [""])[0].startswith(f"{request}/{host}")]


def test_spot_template_launches_spot_instances(world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    [made] = setup.provider.request_hosts("prov-a-0003", "aws.spot", grants("aws.spot-1"))
    raw = described(world, [made.id])[made.id]
    assert raw["InstanceLifecycle"] == "spot"
    assert raw["InstanceType"] == "c5.2xlarge"
    assert tags(raw)["xce:template"] == "aws.spot"
    [form] = sent(world, "prov-a-0003", "aws.spot-1")
    assert form["InstanceMarketOptions.SpotOptions.MaxPrice"] == ["0.20"]
    assert "--spot-metadata http://169.254.169.254 " in user_data(world, made.id), \
        "a spot instance's agent reads EC2's interruption notice"
    [od] = setup.provider.request_hosts("prov-a-0004", "aws.od", grants("aws.od-1"))
    assert described(world, [od.id])[od.id].get("InstanceLifecycle") is None
    assert "--spot-metadata" not in user_data(world, od.id)


# ---------------------------------------------------------------- instance types
def test_instance_types_are_tried_in_order_past_capacity_errors(world: World,
                                                                 tmp_path: Path) -> None:
    """EC2 has no room for the first two types: both hosts come up as the third, and
    the second host does not ask again for the types that already had none."""
    setup = make(world, tmp_path)
    first, second, third = setup.multi
    world.proxy.room.update({first: 0, second: 0})
    made = setup.provider.request_hosts("prov-a-0010", "aws.multi",
                                        grants("aws.multi-1", "aws.multi-2"))
    seen = described(world, [i.id for i in made])
    assert [seen[i.id]["InstanceType"] for i in made] == [third, third]
    assert all(i.state == "running" for i in made)
    assert [world.proxy.refused.count(t) for t in (first, second)] == [1, 1]
    tried = [form["InstanceType"][0] for form in sent(world, "prov-a-0010", "aws.multi-1")]
    assert tried == [first, second, third], "in the order of instance_types"
    again = sent(world, "prov-a-0010", "aws.multi-2")
    assert [form["InstanceType"][0] for form in again] == [third]
    tokens = [form["ClientToken"][0] for form in sent(world, "prov-a-0010", "aws.multi-1")]
    assert tokens == ["prov-a-0010/aws.multi-1", f"prov-a-0010/aws.multi-1/{second}",
                      f"prov-a-0010/aws.multi-1/{third}"], "a fallback has its own token"


def test_no_room_in_any_instance_type_is_capacity_naming_every_type(world: World,
                                                                    tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    world.proxy.room.update({kind: 0 for kind in setup.multi})
    err = refusal(setup.provider.request_hosts, "prov-a-0011", "aws.multi",
                  grants("aws.multi-1"))
    assert err.kind == "capacity", "the provisioner backs the template off"
    text = str(err)
    assert text.startswith(f"RunInstances: template aws.multi: no capacity in any of its "
                           f"instance types ({', '.join(setup.multi)}): "), text
    for kind in setup.multi:
        assert f"RunInstances ({kind}): InsufficientInstanceCapacity: " in text, kind
    assert cluster_instances(world, setup.cluster) == []


def test_a_spot_template_sends_each_types_price_as_its_max_price(world: World,
                                                                 tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    first, second, _ = setup.multi
    world.proxy.room[first] = 0
    templates = tuple(msgspec.structs.replace(t, market="spot") if t.name == "aws.multi"
                      else t for t in setup.provider.config.templates)
    spot = Ec2Provider(msgspec.structs.replace(setup.provider.config, templates=templates))
    [made] = spot.request_hosts("prov-a-0012", "aws.multi", grants("aws.multi-1"))
    assert described(world, [made.id])[made.id]["InstanceLifecycle"] == "spot"
    prices = [(form["InstanceType"][0], form["InstanceMarketOptions.SpotOptions.MaxPrice"])
              for form in sent(world, "prov-a-0012", "aws.multi-1")]
    assert prices == [(first, ["0.34"]), (second, ["0.3"])]


def test_a_retried_request_starts_nothing_twice(world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    hosts = grants("aws.od-1", "aws.od-2")
    first = setup.provider.request_hosts("prov-a-0005", "aws.od", hosts[:1])
    before = world.proxy.launches.get("m5.xlarge", 0)
    again = setup.provider.request_hosts("prov-a-0005", "aws.od", hosts)
    assert again[0] == first[0]
    assert world.proxy.launches["m5.xlarge"] == before + 1  # only aws.od-2 was launched
    assert setup.provider.request_hosts("prov-a-0005", "aws.od", hosts) == again
    assert world.proxy.launches["m5.xlarge"] == before + 1
    by_host: dict[str, int] = {}
    for raw in cluster_instances(world, setup.cluster):
        by_host[tags(raw)["xce:host"]] = by_host.get(tags(raw)["xce:host"], 0) + 1
    assert by_host == {"aws.od-1": 1, "aws.od-2": 1}


def test_client_token_is_per_request_and_host_and_fits_ec2() -> None:
    assert client_token("c", "prov-a-1c9f02ab", "aws.c5-12") == "prov-a-1c9f02ab/aws.c5-12"
    long = client_token("c", "p" * 60, "aws.c5-12")
    assert len(long) == 64 and long == client_token("c", "p" * 60, "aws.c5-12")
    assert long != client_token("c", "p" * 60, "aws.c5-13")


def test_a_template_max_is_refused_as_capacity_before_any_launch(world: World,
                                                                 tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    setup.provider.request_hosts("r1", "aws.spot", grants("aws.spot-1"))
    before = world.proxy.launches.get("c5.2xlarge", 0)
    err = refusal(setup.provider.request_hosts, "r2", "aws.spot",
                  grants("aws.spot-2", "aws.spot-3"))
    assert err.kind == "capacity" and "at most 2" in str(err)
    assert world.proxy.launches.get("c5.2xlarge", 0) == before
    assert len(setup.provider.instances()) == 1


# ---------------------------------------------------------------- errors
def test_insufficient_capacity_is_capacity_and_leaves_nothing_running(
        world: World, tmp_path: Path) -> None:
    """EC2 launches the first host, then has no room for the second: the call
    terminates the first and raises `capacity`."""
    setup = make(world, tmp_path)
    world.proxy.room[setup.tight] = 1
    err = refusal(setup.provider.request_hosts, "prov-a-0006", "aws.tight",
                  grants("aws.tight-1", "aws.tight-2"))
    assert err.kind == "capacity"
    assert "InsufficientInstanceCapacity" in str(err) and setup.tight in str(err)
    assert world.proxy.refused.count(setup.tight) == 1
    [started] = cluster_instances(world, setup.cluster)
    assert tags(started)["xce:host"] == "aws.tight-1"
    assert started["State"]["Name"] == "terminated"
    assert [i.state for i in setup.provider.instances()] == ["gone"]
    # No room at all: the first launch is refused, nothing is started.
    world.proxy.room[setup.tight] = 0
    assert refusal(setup.provider.request_hosts, "prov-a-0007", "aws.tight",
                   grants("aws.tight-3")).kind == "capacity"
    assert len(cluster_instances(world, setup.cluster)) == 1


def test_other_refusals_are_request_errors(world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    assert refusal(setup.provider.request_hosts, "r", "loc", grants("loc-1")).kind == "request"
    assert refusal(setup.provider.request_hosts, "r", "aws.od",
                   grants("../x")).kind == "request"
    assert refusal(setup.provider.borrow, "vcs", 1.0).kind == "request"
    assert refusal(setup.provider.give_back, "vcs", 1.0).kind == "request"
    assert refusal(setup.provider.release, ["i-0123456789abcdef0"]).kind == "request"
    # EC2 refuses the launch itself (a subnet that does not exist).
    broken = Ec2Provider(with_subnet(setup.provider, "subnet-0000dead"))
    err = refusal(broken.request_hosts, "r", "aws.od", grants("aws.od-1"))
    assert err.kind == "request" and "InvalidSubnetID.NotFound" in str(err)
    assert cluster_instances(world, setup.cluster) == []


def with_subnet(provider: Ec2Provider, subnet: str) -> Any:
    templates = tuple(msgspec.structs.replace(t, subnet_id=subnet)
                      for t in provider.config.templates)
    return msgspec.structs.replace(provider.config, templates=templates)


def test_an_unreachable_endpoint_is_unavailable(world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path, endpoint=f"http://127.0.0.1:{free_port()}")
    assert refusal(setup.provider.instances).kind == "unavailable"
    assert refusal(setup.provider.request_hosts, "r", "aws.od",
                   grants("aws.od-1")).kind == "unavailable"


# ---------------------------------------------------------------- release, interruption
def test_release_terminates_and_refuses_other_instances(world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    made = setup.provider.request_hosts("r", "aws.od", grants("aws.od-1", "aws.od-2"))
    foreign = world.ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1)[
        "Instances"][0]["InstanceId"]
    err = refusal(setup.provider.release, [made[0].id, foreign])
    assert err.kind == "request" and foreign in str(err)
    assert {i["State"]["Name"] for i in described(world, [made[0].id, foreign]).values()} == {
        "running"}  # refused before anything stopped
    setup.provider.release([made[0].id])
    assert described(world, [made[0].id])[made[0].id]["State"]["Name"] == "terminated"
    states = {i.host: i.state for i in setup.provider.instances()}
    assert states == {"aws.od-1": "gone", "aws.od-2": "running"}
    setup.provider.release([made[0].id])  # again: nothing changes, no error
    world.ec2.terminate_instances(InstanceIds=[foreign])


def test_an_instance_terminated_behind_xces_back_is_gone(world: World, tmp_path: Path) -> None:
    """A spot interruption: EC2 takes the instance back; the next listing shows it
    gone (the provisioner then reports the host reclaimed: its jobs are requeued)."""
    setup = make(world, tmp_path)
    made = setup.provider.request_hosts("r", "aws.spot", grants("aws.spot-1", "aws.spot-2"))
    world.ec2.terminate_instances(InstanceIds=[made[1].id])
    listed = {i.host: i for i in setup.provider.instances()}
    assert listed["aws.spot-1"].state == "running"
    assert listed["aws.spot-2"] == Instance(made[1].id, setup.cluster, "aws.spot", "r",
                                            "aws.spot-2", "gone", made[1].started)
    # A retry of that request does not bring the interrupted host back (as EC2 answers
    # a launch retried with the same client token); a host of a new request does start.
    again = setup.provider.request_hosts("r", "aws.spot", grants("aws.spot-2"))
    assert again == [listed["aws.spot-2"]]


def test_an_instance_made_behind_xces_back_is_listed_for_reconciliation(
        world: World, tmp_path: Path) -> None:
    setup = make(world, tmp_path)
    [mine] = setup.provider.request_hosts("r", "aws.od", grants("aws.od-1"))

    def launch(tag_list: list[dict[str, str]]) -> str:
        specs = [{"ResourceType": "instance", "Tags": tag_list}] if tag_list else []
        reply = world.ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1,
                                        TagSpecifications=specs)
        return str(reply["Instances"][0]["InstanceId"])

    orphan = launch([{"Key": "xce:cluster", "Value": setup.cluster}])
    launch([{"Key": "xce:cluster", "Value": "another-cluster"}])
    launch([{"Key": "xce:cluster", "Value": setup.cluster},
            {"Key": "xce:provider", "Value": "aws-other"},
            {"Key": "xce:host", "Value": "x-1"}])  # another provider's business
    launch([])
    listed = {i.id: i for i in setup.provider.instances()}
    assert set(listed) == {mine.id, orphan}
    found = listed[orphan]
    assert (found.host, found.template, found.request, found.state) == ("", "", "", "running")
    setup.provider.release([orphan])  # what reconciliation does with it
    assert described(world, [orphan])[orphan]["State"]["Name"] == "terminated"


# ---------------------------------------------------------------- configuration
GOOD = {"region": "us-east-1",
        "templates": {"aws.od": {"instance_type": "m5.large", "image_id": "ami-1"},
                      "aws.spot": {"instance_type": "c5.large", "image_id": "ami-1",
                                   "market": "spot"},
                      "aws.tight": {"instance_type": "t3.small", "image_id": "ami-1"},
                      "aws.multi": {"instance_types": ["t3.small", "t3a.small"],
                                    "image_id": "ami-1"}}}


# A template entry with its image but no instance type yet (lines 1-4).
OD = "region: us-east-1\ntemplates:\n  aws.od:\n    image_id: ami-1\n"


@pytest.mark.parametrize(("text", "line", "field", "words"), [
    ("region: us-east-1\nregoin: x\n", 2, "regoin", "unknown key"),
    ("templates: {}\n", 1, "region", "missing required key"),
    ("region: us-east-1\ntemplates:\n  aws.od: {instance_type: m5.large}\n", 3,
     "templates.aws.od.image_id", "missing required key"),
    ("region: us-east-1\ntemplates:\n  aws.od:\n    instance_type: m5.large\n"
     "    image_id: ami-1\n    market: reserved\n", 6, "templates.aws.od.market",
     "on-demand, spot"),
    ("region: us-east-1\ntemplates:\n  aws.nope: {instance_type: m5.large, image_id: a}\n",
     3, "templates.aws.nope", "not in the cluster's catalog"),
    ("region: us-east-1\ntemplates:\n  aws.od: {instance_type: m5.large, image_id: a}\n",
     3, "templates", "aws.spot, aws.tight of provider aws have no entry"),
    ("region: us-east-1\nuser_data: |\n  #!/bin/sh\n  xce agent --name {{host}}\n", 2,
     "user_data", "must use {{token}}"),
    ("region: us-east-1\nuser_data: '{{host}} {{token}} {{hostname}}'\n", 2, "user_data",
     "unknown placeholder(s) {{hostname}}"),
    ("region: us-east-1\ntags: {'xce:cluster': x}\n", 2, "tags.xce:cluster", "reserved"),
    ("region: us-east-1\nmax_attempts: 0\n", 2, "max_attempts", ">= 1"),
    ("region: [us-east-1\n", 1, "", "invalid YAML"),
    (f"{OD}    instance_types: []\n", 5, "templates.aws.od.instance_types",
     "must list at least one instance type"),
    (f"{OD}    instance_types:\n      - m5.large\n      - 5\n", 7,
     "templates.aws.od.instance_types[1]", "expected an instance type or a mapping"),
    (f"{OD}    instance_types:\n      - {{type: m5.large, price: -0.5}}\n", 6,
     "templates.aws.od.instance_types[0].price", "price must be > 0, got -0.5"),
    (f"{OD}    instance_types:\n      - {{type: m5.large, cost: 1}}\n", 6,
     "templates.aws.od.instance_types[0].cost", "unknown key"),
    (f"{OD}    instance_types:\n      - {{price: 1}}\n", 6,
     "templates.aws.od.instance_types[0].type", "missing required key"),
    (f"{OD}    instance_types: [m5.large, m5.large]\n", 5,
     "templates.aws.od.instance_types[1]", "m5.large is listed twice"),
    (f"{OD}    instance_type: m5.large\n    instance_types: [m5.large]\n", 6,
     "templates.aws.od.instance_types", "not both"),
    (OD, 4, "templates.aws.od.instance_type", "or 'instance_types', a list"),
])
def test_bad_configuration_names_file_line_and_field(tmp_path: Path, text: str, line: int,
                                                     field: str, words: str) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "ec2.yaml").write_text(text)
    providers = tmp_path / "providers.yaml"
    providers.write_text("providers:\n  - {name: aws, type: ec2, confPath: conf}\n")
    context = ProviderContext(load_config_text(CLUSTER.format(cluster="c")), CONTROLLER,
                              str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        build_providers(load_providers(providers), context)
    err = caught.value
    assert (err.file, err.line, err.field) == (str(conf / "ec2.yaml"), line, field), str(err)
    assert words in err.message, str(err)


def test_the_providers_entry_needs_a_conf_path_with_one_ec2_file(tmp_path: Path) -> None:
    providers = tmp_path / "providers.yaml"
    context = ProviderContext(load_config_text(CLUSTER.format(cluster="c")), CONTROLLER,
                              str(tmp_path))
    providers.write_text("providers:\n  - {name: local, type: local}\n"
                         "  - {name: aws, type: ec2}\n")
    with pytest.raises(ConfigError) as caught:
        build_providers(load_providers(providers), context)
    assert (caught.value.file, caught.value.line, caught.value.field) == (
        str(providers), 3, "confPath")
    providers.write_text("providers:\n  - {name: aws, type: ec2, confPath: conf}\n")
    (tmp_path / "conf").mkdir()
    with pytest.raises(ConfigError, match=r"no ec2\.yaml or ec2\.yml or ec2\.json"):
        build_providers(load_providers(providers), context)
    (tmp_path / "conf" / "ec2.json").write_text(json.dumps(GOOD))
    built = build_providers(load_providers(providers), context)["aws"]
    assert isinstance(built, Ec2Provider) and built.config.region == "us-east-1"
    assert built.config.controller == CONTROLLER  # no controller_url: the provisioner's
    (tmp_path / "conf" / "ec2.yaml").write_text("region: x\n")
    with pytest.raises(ConfigError, match="keep one"):
        build_providers(load_providers(providers), context)
