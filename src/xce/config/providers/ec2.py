"""The `ec2` provider's configuration, `<confPath>/ec2.yaml` (or `.json`), and the user
data each instance boots with (docs/providers/ec2.md).

```yaml
region: us-east-1
endpoint_url: http://127.0.0.1:5000     # optional: moto, a VPC endpoint
controller_url: https://xce.example:6820  # optional: the URL agents join
metadata_url: http://169.254.169.254     # optional: where spot agents read their notice
templates:
  aws.c5: {instance_type: c5.4xlarge, image_id: ami-0abc, subnet_id: subnet-0abc,
           security_group_ids: [sg-0abc], market: spot, max: 20, cost_per_hour: 0.68}
  aws.c6:                                 # several types of one shape, tried in order
    instance_types: [c6i.4xlarge, {type: c5.4xlarge, price: 0.68}]
    image_id: ami-0abc
```

A template's shape (slots, type, model, resources) comes from the cluster file's
catalog: the templates whose `provider` is this provider's name. Every problem is a
ConfigError naming file, line and field. Nothing here needs boto3: the simulator reads
it too (`xce.sim.provider_kinds`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

from xce.config import ConfigError, MarkedMap, load_yaml_file
from xce.config.fields import MapReader, Place, as_list, as_text, describe
from xce.model.cluster import ClusterConfig, HostTemplate, ResourceValue

CONF_NAMES = ("ec2.yaml", "ec2.yml", "ec2.json")
Market = Literal["on-demand", "spot"]
MARKETS: tuple[Market, ...] = ("on-demand", "spot")

# `{{name}}` in the user data template; each becomes one shell word, already quoted
# (`command`, `resources` and `spot_notice` excepted: see PLACEHOLDERS).
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
PLACEHOLDERS: dict[str, str] = {
    "controller": "the controller URL the agent joins (quoted)",
    "host": "the expected host's name (quoted)",
    "token": "its single-use join token (quoted)",
    "slots": "the template's slots",
    "resources": "`--resource NAME=VALUE` flags of the template's resources (quoted)",
    "template": "the template's name (quoted)",
    "cluster": "the cluster's name (quoted)",
    "request": "the provisioner's request id (quoted)",
    "agent_dir": "`agent_dir` of the configuration (quoted)",
    "command": "`agent_command` of the configuration, verbatim",
    "spot_notice": "`--spot-metadata URL` for a spot template (the agent then drains its "
                   "host on EC2's interruption notice), else nothing",
}
REQUIRED_PLACEHOLDERS = ("host", "token")
USER_DATA_LIMIT = 16384  # bytes EC2 accepts before base64
# The instance metadata service, where a spot instance's agent reads its interruption
# notice (IMDSv2).
METADATA_URL = "http://169.254.169.254"

DEFAULT_USER_DATA = """\
#!/bin/sh
# Made by XCE's ec2 provider: this machine joins cluster {{cluster}} as host {{host}}
# (template {{template}}, request {{request}}).
set -eu
umask 077
dir={{agent_dir}}/{{host}}
mkdir -p "$dir/agent"
printf '%s\\n' {{token}} > "$dir/join.token"
cd "$dir"
nohup {{command}} agent --controller {{controller}} --name {{host}} \\
    --token-file "$dir/join.token" --slots {{slots}} --state-dir "$dir/agent" {{resources}} \\
    {{spot_notice}} >> "$dir/agent.log" 2>&1 < /dev/null &
"""

_TOP_KEYS = ("region", "endpoint_url", "controller_url", "templates", "user_data",
             "agent_dir", "agent_command", "tags", "lead_time", "max_attempts",
             "connect_timeout", "read_timeout", "metadata_url")
_TEMPLATE_KEYS = ("instance_type", "instance_types", "image_id", "subnet_id",
                  "security_group_ids", "market", "spot_max_price", "key_name",
                  "iam_instance_profile", "max", "cost_per_hour", "lead_time")
_RESERVED_TAG = "xce:"
_TYPE_KEYS = ("type", "price")


class InstanceType(msgspec.Struct, frozen=True):
    """One instance type a template may be launched as, and what an hour of it may
    cost: a spot launch's MaxPrice for that type (None: the template's
    `spot_max_price`, else the on-demand price); for on-demand, what it costs."""

    name: str
    price: float | None = None


class Ec2Template(msgspec.Struct, frozen=True):
    """One template as EC2 makes it: the launch parameters, and its shape from the
    cluster's catalog."""

    shape: HostTemplate  # name, slots, type, model, resources, max
    instance_types: tuple[InstanceType, ...]  # in the order they are tried (at least one)
    image_id: str
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    market: Market = "on-demand"
    spot_max_price: str = ""  # "" : the on-demand price caps the spot price
    key_name: str = ""
    iam_instance_profile: str = ""  # a name, or an ARN
    max: int | None = None  # most instances at once (None: the catalog's max)
    cost_per_hour: float | None = None
    lead_time: float | None = None  # None: the provider's

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def limit(self) -> int:
        """The most instances of the template the provider runs at once (0: no limit
        of its own)."""
        if self.max is None:
            return self.shape.max
        return self.max if self.shape.max == 0 else min(self.max, self.shape.max)

    @property
    def hourly_cost(self) -> float | None:
        """What `describe()` reports: `cost_per_hour`, else the dearest of the types
        when every one has a price (any of them may be what EC2 has), else unknown."""
        if self.cost_per_hour is not None:
            return self.cost_per_hour
        prices = [t.price for t in self.instance_types]
        if any(price is None for price in prices):
            return None
        return max(price for price in prices if price is not None)


