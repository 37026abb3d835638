"""The dashboard's Jinja2 environment (autoescaped, templates read from this package) and its
filters: an instant becomes a ``<time>`` the page's script shows in the viewer's zone, with
UTC on hover; a duration reads like the CLI's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from ujobs.errors import UltimateError
from ujobs.introspect import short_id
from ujobs.services.api.auth import Principal
from ujobs.services.api.common import status_for
from ujobs.services.dashboard.session import PREFIX, csrf_token
from ujobs.services.redact import redact_text
from ujobs.services.runtime.output import duration

ENV = web.AppKey("dashboard_env", jinja2.Environment)

FAMILY_STATUS = {
    "X_EXPORT_NOT_FOUND": 404,
    "X_WEBHOOK_ENDPOINT_UNKNOWN": 404,
    "X_WEBHOOK_ENDPOINT_INVALID": 400,
}
"""The statuses of the families' codes the dashboard shows (the api's own table lacks them:
their routes answer them themselves)."""


def utc_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def instant(ms: int | None) -> Markup:
    """``<time>`` of epoch milliseconds: UTC in the text and the title; the script rewrites
    the text into the viewer's zone and keeps UTC on hover."""
    if ms is None:
        return Markup('<span class="none">—</span>')
    text = utc_text(ms)
    iso = datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return Markup('<time datetime="{}" data-ms="{}" title="{}">{}</time>').format(
        iso, ms, text, text
    )


def span(ms: int | None) -> str:
    return duration(ms) or "—"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ujobs.services.dashboard", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["instant"] = instant
    env.filters["span"] = span
    env.filters["short"] = short_id
    env.globals["prefix"] = PREFIX
    return env


def page(
    request: web.Request,
    template: str,
    *,
    principal: Principal | None = None,
    secret: str | None = None,
    status: int = 200,
    **context: Any,
) -> web.Response:
    """``template`` rendered with who is viewing and the CSRF token their forms carry."""
    html = (
        request.app[ENV]
        .get_template(template)
        .render(
            principal=principal,
            csrf=csrf_token(secret) if secret else "",
            path=request.path,
            **context,
        )
    )
    return web.Response(
        text=html,
        status=status,
        content_type="text/html",
        headers={
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
            "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
            "Referrer-Policy": "same-origin",
        },
    )


def error_page(
    request: web.Request,
    error: UltimateError,
    principal: Principal | None = None,
    secret: str | None = None,
) -> web.Response:
    """An ``X_…`` error as a page, with the status the JSON edge would answer."""
    return page(
        request,
        "error.html",
        principal=principal,
        secret=secret,
        status=FAMILY_STATUS.get(error.code) or status_for(error.code),
        code=error.code,
        message=redact_text(error.message),
    )


__all__ = ["ENV", "environment", "error_page", "instant", "page", "span", "utc_text"]
