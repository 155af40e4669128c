"""EC2's spot interruption notice, read from the instance metadata service (IMDSv2) by
the agent of a spot instance (docs/agent.md#spot-interruption-notices).

EC2 warns a spot instance two minutes before it takes it back: the metadata document
`latest/meta-data/spot/instance-action` appears (`{"action": "terminate", "time":
"2026-12-01T08:22:00Z"}`); until then it is 404. The agent asks every few seconds
(with a session token, PUT `latest/api/token` first, as IMDSv2 requires) and, on a
notice, tells the controller at once, which closes the host and requeues its jobs
while the machine is still there.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import aiohttp

TOKEN_PATH = "/latest/api/token"
NOTICE_PATH = "/latest/meta-data/spot/instance-action"
TOKEN_TTL = 21600  # s, the most IMDSv2 gives
NOTICE_LEAD = 120.0  # s: EC2's warning, when the notice's time cannot be read
ACTIONS = ("terminate", "stop", "hibernate")


class MetadataError(Exception):
    """The metadata service could not be read, or answered what no notice looks like."""


class SpotWatch:
    """Reads the interruption notice of this instance from the metadata service at
    `base_url` (http://169.254.169.254 on EC2)."""

    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")
        self.token = ""  # IMDSv2 session token, fetched again when it expires

    async def reclaim_at(self, http: aiohttp.ClientSession) -> float | None:
        """When EC2 takes the instance back (epoch seconds); None while there is no
        notice. MetadataError when the service cannot say."""
        url = self.base + NOTICE_PATH
        try:
            for _ in range(2):
                if not self.token:
                    self.token = await self._session_token(http)
                async with http.get(url, headers={"X-aws-ec2-metadata-token": self.token},
                                    allow_redirects=False) as answer:
                    status, body = answer.status, await answer.read()
                if status != 401:
                    break
                self.token = ""  # expired: once more with a new one
        except (aiohttp.ClientError, TimeoutError) as err:
            raise MetadataError(f"{url}: {str(err) or type(err).__name__}") from err
        if status == 404:
            return None
        if status != 200:
            raise MetadataError(f"{url}: HTTP {status}")
        return notice_time(body, time.time(), url)

    async def _session_token(self, http: aiohttp.ClientSession) -> str:
        url = self.base + TOKEN_PATH
        headers = {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL)}
        async with http.put(url, headers=headers, allow_redirects=False) as answer:
            body = await answer.read()
            if answer.status != 200 or not body.strip():
                raise MetadataError(f"{url}: HTTP {answer.status}: no session token")
        return body.decode(errors="replace").strip()


def notice_time(body: bytes, now: float, url: str = NOTICE_PATH) -> float:
    """The time of a notice document; `now` + two minutes when it names none that can
    be read. MetadataError for what is not a notice."""
    try:
        notice = json.loads(body)
    except ValueError:
        raise MetadataError(f"{url}: not a JSON document: {body[:100]!r}") from None
    if not isinstance(notice, dict) or notice.get("action") not in ACTIONS:
        raise MetadataError(f"{url}: not a notice (an action of {', '.join(ACTIONS)}): "
                            f"{body[:100]!r}")
    try:
        when = datetime.fromisoformat(str(notice.get("time")))
    except ValueError:
        return now + NOTICE_LEAD
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # EC2's times are UTC
    return when.timestamp()
