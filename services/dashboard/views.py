"""What every dashboard handler shares: ``guarded`` turns an ``X_…`` error into an HTML page
(with the status the JSON edge answers) instead of the api's JSON envelope."""

from __future__ import annotations

import functools
import re
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
    "remove": "Job deleted.",
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


BULK_FLASHES = {
    "retry-many": "re-queued",
    "cancel-many": "cancelled",
    "remove-many": "deleted",
}
"""A bulk action's redirect (``?done=<action>-many&moved=N&refused=M&codes=X_A,X_B``): how many
jobs moved, and how many did not with their codes (each checked against the code pattern)."""

_CODE = re.compile(r"X_[A-Z_]{1,60}")


def _count(value: str | None) -> int:
    return int(value) if value and value.isdigit() and len(value) <= 4 else 0


def flash(request: web.Request) -> str | None:
    done = request.query.get("done", "")
    if done not in BULK_FLASHES:
        return FLASHES.get(done)
    moved, refused = _count(request.query.get("moved")), _count(request.query.get("refused"))
    said = f"{moved} job{'s' if moved != 1 else ''} {BULK_FLASHES[done]}."
    if refused:
        codes = [c for c in request.query.get("codes", "").split(",") if _CODE.fullmatch(c)]
        said += f" {refused} not moved" + (f" ({', '.join(codes)})." if codes else ".")
    return said


__all__ = ["FLASHES", "Handler", "flash", "guarded"]
