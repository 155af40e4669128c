"""What `xce provisioner status` shows of an instance, rewritten after every round:
its leases, the hosts it requested that have not joined, the open requests of the
providers it holds (each with the jobs it was made for), its recent decisions, and
the hosts of its providers' templates that are running, with their hourly cost when
templates have prices."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from xce.model.cluster import HostTemplate
from xce.model.cost import RUNNING_STATES, costs, template_prices


class Decision(msgspec.Struct, frozen=True):
    time: float
    action: str
    detail: str
    reason: str
    outcome: str
    jobs: list[int] = []  # a RequestHosts: the jobs the demand was for


class RequestStatus(msgspec.Struct, frozen=True):
    """An open request of a leased provider, as the controller keeps it."""

    request: str
    provider: str
    template: str
    count: int
    state: str
    jobs: list[int] = []  # the jobs it was made for, in scheduling order


class Status(msgspec.Struct, frozen=True):
    """A provisioner instance's status, rewritten after every round."""

    name: str
    time: float
    leases: dict[str, int]  # provider -> fencing token held
    expected: list[str]  # hosts requested, not joined yet
    decisions: list[Decision]
    requests: list[RequestStatus] = []
    running: dict[str, int] = {}  # template -> its hosts running (RUNNING_STATES)
    cost: dict[str, float] = {}  # template -> hourly cost of those (with prices)
    cost_total: float = 0.0  # the hourly cost of all of them


def running_hosts(
    hosts: Iterable[Mapping[str, Any]], templates: Iterable[HostTemplate]
) -> tuple[dict[str, int], dict[str, float], float]:
    """Per template of `templates` (configuration order) with hosts running (the
    controller's `GET /hosts` answers: provisioned, joined and up), how many; their
    hourly cost per template (count x price) and in all, when templates have prices."""
    templates = list(templates)
    count = dict.fromkeys((t.name for t in templates), 0)
    for host in hosts:
        name = host.get("template")
        if name in count and host.get("state") in RUNNING_STATES:
            count[name] += 1
    running = {name: n for name, n in count.items() if n}
    prices = template_prices(templates)
    if not prices or not running:
        return running, {}, 0.0
    each, total = costs(running, prices)
    return running, each, total


def request_status(answer: Mapping[str, Any]) -> RequestStatus:
    """A request of the controller's answer (RequestInfo as JSON)."""
    return RequestStatus(answer["request"], answer["provider"], answer["template"],
                         int(answer["count"]), answer["state"],
                         [int(j) for j in answer.get("jobs", [])])


def open_requests(answers: Iterable[Mapping[str, Any]]) -> list[RequestStatus]:
    """The requests of `answers` in order, each once (the latest answer wins)."""
    found: dict[str, RequestStatus] = {}
    for answer in answers:
        found[answer["request"]] = request_status(answer)
    return list(found.values())


def write_status(path: Path, status: Status) -> None:
    """Replace the status file at once (a reader never sees half of it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(status))
    os.replace(tmp, path)
