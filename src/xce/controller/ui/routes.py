"""The status page's routes: `GET /ui`, `POST /ui/signin`, `POST /ui/signout`.

`GET /ui` takes `Authorization: Bearer <token>` (as the API does) or the session
cookie the sign-in form sets. Without either a browser (Accept: text/html) gets the
sign-in form and an API client the API's JSON error, both with 401. The token is
posted in the form's body, never taken from a URL. The cookie authenticates `/ui`
only (it is HttpOnly, SameSite=Strict, Path=/ui), never the API.
"""

from __future__ import annotations

from aiohttp import web

from xce.controller import app as api
from xce.controller.auth import Identity, token_digest
from xce.controller.problems import ApiProblem
from xce.controller.ui import SIGN_IN_PATH, SIGN_OUT_PATH, UI_PATH
from xce.controller.ui.html import CSP, sign_in_form
from xce.controller.ui.sessions import COOKIE, TTL, SignIns
from xce.controller.ui.status import ROWS, status_page

SIGN_INS = web.AppKey("ui_sign_ins", SignIns)
REFRESH = 15  # seconds between reloads, by default (`?refresh=N`, 0: never)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


def page(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html",
                        charset="utf-8", headers=HEADERS)


def see_page() -> web.Response:
    """303 to the page (after a form: reloading it does not post again)."""
    return web.Response(status=303, headers={**HEADERS, "Location": UI_PATH})


def wants_html(request: web.Request) -> bool:
    return "text/html" in request.headers.get("Accept", "")


def cluster_name(request: web.Request) -> str:
    return request.app[api.CONTROLLER].view.config.cluster


def refused(request: web.Request, message: str) -> web.Response:
    """401: the sign-in form for a browser, the API's JSON error for a client."""
    if wants_html(request):
        return page(sign_in_form(cluster_name(request)), 401)
    return api.problem(401, message)


def reader(who: Identity) -> Identity:
    if who.role not in api.READERS:
        raise ApiProblem(403, f"role {who.role} may not read the status page")
    return who


def signed_in(request: web.Request) -> Identity | None:
    """Who the session cookie names, while their token is still valid."""
    cookie = request.cookies.get(COOKIE, "")
    sign_ins = request.app[SIGN_INS]
    found = sign_ins.find(cookie) if cookie else None
    if found is None:
        return None
    who = request.app[api.TOKENS].identify_digest(found.digest)
    if who is None or (who.name, who.role) != (found.name, found.role):
        sign_ins.close(cookie)  # the token was revoked
        return None
    return who


def whole(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiProblem(400, f"{name} must be a whole number in {low}..{high}")
    return int(raw)


async def show(request: web.Request) -> web.StreamResponse:
    """The status page (`?rows=N` rows per table, `?refresh=S` seconds)."""
    if "Authorization" in request.headers:
        who = api.authenticate(request)  # (a bad token: the API's 401)
    else:
        found = signed_in(request)
        if found is None:
            return refused(request, "authentication required: Authorization: Bearer "
                                    f"<token>, or sign in at {UI_PATH}")
        who = found
    rows = whole(request, "rows", ROWS, 1, 10_000)
    refresh = whole(request, "refresh", REFRESH, 0, 3600)
    return page(status_page(request.app[api.CONTROLLER], reader(who), rows, refresh))


async def sign_in(request: web.Request) -> web.StreamResponse:
    """The form's token: a session cookie and back to the page, else the form again."""
    form = await request.post()
    token = str(form.get("token", "")).strip()
    who = request.app[api.TOKENS].identify(token) if token else None
    cluster = cluster_name(request)
    if who is None:
        return page(sign_in_form(cluster, "Unknown or revoked token."), 401)
    if who.role not in api.READERS:
        return page(sign_in_form(cluster, f"Role {who.role} may not read the status page."),
                    403)
    value = request.app[SIGN_INS].open(who.name, who.role, token_digest(token))
    response = see_page()
    response.set_cookie(COOKIE, value, path=UI_PATH, max_age=int(TTL), httponly=True,
                        samesite="Strict", secure=request.secure)
    return response


async def sign_out(request: web.Request) -> web.StreamResponse:
    request.app[SIGN_INS].close(request.cookies.get(COOKIE, ""))
    response = see_page()
    response.del_cookie(COOKIE, path=UI_PATH)
    return response


def add_ui_routes(app: web.Application) -> None:
    app[SIGN_INS] = SignIns()
    app.router.add_get(UI_PATH, show)
    app.router.add_post(SIGN_IN_PATH, sign_in)
    app.router.add_post(SIGN_OUT_PATH, sign_out)
