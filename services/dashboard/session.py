"""Who is looking at the dashboard: the token in the login cookie, and the CSRF token its forms
carry.

The cookie holds the token's secret (HttpOnly, so no script reads it; SameSite=Strict, so no
other site's page sends it; Secure behind TLS) and is checked against the token store on every
request, like a bearer header: a revoke or an expiry holds from the next click on. Every POST
but the login carries ``csrf``, an HMAC of a fixed label keyed by the secret, so a form another
origin builds cannot name it. Every POST, the login included (it has no cookie yet, so no CSRF
token: without this check another site could log the browser in as the attacker), is refused
when its ``Origin`` is another host or ``null`` (a sandboxed frame, a ``data:`` page, a
redirect across sites): the dashboard's own forms always name its origin, since every page
goes out with ``Referrer-Policy: same-origin``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web
from yarl import URL

from ujobs.errors import UltimateError
from ujobs.services.api.auth import Principal, UnauthorizedError, authenticate
from ujobs.services.api.common import EDGE

COOKIE = "ujobs_x"
PREFIX = "/_x"
_CSRF_LABEL = b"ujobs dashboard csrf v1"


@dataclass(frozen=True, slots=True)
class Viewer:
    principal: Principal
    secret: str


VIEWER = web.RequestKey("ujobs_x_viewer", Viewer)
"""Who is viewing, once ``viewer`` has read the cookie (the error page's navigation reads it)."""


class CsrfError(UltimateError):
    """A dashboard POST without the page's CSRF token, or sent from another origin (403)."""

    code = "X_FORBIDDEN"


def csrf_token(secret: str) -> str:
    # A cookie's garbage (bytes that are not UTF-8 arrive as surrogates) keys a token that
    # matches nothing, rather than failing the request.
    return hmac.new(secret.encode(errors="replace"), _CSRF_LABEL, hashlib.sha256).hexdigest()


def cookie_secret(request: web.Request) -> str | None:
    secret = request.cookies.get(COOKIE)
    return secret or None


async def principal_for(request: web.Request, secret: str) -> Principal:
    """The token behind ``secret``, read from the store now (``X_UNAUTHORIZED`` when gone)."""
    edge = request.app[EDGE]
    return await authenticate(edge.tokens, f"Bearer {secret}", edge.driver.clock.now_ms())


async def viewer(request: web.Request) -> tuple[Principal, str]:
    """The logged-in principal and its secret; no or a dead cookie goes to the login form."""
    secret = cookie_secret(request)
    if secret is None:
        raise web.HTTPSeeOther(login_url(request))
    try:
        principal = await principal_for(request, secret)
    except UnauthorizedError:
        gone = web.HTTPSeeOther(login_url(request))
        gone.del_cookie(COOKIE, path=PREFIX)
        raise gone from None
    principal.require("read")
    request[VIEWER] = Viewer(principal, secret)
    return principal, secret


def login_url(request: web.Request) -> str:
    target = request.rel_url.path_qs if request.method == "GET" else PREFIX + "/"
    return str(URL(PREFIX + "/login").with_query(next=target))


def safe_next(raw: str | None) -> str:
    """Where to go after logging in: a path under the dashboard, never another site."""
    if not raw or not raw.startswith(PREFIX + "/") or raw.startswith("//"):
        return PREFIX + "/"
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc:
        return PREFIX + "/"
    return raw


def check_origin(request: web.Request) -> None:
    """A POST whose ``Origin`` (or, lacking one, ``Referer``) is ``null`` or names another
    host is refused; one with neither (a script, not a browser) passes."""
    origin = request.headers.get("Origin") or request.headers.get("Referer")
    if origin is None:
        return
    if origin == "null" or urlsplit(origin).netloc != request.host:
        raise CsrfError(
            "this form was sent from another site; open the dashboard and try again",
            meta={"origin": origin},
        )


def check_csrf(request: web.Request, form: Mapping[str, str], secret: str) -> None:
    check_origin(request)
    sent = form.get("csrf", "")
    if not hmac.compare_digest(sent.encode(errors="replace"), csrf_token(secret).encode()):
        raise CsrfError(
            "the form's CSRF token is missing or stale; reload the page and try again",
            meta={"field": "csrf"},
        )


def set_login_cookie(response: web.StreamResponse, request: web.Request, secret: str) -> None:
    response.set_cookie(
        COOKIE,
        secret,
        path=PREFIX,
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )


__all__ = [
    "COOKIE",
    "PREFIX",
    "VIEWER",
    "CsrfError",
    "Viewer",
    "check_csrf",
    "check_origin",
    "cookie_secret",
    "csrf_token",
    "login_url",
    "principal_for",
    "safe_next",
    "set_login_cookie",
    "viewer",
]
