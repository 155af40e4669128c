"""A controller restart gives every host a fresh grace period: the time the controller
was down counts neither toward `--unreach-after` (a host that was ok) nor toward
`--requeue-after` (a host already unreach), since no agent could reach it meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

from xce.config.loader import load_config_text
from xce.controller.core import Controller, Settings
from xce.controller.store import SqliteStore
from xce.model.api import RegisterRequest

CONFIG = """\
cluster: t
hosts:
  - {name: n1, slots: 2}
  - {name: n2, slots: 2}
"""
SETTINGS = Settings(heartbeat_interval=2, unreach_after=10, requeue_after=60)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_downtime_does_not_count_against_hosts(tmp_path: Path) -> None:
    clock = Clock()

    def controller() -> Controller:
        return Controller(load_config_text(CONFIG), SqliteStore(tmp_path / "xce.db"),
                          SETTINGS, clock)

    def states(ctl: Controller) -> dict[str, str]:
        return {name: host.state for name, host in ctl.view.hosts.items()}

    async def test() -> None:
        first = controller()
        await first.start()
        for name in ("n1", "n2"):
            await first.register(name, RegisterRequest(slots=2))
        clock.now += 8
        await first.register("n2", RegisterRequest(slots=2))  # n2 heartbeats later
        clock.now += 3  # n1 silent for 11 s, n2 for 3 s
        await first.watch_hosts()
        assert states(first) == {"n1": "unreach", "n2": "ok"}
        await first.close()
        first.store.close()

        clock.now += 100  # down longer than requeue_after and unreach_after
        second = controller()
        await second.start()
        await second.watch_hosts()
        assert states(second) == {"n1": "unreach", "n2": "ok"}, "downtime counted"
        clock.now += 9
        await second.watch_hosts()
        assert states(second) == {"n1": "unreach", "n2": "ok"}
        clock.now += 2  # 11 s since the restart
        await second.watch_hosts()
        assert states(second) == {"n1": "unreach", "n2": "unreach"}
        clock.now += 50  # 61 s since the restart: n1 is lost, n2 only 50 s unreach
        await second.watch_hosts()
        assert states(second) == {"n1": "lost", "n2": "unreach"}
        await second.close()
        second.store.close()

    asyncio.run(test())
