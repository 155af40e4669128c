"""The `ec2` provider: each expected host is an EC2 instance (on-demand or spot) started
through boto3, whose user data starts `xce agent` with the host's name and join token
(docs/providers/ec2.md).

Instances are tagged `xce:cluster`, `xce:provider`, `xce:template`, `xce:request`,
`xce:host` and `Name`; the tags are the provider's whole inventory (nothing is kept on
disk): `instances()` lists the cluster's instances by tag, so a restarted or
taking-over provisioner finds them, and an instance that carries the cluster's tag but
no host (made behind XCE's back) is listed with host "" for reconciliation to release.

A template's instance types are tried in their order, for each host: a capacity error
moves on to the next type (on-demand and spot alike; EC2 Fleet is not used, see
docs/providers/ec2.md), and the request is refused `capacity` only when every type
had none, with a message naming each type tried. A spot instance's user data makes
its agent watch EC2's interruption notice (`--spot-metadata`).

Errors: EC2's capacity codes (InsufficientInstanceCapacity, InstanceLimitExceeded,
SpotMaxPriceTooLow, MaxSpotInstanceCountExceeded, ...) are `capacity`; throttling,
EC2's server errors and every failure to reach the endpoint are `unavailable`; other
refusals are `request`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    ParamValidationError,
)

from xce.config.providers.ec2 import (
    USER_DATA_LIMIT,
    Ec2Config,
    Ec2Template,
    InstanceType,
    conf_file,
    load_ec2_config,
    render_user_data,
)
from xce.config.providers.file import ProviderSpec
from xce.provisioner.provider import (
    Description,
    HostGrant,
    Instance,
    InstanceState,
    ProviderError,
    TemplateOffer,
    grant_names,
    offered_template,
)
from xce.provisioner.registry import ProviderContext

log = logging.getLogger(__name__)

TAG_CLUSTER = "xce:cluster"
TAG_PROVIDER = "xce:provider"
TAG_TEMPLATE = "xce:template"
TAG_REQUEST = "xce:request"
TAG_HOST = "xce:host"

# EC2 has no room now: another template (by rank) or later.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "InstanceLimitExceeded", "VcpuLimitExceeded", "SpotMaxPriceTooLow",
    "MaxSpotInstanceCountExceeded", "UnfulfillableCapacity",
})
# EC2 cannot answer now: back off, retry.
UNAVAILABLE_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "InternalError",
    "InternalFailure", "ServiceUnavailable", "Unavailable",
})
LIVE_STATES = frozenset({"pending", "running"})
# Instances that still hold (or may again hold) capacity: they count toward a max.
HOLDING_STATES = frozenset({"pending", "running", "stopping", "stopped"})
CLIENT_TOKEN_MAX = 64


def from_spec(spec: ProviderSpec, context: ProviderContext) -> Ec2Provider:
    """An ec2 provider of the providers file: its configuration in
    `<confPath>/ec2.yaml` (or .json), its templates' shapes from the catalog."""
    path = conf_file(spec.conf_path, spec.file, spec.line, spec.name)
    return Ec2Provider(load_ec2_config(path, context.cluster, spec.name, context.controller))