class Ec2Config(msgspec.Struct, frozen=True):
    """What an ec2 provider serves and how it reaches EC2."""

    provider: str  # its name in the providers file and the catalog
    cluster: str
    controller: str  # the URL the agents join
    region: str
    templates: tuple[Ec2Template, ...] = ()
    endpoint_url: str = ""
    user_data: str = DEFAULT_USER_DATA
    agent_dir: str = "/var/lib/xce"
    agent_command: str = "xce"
    tags: dict[str, str] = {}  # extra tags on every instance and volume
    lead_time: float = 120.0  # typical seconds from request to joined host (describe())
    max_attempts: int = 3  # botocore's attempts per call (standard retry mode)
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    metadata_url: str = METADATA_URL  # "" : spot agents do not watch for a notice
    file: str = ""  # where it was read from, for messages


def conf_file(conf_path: str, spec_file: str, spec_line: int, provider: str) -> Path:
    """`<confPath>/ec2.yaml` (or .yml, .json), or ConfigError at the providers entry."""
    if not conf_path:
        raise ConfigError(spec_file, spec_line, "confPath",
                          f"provider {provider}: the ec2 provider needs a confPath "
                          f"(a directory holding {CONF_NAMES[0]})")
    directory = Path(conf_path)
    found = [directory / name for name in CONF_NAMES if (directory / name).is_file()]
    if not found:
        raise ConfigError(spec_file, spec_line, "confPath",
                          f"provider {provider}: no {' or '.join(CONF_NAMES)} in {directory}")
    if len(found) > 1:
        raise ConfigError(spec_file, spec_line, "confPath",
                          f"provider {provider}: both {found[0].name} and {found[1].name} "
                          f"in {directory}: keep one")
    return found[0]


def load_ec2_config(path: str | Path, cluster: ClusterConfig, provider: str,
                    controller: str) -> Ec2Config:
    """The configuration in `path` for provider `provider` of `cluster`, or ConfigError."""
    filename = str(path)
    root = load_yaml_file(path)
    if root is None:
        root = MarkedMap(1)
    top = MapReader(root, Place(filename, 1, ""), _TOP_KEYS)
    region = top.text("region")
    defaults = Ec2Config(provider=provider, cluster=cluster.cluster, controller=controller,
                         region=region)
    user_data = top.text("user_data", DEFAULT_USER_DATA)
    _check_user_data(user_data, top.value_place("user_data"))
    tags: dict[str, str] = {}
    if (tags_section := top.section("tags")) is not None:
        tags = _read_tags(*tags_section)
    settings = {
        "controller": top.text("controller_url", controller),
        "endpoint_url": top.text("endpoint_url", ""),
        "agent_dir": top.text("agent_dir", defaults.agent_dir),
        "agent_command": top.text("agent_command", defaults.agent_command),
        "lead_time": top.number("lead_time", defaults.lead_time, minimum=0),
        "max_attempts": top.integer("max_attempts", defaults.max_attempts, minimum=1),
        "connect_timeout": top.number("connect_timeout", defaults.connect_timeout,
                                      positive=True),
        "read_timeout": top.number("read_timeout", defaults.read_timeout, positive=True),
        "metadata_url": top.text("metadata_url", defaults.metadata_url, nonempty=False),
    }
    shapes = {t.name: t for t in cluster.catalog.templates if t.provider == provider}
    templates = _read_templates(top, shapes, provider)
    return msgspec.structs.replace(defaults, templates=templates, user_data=user_data,
                                   tags=tags, file=filename, **settings)


def _read_templates(top: MapReader, shapes: Mapping[str, HostTemplate],
                    provider: str) -> tuple[Ec2Template, ...]:
    section = top.section("templates")
    if section is None:
        if shapes:
            top.key_place("templates").fail(
                f"missing: the catalog has templates of provider {provider} "
                f"({', '.join(sorted(shapes))})")
        return ()
    entries = MapReader(*section)
    templates: list[Ec2Template] = []
    for key, value, place in entries.items():
        name = str(key)
        shape = shapes.get(name)
        if shape is None:
            served = ", ".join(sorted(shapes)) or "none"
            entries.key_place(key).fail(
                f"template {name} is not in the cluster's catalog with provider {provider} "
                f"(its templates of provider {provider}: {served})")
        templates.append(_read_template(MapReader(value, place, _TEMPLATE_KEYS), shape))
    missing = sorted(set(shapes) - {t.name for t in templates})
    if missing:
        entries.place.fail(f"the catalog's template(s) {', '.join(missing)} of provider "
                           f"{provider} have no entry here")
    return tuple(templates)


