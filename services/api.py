"""``ujobs api``: the HTTP edge — health, readiness, metrics, the manifest (aiohttp).

Built the standard way (STYLE #13): ``create_app(config)`` answers an ``Application`` whose
backend is opened and closed by a ``cleanup_ctx``, state lives under typed ``web.AppKey``s, and
routes are one ``RouteTableDef``. Tests drive it with ``aiohttp_client(create_app(config))``.

| Route | Answers |
|---|---|
| ``GET /healthz`` | 200 while the process runs (liveness: restart me only if this fails) |
| ``GET /readyz`` | 200 when the database answers and the process is not draining; 503 otherwise |
| ``GET /metrics`` | Prometheus text; queue gauges re-read from ``driver.stats()`` at most every ``UJOBS_METRICS_REFRESH_MS`` |
| ``GET /v1/manifest`` | every job and task descriptor of the app (``UJOBS_APP``) |
| ``GET /v1/openapi.json`` | the OpenAPI document of these routes |

Errors are ``{"error": {"code", "message", "meta"}}`` with the status ``status_for(code)``
names. On SIGTERM readiness turns 503 at once (the load balancer stops sending), requests in
flight finish within the drain budget, then the process exits 0.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.api_exports import add_export_routes
from services.api_openapi import openapi_document
from services.app_loader import load_api
from services.backends import Backend, open_backend
from services.config import ApiConfig
from services.redact import redact_text
from services.runtime import ServiceRun
from shared.errors import (
    ConfigInvalidError,
    DriverUnavailableError,
    JobDrainedError,
    UltimateError,
)
from shared.lifecycle import Deadline, register_shutdown_hooks
from shared.metrics import JobMetrics, job_metrics
from shared.registry import Registry

log = logging.getLogger("ujobs.api")

READY_PING_TIMEOUT_S = 2.0

_STATUS_BY_CODE = {
    "X_INPUT_INVALID": 400,
    "X_CONFIG_INVALID": 400,
    "X_JOB_PAGE_INVALID": 400,
    "X_JOB_DECLARATION_INVALID": 400,
    "X_UNAUTHORIZED": 401,
    "X_FORBIDDEN": 403,
    "X_JOB_TENANT_MISMATCH": 403,
    "X_NOT_FOUND": 404,
    "X_JOB_NOT_FOUND": 404,
    "X_JOB_UNKNOWN": 404,
    "X_METHOD_NOT_ALLOWED": 405,
    "X_JOB_DUPLICATE": 409,
    "X_JOB_NOT_REQUEUEABLE": 409,
    "X_JOB_NOT_REMOVABLE": 409,
    "X_JOB_NOT_PROMOTABLE": 409,
    "X_JOB_NOT_CANCELLABLE": 409,
    "X_RATE_LIMITED": 429,
    "X_NOT_IMPLEMENTED": 501,
    "X_DRAINING": 503,
    "X_DRIVER_UNAVAILABLE": 503,
    "X_OVERLOADED": 503,
}


def status_for(code: str) -> int:
    """The HTTP status an error code travels with (500 for a code nobody mapped)."""
    return _STATUS_BY_CODE.get(code, 500)


@dataclass
class ApiState:
    """Mutable per-app state: the drain flag and the metrics refresh's bookkeeping."""

    metrics: JobMetrics
    draining: bool = False
    refreshed_at: float | None = None
    refresh_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


CONFIG = web.AppKey("config", ApiConfig)
BACKEND = web.AppKey("backend", Backend)
REGISTRY = web.AppKey("registry", Registry)
STATE = web.AppKey("state", ApiState)

routes = web.RouteTableDef()