class Ec2Provider:
    """Starts, lists and terminates the cluster's EC2 instances; lends no tokens."""

    def __init__(self, config: Ec2Config, client: Any = None) -> None:
        self.config = config
        self.templates = {t.name: t for t in config.templates}
        if client is None:
            session = boto3.session.Session(region_name=config.region)
            client = session.client(
                "ec2", endpoint_url=config.endpoint_url or None,
                config=Config(retries={"mode": "standard",
                                       "total_max_attempts": config.max_attempts},
                              connect_timeout=config.connect_timeout,
                              read_timeout=config.read_timeout),
            )
        self.client: Any = client

    def describe(self) -> Description:
        return Description(
            provider=self.config.provider,
            templates=tuple(
                TemplateOffer(
                    name=t.name, slots=t.shape.slots, type=t.shape.type, model=t.shape.model,
                    resources=t.shape.resources, max=t.limit,
                    lead_time=self.config.lead_time if t.lead_time is None else t.lead_time,
                    cost_per_hour=t.hourly_cost,
                )
                for t in self.config.templates
            ),
        )

    # ------------------------------------------------------------ hosts
    def request_hosts(self, request_id: str, template: str,
                      hosts: Sequence[HostGrant]) -> list[Instance]:
        """One RunInstances per host (each has its own user data: its own name and
        token). A host that already has an instance (not terminated; or terminated, of
        this very request) gets it back: a retried request starts nothing twice.
        Refused as a whole (`capacity`) when the template's max would be exceeded. If a
        launch fails, the instances this call started are terminated before the error
        is raised."""
        shape = self._template(template)
        names = grant_names(hosts)
        inventory = [raw for raw in self._describe() if _mine(raw, self.config)]
        have = _existing(inventory, set(names), request_id)
        new = [grant for grant in hosts if grant.name not in have]
        holding = sum(1 for raw in inventory if _tags(raw).get(TAG_TEMPLATE) == template
                      and _state_name(raw) in HOLDING_STATES)
        if new and shape.limit and holding + len(new) > shape.limit:
            raise ProviderError(
                "capacity", f"template {template}: {holding} of at most {shape.limit} "
                f"instances run, {len(new)} more cannot start")
        started: dict[str, Instance] = {}
        full: dict[str, ProviderError] = {}  # instance type -> its capacity refusal
        try:
            for grant in new:
                started[grant.name] = self._launch(request_id, shape, grant, full)
        except Exception as err:
            if started:
                ids = [i.id for i in started.values()]
                try:
                    self._terminate(ids)
                except ProviderError as cleanup:
                    err.add_note(f"and terminating {', '.join(ids)} failed: {cleanup}")
            raise
        return [started[name] if name in started else self._instance(have[name])
                for name in names]

    def release(self, instance_ids: Sequence[str]) -> None:
        """Terminate these instances. Only instances of this cluster (and of no other
        provider) are terminated; any other id is refused (`request`) before anything
        stops. Terminating an instance already terminated changes nothing."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return
        found = {raw["InstanceId"]: raw for raw in self._describe(ids)}
        refused = [i for i in ids if i not in found or not _mine(found[i], self.config)]
        if refused:
            raise ProviderError("request", f"not an instance of cluster {self.config.cluster} "
                                f"(provider {self.config.provider}): {', '.join(refused)}")
        live = [i for i in ids if _state_name(found[i]) != "terminated"]
        if live:
            self._terminate(live)

    def instances(self) -> list[Instance]:
        """Every instance tagged with this cluster (and no other provider), oldest
        first: `running` while pending or running, `gone` once stopping, stopped,
        shutting down or terminated (a spot interruption, a termination behind XCE's
        back). One without an `xce:host` tag is listed with host ""."""
        listed = [self._instance(raw) for raw in self._describe() if _mine(raw, self.config)]
        return sorted(listed, key=lambda i: (i.started, i.id))

    def _template(self, name: str) -> Ec2Template:
        return offered_template(self.templates, name, f"template {name}: not a template "
                                f"of provider {self.config.provider}", "its templates")

    def _launch(self, request_id: str, template: Ec2Template, grant: HostGrant,
                full: dict[str, ProviderError]) -> Instance:
        """One host's instance: the template's instance types in their order, each but
        those that already had no room in this request (`full`, which collects the
        capacity refusals); `capacity` naming every type tried when none had room. Any
        other failure is raised at once."""
        for kind in template.instance_types:
            if kind.name in full:
                continue
            try:
                return self._run(request_id, template, grant, kind)
            except ProviderError as err:
                if err.kind != "capacity":
                    raise
                full[kind.name] = err
                log.info("host %s: no capacity for %s (%s)", grant.name, kind.name, err)
        tried = ", ".join(t.name for t in template.instance_types)
        raise ProviderError(
            "capacity", f"RunInstances: template {template.name}: no capacity in any of its "
            f"instance types ({tried}): "
            + "; ".join(str(full[t.name]) for t in template.instance_types))

    def _run(self, request_id: str, template: Ec2Template, grant: HostGrant,
             kind: InstanceType) -> Instance:
        config = self.config
        user_data = render_user_data(config, template, request_id, grant.name,
                                     grant.join_token)
        if len(user_data.encode()) > USER_DATA_LIMIT:
            raise ProviderError("request", f"host {grant.name}: the user data has "
                                f"{len(user_data.encode())} bytes, EC2 takes {USER_DATA_LIMIT}")
        tags = {**config.tags, "Name": grant.name, TAG_CLUSTER: config.cluster,
                TAG_PROVIDER: config.provider, TAG_TEMPLATE: template.name,
                TAG_REQUEST: request_id, TAG_HOST: grant.name}
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        params: dict[str, Any] = {
            "ImageId": template.image_id,
            "InstanceType": kind.name,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": user_data,  # boto3 encodes it in base64
            "ClientToken": client_token(
                config.cluster, request_id, grant.name,
                "" if kind == template.instance_types[0] else kind.name),
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tag_list},
                                  {"ResourceType": "volume", "Tags": tag_list}],
            # The join token is in the user data: no IMDSv1 (SSRF) access to it.
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        }
        if template.subnet_id:
            params["SubnetId"] = template.subnet_id
        if template.security_group_ids:
            params["SecurityGroupIds"] = list(template.security_group_ids)
        if template.key_name:
            params["KeyName"] = template.key_name
        if template.iam_instance_profile:
            key = "Arn" if template.iam_instance_profile.startswith("arn:") else "Name"
            params["IamInstanceProfile"] = {key: template.iam_instance_profile}
        if template.market == "spot":
            spot: dict[str, str] = {"SpotInstanceType": "one-time",
                                    "InstanceInterruptionBehavior": "terminate"}
            price = template.spot_max_price if kind.price is None else repr(kind.price)
            if price:
                spot["MaxPrice"] = price
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot}
        reply = self._call(f"RunInstances ({kind.name})", self.client.run_instances, **params)
        made = reply.get("Instances") or []
        if len(made) != 1:
            raise ProviderError("unavailable", f"RunInstances for {grant.name} answered "
                                f"{len(made)} instances, not 1")
        raw = made[0]
        return Instance(id=raw["InstanceId"], cluster=config.cluster, template=template.name,
                        request=request_id, host=grant.name, state=_state(raw),
                        started=_launched(raw))

    def _terminate(self, ids: list[str]) -> None:
        self._call("TerminateInstances", self.client.terminate_instances, InstanceIds=ids)

    def _describe(self, ids: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
        """The cluster's instances (all of them, or those of `ids`), every page."""
        if ids:
            kwargs: dict[str, Any] = {"InstanceIds": list(ids)}
        else:
            kwargs = {"Filters": [{"Name": f"tag:{TAG_CLUSTER}",
                                   "Values": [self.config.cluster]}]}
        pages = self._call("DescribeInstances",
                           lambda: list(self.client.get_paginator("describe_instances")
                                        .paginate(**kwargs)))
        for page in pages:
            for reservation in page.get("Reservations", []):
                yield from reservation.get("Instances", [])

    def _instance(self, raw: dict[str, Any]) -> Instance:
        tags = _tags(raw)
        return Instance(id=raw["InstanceId"], cluster=tags.get(TAG_CLUSTER, ""),
                        template=tags.get(TAG_TEMPLATE, ""), request=tags.get(TAG_REQUEST, ""),
                        host=tags.get(TAG_HOST, ""), state=_state(raw), started=_launched(raw))

    def _call(self, action: str, call: Callable[..., Any], **kwargs: Any) -> Any:
        """One EC2 call; its failure as a ProviderError of the right kind."""
        try:
            return call(**kwargs)
        except ClientError as err:
            error = err.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            message = f"{action}: {code}: {error.get('Message', '')}"
            if code in CAPACITY_CODES:
                raise ProviderError("capacity", message) from err
            if code in UNAVAILABLE_CODES or status >= 500:
                raise ProviderError("unavailable", message) from err
            raise ProviderError("request", message) from err
        except ParamValidationError as err:  # refused by botocore before it is sent
            raise ProviderError("request", f"{action}: {err}") from err
        except BotoCoreError as err:  # unreachable, timed out, no credentials, ...
            raise ProviderError("unavailable", f"{action}: {err}") from err

    # ------------------------------------------------------------ tokens
    def borrow(self, pool: str, amount: float) -> float:
        raise ProviderError("request", f"pool {pool}: provider {self.config.provider} "
                            "(ec2) lends no tokens")

    def lent(self) -> dict[str, float]:
        """It lends no tokens."""
        return {}

    def give_back(self, pool: str, amount: float) -> None:
        raise ProviderError("request", f"pool {pool}: provider {self.config.provider} "
                            "(ec2) lends no tokens")


