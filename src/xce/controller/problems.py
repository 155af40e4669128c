"""Refused requests: what the controller answers when it changes nothing."""

from __future__ import annotations

import logging
from typing import NoReturn

from xce.controller.auth import Identity

log = logging.getLogger("xce.controller")


class ApiProblem(Exception):
    """A request the controller refuses: HTTP status and a message. Nothing changed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def refuse(who: Identity, status: int, message: str, level: int = logging.WARNING) -> NoReturn:
    """Refuse a request, logged with who and why."""
    log.log(level, "refused %s %s: %s", who.role, who.name, message)
    raise ApiProblem(status, message)
