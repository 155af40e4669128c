"""The status page served by the controller at `/ui` (docs/ui.md): read-only HTML
rendered by the server from the API's own builders, signed in with a token (an
`Authorization` header, or a session cookie set by the sign-in form).

This module names the page's paths only; the API's middleware leaves their
authentication to the page's handlers (routes.py), which import the API.
"""

from __future__ import annotations

UI_PATH = "/ui"
SIGN_IN_PATH = "/ui/signin"
SIGN_OUT_PATH = "/ui/signout"


def is_ui_path(path: str) -> bool:
    """Whether the page's handlers authenticate this request themselves."""
    return path == UI_PATH or path.startswith(UI_PATH + "/")
