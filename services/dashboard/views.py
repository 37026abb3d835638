"""What every dashboard handler shares: ``guarded`` turns an ``X_…`` error into an HTML page
(with the status the JSON edge answers) instead of the api's JSON envelope."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from ujobs.errors import UltimateError
from ujobs.services.dashboard.render import error_page
from ujobs.services.dashboard.session import VIEWER

FLASHES = {
    "retry": "Job re-queued.",
    "retry-from-step": "Job re-queued from the chosen step.",
    "cancel": "Job cancelled.",
    "promote": "Job promoted: due now.",
    "queue-pause": "Queue paused.",
    "queue-resume": "Queue resumed.",
    "task-pause": "Task paused.",
    "task-resume": "Task resumed.",
    "endpoint-disable": "Endpoint disabled: nothing is delivered to it until it is enabled.",
    "endpoint-enable": "Endpoint enabled: new deliveries go to it again.",
}
"""What an action's redirect (``?done=<action>``) says on the next page; nothing else shows."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def guarded(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except UltimateError as exc:
            seen = request.get(VIEWER)
            if seen is None:
                return error_page(request, exc)
            return error_page(request, exc, seen.principal, seen.secret)

    return wrapped


def flash(request: web.Request) -> str | None:
    return FLASHES.get(request.query.get("done", ""))


__all__ = ["FLASHES", "Handler", "flash", "guarded"]
