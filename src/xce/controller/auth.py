"""Authentication: bearer tokens, stored hashed, each with a role and a name.

The token file (`STATE/tokens.json`) lists `{"name", "role", "sha256"}` entries; the
tokens themselves are shown once, when made (`xce init`, `xce token add`), and never
stored. The controller re-reads the file when it changes, so a token added or revoked
on the controller host takes effect at the next request. The name is who the caller
is: a user's name, an agent's host name.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
from pathlib import Path

import msgspec

from xce.model.api import ROLES

TOKENS_FILE = "tokens.json"


class AuthError(Exception):
    """The token file cannot be read or a token cannot be made."""


class Identity(msgspec.Struct, frozen=True):
    name: str
    role: str
    fence: int | None = None  # the fencing token a provisioner sent with its request


class TokenEntry(msgspec.Struct, frozen=True):
    name: str
    role: str
    sha256: str


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The token file of one state directory."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / TOKENS_FILE
        self._stamp: tuple[int, int] | None = None
        self._by_digest: dict[str, Identity] = {}

    def entries(self) -> list[TokenEntry]:
        if not self.path.exists():
            return []
        try:
            return msgspec.json.decode(self.path.read_bytes(), type=list[TokenEntry])
        except (OSError, msgspec.DecodeError) as err:
            raise AuthError(f"{self.path}: cannot read the token file: {err}") from err

    def identify(self, token: str) -> Identity | None:
        """Who holds `token`, or None for an unknown token."""
        return self.identify_digest(token_digest(token))

    def identify_digest(self, digest: str) -> Identity | None:
        """Who holds the token of this SHA-256 digest (hex), or None: a status page
        session keeps the digest, never the token, and ends with the token."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._by_digest = {e.sha256: Identity(e.name, e.role) for e in self.entries()}
            self._stamp = stamp
        return self._by_digest.get(digest)

    def add(self, name: str, role: str) -> str:
        """Make a token for `name` in `role`; returns the token (shown only now)."""
        if role not in ROLES:
            raise AuthError(f"unknown role '{role}' (one of {', '.join(ROLES)})")
        if not name:
            raise AuthError("a token needs a name")
        token = "xce_" + secrets.token_urlsafe(32)
        self._write([*self.entries(), TokenEntry(name, role, token_digest(token))])
        return token

    def revoke(self, name: str, role: str | None = None) -> int:
        """Remove every token of `name` (in `role` when given); how many were removed."""
        entries = self.entries()
        kept = [e for e in entries if not (e.name == name and role in (None, e.role))]
        self._write(kept)
        return len(entries) - len(kept)

    def _write(self, entries: list[TokenEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tokens.")
        with os.fdopen(fd, "wb") as out:
            out.write(msgspec.json.format(msgspec.json.encode(entries)))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
