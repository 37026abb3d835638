"""Queues and tasks over HTTP: the functions ``ujobs queues`` and ``ujobs tasks`` call.

| Route | Scope | Answers (the CLI's ``--json`` document) |
|---|---|---|
| ``GET /v1/queues`` | ``read`` | ``{"queues": [...]}``: rows per state, due, oldest due, paused |
| ``GET /v1/queues/{q}`` | ``read`` | one queue, plus ``tenants``: most due jobs first |
| ``POST /v1/queues/{q}/pause`` · ``/resume`` | ``operate`` | ``{"queues": [q], "paused"}`` |
| ``GET /v1/tasks`` | ``read`` | ``{"tasks": [...]}``: cron, zone, last and next fire, paused |
| ``POST /v1/tasks/{t}/pause`` · ``/resume`` | ``operate`` | ``{"tasks": [t], "paused"}`` |

A queue or a task is every tenant's at once, so these need an operator token (403 for a
tenant token, whatever its scopes).
"""

from __future__ import annotations

from aiohttp import web

from ujobs.errors import InputInvalidError, TaskUnknownError
from ujobs.introspect import inspect_queue, inspect_queues, pause_queues, pause_tasks
from ujobs.jobs.declaration_rules import NAME_PATTERN
from ujobs.services.api.common import EDGE, REGISTRY, caller, json_ok
from ujobs.services.api.task_rows import fires_and_pauses, task_rows

routes = web.RouteTableDef()


async def _operator(request: web.Request, scope: str, what: str) -> None:
    principal = await caller(request, scope)
    principal.require_operator(what)


@routes.get("/v1/queues")
async def queues(request: web.Request) -> web.Response:
    await _operator(request, "read", "listing queues")
    driver = request.app[EDGE].driver
    return json_ok({"queues": await inspect_queues(driver, driver.clock.now_ms())})


@routes.get("/v1/queues/{queue:.+}")
async def queue(request: web.Request) -> web.Response:
    """One queue and whose due work waits in it (``ujobs queues show``): an operator's read,
    as the queues list is; a tenant token is 403 (it would learn other tenants' names)."""
    await _operator(request, "read", "reading a queue")
    name = request.match_info["queue"]
    if not NAME_PATTERN.fullmatch(name):
        raise InputInvalidError(
            f"queue name {name!r} must be 1-200 characters of letters, digits and _ . : / -",
            meta={"issues": [{"path": "queue", "message": "queue name"}]},
        )
    driver = request.app[EDGE].driver
    return json_ok(await inspect_queue(driver, name, driver.clock.now_ms()))


async def _pause_queue(request: web.Request, *, pause: bool) -> web.Response:
    await _operator(request, "operate", "pausing a queue")
    queue = request.match_info["queue"]
    if not NAME_PATTERN.fullmatch(queue):
        raise InputInvalidError(
            f"queue name {queue!r} must be 1-200 characters of letters, digits and _ . : / -",
            meta={"issues": [{"path": "queue", "message": "name"}]},
        )
    await pause_queues(request.app[EDGE].driver, [queue], pause=pause)
    return json_ok({"queues": [queue], "paused": pause})


@routes.post("/v1/queues/{queue:.+}/pause")
async def pause_queue(request: web.Request) -> web.Response:
    return await _pause_queue(request, pause=True)


@routes.post("/v1/queues/{queue:.+}/resume")
async def resume_queue(request: web.Request) -> web.Response:
    return await _pause_queue(request, pause=False)


@routes.get("/v1/tasks")
async def tasks(request: web.Request) -> web.Response:
    await _operator(request, "read", "listing tasks")
    driver = request.app[EDGE].driver
    fires, paused = await fires_and_pauses(driver)
    handles = list(request.app[REGISTRY].tasks.values())
    return json_ok({"tasks": task_rows(handles, fires, paused, driver.clock.now_ms())})


async def _pause_task(request: web.Request, *, pause: bool) -> web.Response:
    await _operator(request, "operate", "pausing a task")
    name = request.match_info["task"]
    if name not in request.app[REGISTRY].tasks:
        raise TaskUnknownError(
            f"no task is named {name!r} in this app; GET /v1/tasks lists them",
            meta={"task": name},
        )
    await pause_tasks(request.app[EDGE].driver, [name], pause=pause)
    return json_ok({"tasks": [name], "paused": pause})


@routes.post("/v1/tasks/{task}/pause")
async def pause_task(request: web.Request) -> web.Response:
    return await _pause_task(request, pause=True)


@routes.post("/v1/tasks/{task}/resume")
async def resume_task(request: web.Request) -> web.Response:
    return await _pause_task(request, pause=False)


__all__ = ["TaskUnknownError", "routes"]
