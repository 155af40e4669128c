"""The provisioner's side of the controller's API: one authenticated JSON call, with
the fencing token of the provider's lease when the call acts for a provider."""

from __future__ import annotations

from typing import Any

import aiohttp

from xce.model.api import FENCING_HEADER


class ControllerRefused(Exception):
    """The controller answered 4xx/5xx: nothing changed there."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ControllerClient:
    """Calls the controller as one provisioner; `fences` holds the fencing token of
    each provider lease it holds (sent with the calls made for that provider)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
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
        async with self.session.request(method, self.url + path, json=body,
                                        headers=headers) as answer:
            data = await answer.json(content_type=None)
            if answer.status >= 400:
                message = data.get("error", "") if isinstance(data, dict) else str(data)
                raise ControllerRefused(answer.status, message)
            return data
