"""What `xce provisioner status` shows of an instance, rewritten after every round:
its leases, the hosts it requested that have not joined, the open requests of the
providers it holds (each with the jobs it was made for) and its recent decisions."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec


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
