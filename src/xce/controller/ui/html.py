"""HTML of the status page: escaping, tables, the page frame with its inline style and
its one small script (which only reloads the page), and the sign-in form.

Every value shown goes through `esc`; only `Html` (made here) is inserted as is. The
page is complete without the script; nothing is fetched from elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import html
import time
from collections.abc import Iterable, Sequence

from xce.controller.ui import SIGN_IN_PATH, SIGN_OUT_PATH, UI_PATH


class Html(str):
    """Markup made by this module: inserted without escaping."""

    __slots__ = ()

    def __add__(self, other: str) -> Html:
        """Markup followed by `other` (escaped unless markup)."""
        return Html(str.__add__(self, esc(other)))


def esc(value: object) -> Html:
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object]) -> Html:
    return Html("".join(esc(part) for part in parts))


def tag(name: str, body: object = "", **attrs: object) -> Html:
    """`<name attrs>body</name>`; an attribute `class_` is written `class`."""
    written = "".join(f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"'
                      for key, value in attrs.items() if value is not None)
    return Html(f"<{name}{written}>{esc(body)}</{name}>")


def number(value: float | None) -> str:
    """A count or an amount as a person reads it (1,234; 2.5)."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def span_of(seconds: float) -> str:
    """A duration: 45 s, 12 min, 3.5 h, 2.0 d."""
    seconds = abs(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def when(stamp: float | None, now: float) -> Html:
    """A time as the controller's local time, with how far from now it is."""
    if stamp is None:
        return Html("-")
    shown = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
    offset = stamp - now
    relative = "now" if abs(offset) < 1 else (
        f"in {span_of(offset)}" if offset > 0 else f"{span_of(offset)} ago")
    return tag("time", shown, title=relative) + tag("small", f" ({relative})")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, total: int,
          empty: str = "none") -> Html:
    """A table of `rows` (the first ones of `total`); says how many are not shown."""
    body = [tag("tr", join(tag("td", cell) for cell in row)) for row in rows]
    if not body:
        return tag("p", empty, class_="empty")
    head = tag("tr", join(tag("th", name, scope="col") for name in headers))
    note = Html("")
    if total > len(body):
        note = tag("p", f"showing the first {len(body):,} of {total:,}", class_="more")
    return tag("table", tag("thead", head) + tag("tbody", join(body))) + note


def section(anchor: str, title: str, summary: str, body: Html) -> Html:
    return tag("section", tag("h2", title) + tag("p", summary, class_="summary") + body,
               id=anchor)


STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
color:#1b1f24;background:#f4f6f8}
header{background:#1f3a5f;color:#fff;padding:10px 20px;display:flex;flex-wrap:wrap;
align-items:center;gap:6px 20px}
header h1{font-size:20px;margin:0}
header a,header button{color:#fff}
header form{margin:0}
header button{background:none;border:1px solid #9fb3cc;border-radius:4px;padding:2px 8px;
cursor:pointer;font:inherit}
nav a{margin-right:12px}
main{padding:4px 20px 20px}
section{background:#fff;border:1px solid #d5dbe1;border-radius:6px;margin:14px 0;
padding:6px 14px 12px}
h2{font-size:17px;margin:6px 0}
h3{font-size:14px;margin:10px 0 4px}
.summary{margin:2px 0 8px;color:#3b4856}
table{border-collapse:collapse;margin:4px 0 6px;font-size:13px}
th,td{border:1px solid #d5dbe1;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#e9eef3}
tbody tr:nth-child(even){background:#f8fafb}
td small,.more,.empty{color:#5d6b7a}
.empty{font-style:italic;margin:4px 0}
.grid{display:flex;flex-wrap:wrap;gap:0 28px}
.error{color:#a40e26;font-weight:600}
.signin{max-width:420px;margin:60px auto;background:#fff;border:1px solid #d5dbe1;
border-radius:6px;padding:14px 22px}
.signin input{width:100%;box-sizing:border-box;font:inherit;padding:5px;margin:6px 0 10px}
.signin button{font:inherit;padding:4px 16px}
"""

# The only script: reload the page every data-refresh seconds (the page works without).
SCRIPT = ("(function(){var s=+document.body.getAttribute('data-refresh');"
          "if(s>0){setTimeout(function(){location.reload();},s*1000);}})();")
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
# Nothing from elsewhere; inline style and the one script above; forms post here only.
CSP = ("default-src 'none'; style-src 'unsafe-inline'; "
       f"script-src 'sha256-{_SCRIPT_HASH}'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


def document(title: str, body: Html, refresh: int = 0) -> str:
    """The whole page; `refresh` seconds between reloads when scripts run (0: none)."""
    head = (Html('<meta charset="utf-8">')
            + Html('<meta name="viewport" content="width=device-width, initial-scale=1">')
            + tag("title", title) + tag("style", Html(STYLE)))
    script = tag("script", Html(SCRIPT)) if refresh else Html("")
    return "<!DOCTYPE html>\n" + tag(
        "html", tag("head", head) + tag("body", body + script, data_refresh=refresh),
        lang="en")


def sign_in_form(cluster: str, error: str = "") -> str:
    """The sign-in page: a token posted in the body, never in a URL."""
    form = tag(
        "form",
        tag("label", "Token", for_="token")
        + Html('<input id="token" name="token" type="password" autocomplete="off"'
               ' required autofocus>')
        + tag("button", "Sign in", type="submit"),
        method="post", action=SIGN_IN_PATH,
    )
    shown = tag("p", error, class_="error", role="alert") if error else Html("")
    hint = tag("p", "A token from `xce token add` (any role that may read the cluster).",
               class_="summary")
    body = tag("div", tag("h1", f"XCE {cluster}: sign in") + shown + form + hint,
               class_="signin")
    return document(f"XCE {cluster}: sign in", body)


def banner(cluster: str, who: str, refresh: int, links: Sequence[tuple[str, str]]) -> Html:
    """The page's header: who is signed in, the sections, Refresh and Sign out."""
    nav = tag("nav", join(tag("a", title, href=f"#{anchor}") for anchor, title in links))
    refreshing = f" · reloads every {refresh} s" if refresh else ""
    sign_out = tag("form", tag("button", "Sign out", type="submit"),
                   method="post", action=SIGN_OUT_PATH)
    return tag("header", tag("h1", f"XCE {cluster}") + nav
               + tag("span", f"{who}{refreshing}")
               + tag("a", "Refresh", href=UI_PATH, id="refresh") + sign_out)
