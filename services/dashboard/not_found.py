"""An unknown path under ``/_x`` answers an HTML 404 in the dashboard's layout (with its
navigation when the viewer is logged in) instead of the api's JSON envelope; a known path asked
with a method it does not serve answers an HTML 405 the same way. ``/v1`` and every other path
keep their JSON errors: the middleware lets anything outside ``/_x`` through untouched.
"""

from __future__ import annotations

from aiohttp import web

from ujobs.errors import UltimateError
from ujobs.services.api.auth import UnauthorizedError
from ujobs.services.dashboard.render import page
from ujobs.services.dashboard.session import PREFIX, cookie_secret, principal_for
from ujobs.services.dashboard.views import Handler


class PageNotFoundError(UltimateError):
    """No dashboard page lives at this path (404)."""

    code = "X_NOT_FOUND"


class MethodNotAllowedError(UltimateError):
    """A dashboard path asked with a method it does not serve (405)."""

    code = "X_METHOD_NOT_ALLOWED"


def under_dashboard(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


async def _page(request: web.Request, error: UltimateError, status: int) -> web.Response:
    """The page, with the navigation of whoever the cookie names (none for a dead cookie or
    a token that may not read)."""
    principal = secret = None
    found = cookie_secret(request)
    if found is not None:
        try:
            principal, secret = await principal_for(request, found), found
        except UnauthorizedError:
            principal = secret = None
        if principal is not None and not principal.allows("read"):
            principal = secret = None
    return page(
        request,
        "not_found.html",
        principal=principal,
        secret=secret,
        status=status,
        code=error.code,
        message=error.message,
    )


@web.middleware
async def html_not_found(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not under_dashboard(request.path):
        return await handler(request)
    try:
        return await handler(request)
    except web.HTTPNotFound:
        missing = PageNotFoundError(
            f"no dashboard page lives at {request.path}; the sections are linked above",
            meta={"path": request.path},
        )
        return await _page(request, missing, 404)
    except web.HTTPMethodNotAllowed as exc:
        refused = MethodNotAllowedError(
            f"{request.method} is not served at {request.path}; "
            f"it answers {', '.join(sorted(exc.allowed_methods))}",
            meta={"path": request.path, "method": request.method},
        )
        return await _page(request, refused, 405)


__all__ = ["MethodNotAllowedError", "PageNotFoundError", "html_not_found", "under_dashboard"]
