"""Sessions of the status page: the cookie the sign-in form sets.

The cookie holds a random session id and its HMAC (a key made when the controller
starts), never the token: the session, kept in memory only, holds who signed in and
the SHA-256 digest of their token, and ends when it expires, on sign-out, when the
token is revoked, or when the controller restarts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

import msgspec

COOKIE = "xce_session"
TTL = 8 * 3600.0  # seconds a session lasts from its sign-in
MAX_SESSIONS = 10_000  # the oldest go first beyond this


class UiSession(msgspec.Struct, frozen=True):
    name: str
    role: str
    digest: str  # of the token signed in with (re-checked on every request)
    expires: float


class SignIns:
    """The page's open sessions, by session id."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._key = secrets.token_bytes(32)
        self._clock = clock
        self._open: dict[str, UiSession] = {}  # in sign-in order

    def _mac(self, sid: str) -> str:
        return hmac.new(self._key, sid.encode(), hashlib.sha256).hexdigest()

    def open(self, name: str, role: str, digest: str) -> str:
        """A new session; the cookie's value."""
        now = self._clock()
        self._drop_expired(now)
        while len(self._open) >= MAX_SESSIONS:
            del self._open[next(iter(self._open))]
        sid = secrets.token_urlsafe(24)
        self._open[sid] = UiSession(name, role, digest, now + TTL)
        return f"{sid}.{self._mac(sid)}"

    def find(self, cookie: str) -> UiSession | None:
        """The session of a cookie's value, or None (forged, unknown or expired)."""
        sid = self._sid(cookie)
        found = self._open.get(sid) if sid else None
        if found is None:
            return None
        if found.expires <= self._clock():
            del self._open[sid]
            return None
        return found

    def close(self, cookie: str) -> None:
        sid = self._sid(cookie)
        if sid:
            self._open.pop(sid, None)

    def _sid(self, cookie: str) -> str:
        """The session id of a well-signed cookie value, else ""."""
        sid, _, mac = cookie.partition(".")
        return sid if sid and hmac.compare_digest(mac, self._mac(sid)) else ""

    def _drop_expired(self, now: float) -> None:
        for sid in [s for s, found in self._open.items() if found.expires <= now]:
            del self._open[sid]