def client_token(cluster: str, request_id: str, host: str, instance_type: str = "") -> str:
    """RunInstances' idempotency token for one host of one request (EC2 takes at most 64
    ASCII characters): a launch retried by botocore after a lost answer starts nothing
    twice. `instance_type`: a fallback type (not the template's first), whose launch
    has parameters of its own and so a token of its own."""
    plain = f"{request_id}/{host}" + (f"/{instance_type}" if instance_type else "")
    if len(plain) <= CLIENT_TOKEN_MAX and plain.isascii() and plain.isprintable():
        return plain
    parts = [cluster, request_id, host] + ([instance_type] if instance_type else [])
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _existing(inventory: list[dict[str, Any]], names: set[str],
              request_id: str) -> dict[str, dict[str, Any]]:
    """Host -> the instance it already has: one not terminated, else a terminated one
    of this very request (as EC2 answers a launch retried with the same client token)."""
    have: dict[str, dict[str, Any]] = {}
    for raw in inventory:
        tags = _tags(raw)
        host = tags.get(TAG_HOST, "")
        if host not in names:
            continue
        if _ended(raw):
            if host not in have and tags.get(TAG_REQUEST) == request_id:
                have[host] = raw
        elif host not in have or _ended(have[host]):
            have[host] = raw
    return have


def _mine(raw: dict[str, Any], config: Ec2Config) -> bool:
    """Tagged with this cluster, and with this provider or with none (made behind
    XCE's back): another provider's instances are its own business."""
    tags = _tags(raw)
    return (tags.get(TAG_CLUSTER) == config.cluster
            and tags.get(TAG_PROVIDER, config.provider) == config.provider)


def _tags(raw: dict[str, Any]) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in raw.get("Tags") or []}


def _ended(raw: dict[str, Any]) -> bool:
    return _state_name(raw) in ("shutting-down", "terminated")


def _state_name(raw: dict[str, Any]) -> str:
    return str(raw.get("State", {}).get("Name", ""))


def _state(raw: dict[str, Any]) -> InstanceState:
    return "running" if _state_name(raw) in LIVE_STATES else "gone"


def _launched(raw: dict[str, Any]) -> float:
    launched = raw.get("LaunchTime")
    return launched.timestamp() if isinstance(launched, datetime) else 0.0
