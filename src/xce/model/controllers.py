"""Where a client finds the controller when several share a PostgreSQL log (a leader and
its standbys, docs/ha.md): `--controller URL1,URL2` (or `$XCE_CONTROLLER`) names them;
a client calls one, follows a standby's answer to the leader it names (503, `NotLeader`)
and, when one does not answer, tries the next. The CLI, the agents and the provisioners
all follow the leader with this one class."""

from __future__ import annotations

import msgspec

from xce.model.api import NotLeader

_not_leader = msgspec.json.Decoder(NotLeader)


class ControllerAddresses:
    """The controllers' URLs (`spec`: comma-separated) and the one to call now."""

    def __init__(self, spec: str) -> None:
        self.urls = [url.strip().rstrip("/") for url in spec.split(",") if url.strip()]
        if not self.urls:
            raise ValueError(f"no controller URL in {spec!r}")
        self.current = self.urls[0]

    @property
    def several(self) -> bool:
        return len(self.urls) > 1

    def redirected(self, status: int, payload: bytes) -> bool:
        """After an answer: when it is a standby's naming the leader, call the leader
        from now on (True: ask it again; nothing changed at the standby)."""
        if status != 503:
            return False
        try:
            leader = _not_leader.decode(payload).leader.rstrip("/")
        except msgspec.DecodeError:
            return False
        if not leader or leader == self.current:
            return False
        if leader not in self.urls:
            self.urls.append(leader)
        self.current = leader
        return True

    @staticmethod
    def standby(status: int, payload: bytes) -> bool:
        """The answer is a standby's (no controller leads yet while it takes over)."""
        if status != 503:
            return False
        try:
            _not_leader.decode(payload)
        except msgspec.DecodeError:
            return False
        return True

    def unreachable(self) -> None:
        """The current one did not answer: the next one from now on."""
        at = self.urls.index(self.current) if self.current in self.urls else -1
        self.current = self.urls[(at + 1) % len(self.urls)]
