"""``setup_dashboard(app)``: the login form, the static assets and every page and action of
``/_x`` on the api's application (``ujobs.services.api.app.create_app`` calls it).

| Route | Does |
|---|---|
| ``GET /_x/`` | queues for an operator, jobs for a tenant token |
| ``GET, POST /_x/login`` | the token form (same-origin POSTs only); ``read`` sets the cookie |
| ``POST /_x/logout`` | drops the cookie (CSRF-checked) |
| ``GET /_x/static/…`` | the stylesheet and the script shipped in this package |
| the pages and actions | ``pages``, ``pages_backfills``, ``_webhooks``, ``_exports``, ``actions`` |
| any other path under ``/_x`` | an HTML 404 in the dashboard's layout (``not_found``) |
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from ujobs.errors import UltimateError
from ujobs.services.api.auth import UnauthorizedError
from ujobs.services.dashboard import actions, pages, pages_backfills, pages_exports, pages_webhooks
from ujobs.services.dashboard.not_found import html_not_found
from ujobs.services.dashboard.render import ENV, environment, page
from ujobs.services.dashboard.session import (
    COOKIE,
    PREFIX,
    CsrfError,
    check_csrf,
    check_origin,
    cookie_secret,
    principal_for,
    safe_next,
    set_login_cookie,
    viewer,
)
from ujobs.services.dashboard.views import guarded

log = logging.getLogger("ujobs.dashboard")

STATIC = Path(__file__).parent / "static"
ASSETS = {p.name: p for p in STATIC.iterdir() if p.is_file()}
"""The files shipped in ``static/``, by name: only these are served (no path is joined from
the URL), and any other name is the dashboard's HTML 404."""

routes = web.RouteTableDef()


@routes.get(PREFIX)
@routes.get(PREFIX + "/")
@guarded
async def index(request: web.Request) -> web.StreamResponse:
    principal, _ = await viewer(request)
    raise web.HTTPSeeOther(PREFIX + ("/queues" if principal.operator else "/jobs"))


@routes.get(PREFIX + "/login")
async def login_form(request: web.Request) -> web.Response:
    return page(request, "login.html", next=safe_next(request.query.get("next")), message=None)


@routes.post(PREFIX + "/login")
async def login(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    target = safe_next(str(form.get("next", "")))
    secret = str(form.get("token", "")).strip()
    try:
        check_origin(request)
        if not secret:
            raise UnauthorizedError(
                "paste a token (`ujobs tokens create --operator --scopes read,operate`)"
            )
        principal = await principal_for(request, secret)
        principal.require("read")
    except UltimateError as exc:
        log.info("ujobs.dashboard.login-refused", extra={"code": exc.code})
        status = 403 if isinstance(exc, CsrfError) else 401
        return page(request, "login.html", next=target, message=exc.message, status=status)
    log.info(
        "ujobs.dashboard.login",
        extra={"token": principal.token_id, "tenant": principal.tenant_id},
    )
    response = web.Response(status=303, headers={"Location": target})
    set_login_cookie(response, request, secret)
    return response


@routes.post(PREFIX + "/logout")
@guarded
async def logout(request: web.Request) -> web.StreamResponse:
    secret = cookie_secret(request)
    if secret is not None:
        check_csrf(request, {k: str(v) for k, v in (await request.post()).items()}, secret)
    response = web.Response(status=303, headers={"Location": PREFIX + "/login"})
    response.del_cookie(COOKIE, path=PREFIX)
    return response


async def asset(request: web.Request) -> web.StreamResponse:
    found = ASSETS.get(request.match_info["name"])
    if found is None:
        raise web.HTTPNotFound()
    return web.FileResponse(found)


def setup_dashboard(app: web.Application) -> None:
    """Register ``/_x`` on the api's application."""
    app[ENV] = environment()
    app.add_routes(routes)
    app.add_routes(pages.routes)
    app.add_routes(pages_backfills.routes)
    pages_webhooks.install(app)
    app.add_routes(pages_exports.routes)
    app.add_routes(actions.routes)
    app.middlewares.append(html_not_found)
    app.router.add_get(PREFIX + "/static/{name}", asset)


__all__ = ["routes", "setup_dashboard"]
