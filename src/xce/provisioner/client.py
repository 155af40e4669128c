"""The provisioner's side of the controller's API: one authenticated JSON call, with
the fencing token of the provider's lease when the call acts for a provider."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from xce.model.api import FENCING_HEADER
from xce.model.controllers import ControllerAddresses


class ControllerRefused(Exception):
    """The controller answered 4xx/5xx: nothing changed there."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ControllerClient:
    """Calls the controller as one provisioner; `fences` holds the fencing token of
    each provider lease it holds (sent with the calls made for that provider)."""

    def __init__(self, url: str, token: str) -> None:
        self.controllers = ControllerAddresses(url)  # (several: docs/ha.md)
        self.token = token
        self.fences: dict[str, int] = {}  # provider -> fencing token of our lease
        self.session: aiohttp.ClientSession | None = None

    async def call(self, method: str, path: str, body: Any = None,
                   provider: str | None = None) -> Any:
        """The decoded JSON answer, or ControllerRefused."""
        assert self.session is not None
        headers = {"Authorization": f"Bearer {self.token}"}
        if provider is not None and provider in self.fences:
            headers[FENCING_HEADER] = str(self.fences[provider])
        controllers = self.controllers
        for _ in range(2):  # a standby's answer is followed (once) to the leader it names
            try:
                async with self.session.request(method, controllers.current + path, json=body,
                                                headers=headers) as answer:
                    payload = await answer.read()
            except (aiohttp.ClientError, TimeoutError):
                controllers.unreachable()  # (the next round calls the next one)
                raise
            if not controllers.redirected(answer.status, payload):
                break
        if controllers.standby(answer.status, payload):
            controllers.unreachable()  # (no leader yet: another may know)
        data = json.loads(payload) if payload else None
        if answer.status >= 400:
            message = data.get("error", "") if isinstance(data, dict) else str(data)
            raise ControllerRefused(answer.status, message)
        return data