def _read_template(entry: MapReader, shape: HostTemplate) -> Ec2Template:
    market = entry.text("market", "on-demand")
    if market not in MARKETS:
        entry.value_place("market").fail(f"expected one of {', '.join(MARKETS)}, "
                                          f"got {market!r}")
    groups: list[str] = []
    if (groups_section := entry.section("security_group_ids")) is not None:
        groups = [as_text(item, place) for item, place in as_list(*groups_section)]
    spot_price = entry.get("spot_max_price")
    if isinstance(spot_price, int | float) and not isinstance(spot_price, bool):
        spot_price = repr(float(spot_price))  # EC2 takes the price as a string
    elif spot_price is not None:
        spot_price = as_text(spot_price, entry.value_place("spot_max_price"))
    if spot_price and market != "spot":
        entry.value_place("spot_max_price").fail("only a spot template has a spot price")
    return Ec2Template(
        shape=shape,
        instance_types=_read_instance_types(entry),
        image_id=entry.text("image_id"),
        subnet_id=entry.text("subnet_id", ""),
        security_group_ids=tuple(groups),
        market="spot" if market == "spot" else "on-demand",
        spot_max_price=spot_price or "",
        key_name=entry.text("key_name", ""),
        iam_instance_profile=entry.text("iam_instance_profile", ""),
        max=entry.optional_integer("max", minimum=0),
        cost_per_hour=entry.optional_number("cost_per_hour", minimum=0),
        lead_time=entry.optional_number("lead_time", minimum=0),
    )


def _read_instance_types(entry: MapReader) -> tuple[InstanceType, ...]:
    """`instance_type: T`, or `instance_types: [T, {type: T, price: P}, ...]` (tried in
    that order), never both."""
    if "instance_types" not in entry:
        if "instance_type" not in entry:
            entry.value_place("instance_type").fail(
                "missing required key 'instance_type' (or 'instance_types', a list)")
        return (InstanceType(entry.text("instance_type")),)
    listed = entry.value_place("instance_types")
    if "instance_type" in entry:
        listed.fail("give instance_type or instance_types, not both")
    items = as_list(entry.get("instance_types"), listed)
    if not items:
        listed.fail("must list at least one instance type")
    types: list[InstanceType] = []
    for item, place in items:
        if isinstance(item, str):
            kind = InstanceType(as_text(item, place))
        elif isinstance(item, dict):
            fields = MapReader(item, place, _TYPE_KEYS)
            price = fields.optional_number("price")
            if price is not None and price <= 0:
                fields.value_place("price").fail(f"price must be > 0, got {price:g}")
            kind = InstanceType(fields.text("type"), price)
        else:
            place.fail(f"expected an instance type or a mapping {{type: T, price: P}}, "
                       f"got {describe(item)}")
        if any(t.name == kind.name for t in types):
            place.fail(f"instance type {kind.name} is listed twice")
        types.append(kind)
    return tuple(types)


def _read_tags(value: object, place: Place) -> dict[str, str]:
    section = MapReader(value, place)
    tags: dict[str, str] = {}
    for key, item, item_place in section.items():
        name = str(key)
        if name.lower().startswith(_RESERVED_TAG) or name.lower().startswith("aws:"):
            section.key_place(key).fail(f"tag {name}: keys starting xce: or aws: are "
                                        "reserved")
        if name == "Name":
            section.key_place(key).fail("tag Name: XCE sets it (the host's name)")
        tags[name] = as_text(item, item_place, nonempty=False)
    return tags


def _check_user_data(text: str, place: Place) -> None:
    used = set(PLACEHOLDER.findall(text))
    unknown = sorted(used - set(PLACEHOLDERS))
    if unknown:
        place.fail(f"unknown placeholder(s) {', '.join('{{' + u + '}}' for u in unknown)} "
                   f"(known: {', '.join(PLACEHOLDERS)})")
    missing = [name for name in REQUIRED_PLACEHOLDERS if name not in used]
    if missing:
        place.fail(f"the user data must use {' and '.join('{{' + m + '}}' for m in missing)}: "
                   "the agent joins as its host with its token")


def render_user_data(config: Ec2Config, template: Ec2Template, request: str, host: str,
                     token: str) -> str:
    """The user data of one instance: the template with every placeholder replaced."""
    shape = template.shape
    values = {
        "controller": shlex.quote(config.controller),
        "host": shlex.quote(host),
        "token": shlex.quote(token),
        "slots": str(shape.slots),
        "resources": " ".join(f"--resource {shlex.quote(f'{k}={flag_value(v)}')}"
                              for k, v in shape.resources.items()),
        "template": shlex.quote(shape.name),
        "cluster": shlex.quote(config.cluster),
        "request": shlex.quote(request),
        "agent_dir": shlex.quote(config.agent_dir),
        "command": config.agent_command,
        "spot_notice": (f"--spot-metadata {shlex.quote(config.metadata_url)}"
                        if template.market == "spot" and config.metadata_url else ""),
    }
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], config.user_data)


def flag_value(value: ResourceValue) -> str:
    """A resource value as `xce agent --resource` reads it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(float(value))