def error_response(error: UltimateError, status: int | None = None) -> web.Response:
    body = {"error": {**error.to_dict(), "message": redact_text(error.message)}}
    return web.json_response(body, status=status or status_for(error.code))


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "service": request.app[CONFIG].common.service})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    if request.app[STATE].draining:
        return error_response(
            JobDrainedError("this process is draining; send traffic to another replica")
        )
    try:
        await asyncio.wait_for(request.app[BACKEND].ping(), READY_PING_TIMEOUT_S)
    except Exception as exc:
        return error_response(
            DriverUnavailableError(
                f"the database did not answer: {type(exc).__name__}: {exc}",
                meta={"cause": type(exc).__name__},
            )
        )
    return web.json_response({"status": "ready"})


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    await _refresh_gauges(request.app, state)
    body = generate_latest(state.metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _refresh_gauges(app: web.Application, state: ApiState) -> None:
    """Re-read the queue gauges at most every ``metrics_refresh_ms``: a scrape every second
    from three Prometheus replicas must not become three full-table reads a second."""
    every_s = app[CONFIG].metrics_refresh_ms / 1000
    async with state.refresh_lock:
        now = time.monotonic()
        if state.refreshed_at is not None and now - state.refreshed_at < every_s:
            return
        try:
            backend = app[BACKEND]
            await state.metrics.refresh_queue_gauges(backend.driver, backend.driver.clock)
        except Exception as exc:
            # Serve the last values; a scrape must not fail because the database blinked.
            log.warning("ujobs.api.metrics-refresh-failed", extra={"error": exc})
            return
        state.refreshed_at = now


@routes.get("/v1/manifest")
async def manifest(request: web.Request) -> web.Response:
    return web.json_response(request.app[REGISTRY].manifest())


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as ``{"error": {code, message, meta}}``, never an HTML page."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = {404: "X_NOT_FOUND", 405: "X_METHOD_NOT_ALLOWED"}.get(exc.status, "X_HTTP")
        return error_response(
            UltimateError(exc.reason, code=code, meta={"path": request.path}), exc.status
        )
    except UltimateError as exc:
        return error_response(exc)
    except Exception as exc:
        log.exception("ujobs.api.unhandled", extra={"path": request.path})
        return error_response(
            UltimateError(f"unexpected {type(exc).__name__}; the api logged the detail"), 500
        )


def create_app(config: ApiConfig, *, metrics: JobMetrics | None = None) -> web.Application:
    """The api's application; its backend opens on startup and closes on cleanup."""
    app = web.Application(middlewares=[errors_as_json])
    app[CONFIG] = config
    app[REGISTRY] = load_api(config.common.app)
    app[STATE] = ApiState(metrics=metrics or job_metrics())
    app.cleanup_ctx.append(_backend_ctx)
    app.add_routes(routes)
    add_export_routes(app)
    return app


async def _backend_ctx(app: web.Application) -> AsyncIterator[None]:
    async with open_backend(
        app[CONFIG].common.connections, pool_size=4, generic_plans=False
    ) as backend:
        app[BACKEND] = backend
        yield


async def start_api(run: ServiceRun, config: ApiConfig) -> web.AppRunner:
    """Serve ``create_app(config)``; SIGTERM flips readiness, then finishes what is in flight.

    Answers the runner (its ``addresses`` say where it listens: port 0 picks a free one).
    """
    app = create_app(config)
    # Requests in flight get the drain budget less a second for the backend to close.
    budget_s = max(0.1, config.common.drain_deadline_ms / 1000 - 1)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=budget_s)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigInvalidError(
            f"UJOBS_API_PORT: cannot listen on {config.host}:{config.port} ({exc.strerror}); "
            "choose another port (0 picks a free one)",
            meta={"variable": "UJOBS_API_PORT", "port": config.port},
        ) from None
    log.info("ujobs.api.listening", extra={"addresses": [address(a) for a in runner.addresses]})

    def accept() -> None:
        app[STATE].draining = True

    async def close(_: Deadline) -> None:
        await runner.cleanup()

    run.stack.callback(register_shutdown_hooks(accept=accept, close=close, name="api"))
    return runner


def address(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


__all__ = ["BACKEND", "CONFIG", "REGISTRY", "STATE", "create_app", "start_api", "status_for"]
