"""``/metrics``, ``/healthz`` and ``/readyz`` for the services that have no api of their own: the
worker (and the webhook deliverer and the exporter), the relay, the scheduler.

They listen on ``UJOBS_METRICS_HOST:UJOBS_METRICS_PORT`` (default 127.0.0.1:9464; compose sets
0.0.0.0). ``/metrics`` is the Prometheus text format of the process's default registry — the
spec's worker series (``jobs_total{queue,outcome}``, ``job_leases_lost_total{queue}``,
``job_worker_in_flight``, ``job_worker_capacity``) and the relay's and scheduler's own
(``ujobs.services.runtime.service_metrics``). ``/healthz`` answers 200 while the process runs;
``/readyz``
200 while the backend answers with this code's schema and the process is not draining, else
503 with the error's code. The endpoint stays up through the drain (scrapes see it finish) and
closes with the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from ujobs.errors import (
    ConfigInvalidError,
    DriverUnavailableError,
    JobDrainedError,
    UltimateError,
)
from ujobs.lifecycle import register_shutdown_hooks
from ujobs.services.config.settings import MetricsEndpoint
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.schema_check import schema_problem
from ujobs.services.runtime.service_run import ServiceRun

log = logging.getLogger("ujobs.metrics")

PING_TIMEOUT_S = 2.0

Refresh = Callable[[], Awaitable[None]]


@dataclass
class _Served:
    service: str
    backend: Backend
    registry: CollectorRegistry
    refresh: Refresh | None
    draining: bool = False


SERVED = web.AppKey("served", _Served)


def _error(error: UltimateError) -> web.Response:
    return web.json_response({"error": error.to_dict()}, status=503)


async def _metrics(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    if served.refresh is not None:
        await served.refresh()
    body = generate_latest(served.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "service": request.app[SERVED].service})


async def _readyz(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    if served.draining:
        return _error(JobDrainedError(f"{served.service} is draining; it takes no new work"))
    try:
        await asyncio.wait_for(served.backend.ping(), PING_TIMEOUT_S)
        outdated = await schema_problem(served.backend, served.service)
    except Exception as exc:
        return _error(
            DriverUnavailableError(
                f"the backend did not answer: {type(exc).__name__}: {exc}",
                meta={"cause": type(exc).__name__},
            )
        )
    if outdated is not None:
        return _error(outdated)
    return web.json_response({"status": "ready", "service": served.service})


def metrics_app(
    service: str,
    backend: Backend,
    *,
    registry: CollectorRegistry = REGISTRY,
    refresh: Refresh | None = None,
) -> web.Application:
    """The three routes over ``backend`` (tests drive it with ``aiohttp_client``)."""
    app = web.Application()
    app[SERVED] = _Served(service=service, backend=backend, registry=registry, refresh=refresh)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    return app


async def serve_metrics(
    run: ServiceRun,
    endpoint: MetricsEndpoint,
    backend: Backend,
    *,
    refresh: Refresh | None = None,
) -> web.AppRunner:
    """Listen on ``endpoint`` until the process has drained; readiness turns 503 when the drain
    starts. A port that cannot be bound is ``X_CONFIG_INVALID`` at start, the default one too: a
    second service on one host without its own UJOBS_METRICS_PORT would otherwise run with no
    /metrics and no /readyz, which no orchestrator's probe tells from a dead process."""
    service = run.common.service
    app = metrics_app(service, backend, refresh=refresh)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, endpoint.host, endpoint.port).start()
    except OSError as exc:
        await runner.cleanup()
        where = f"{endpoint.host}:{endpoint.port}"
        hint = (
            "choose another port"
            if endpoint.explicit
            else "another service on this host holds the default port: give each service its "
            "own UJOBS_METRICS_PORT"
        )
        raise ConfigInvalidError(
            f"UJOBS_METRICS_PORT: cannot listen on {where} ({exc.strerror}); {hint} (0 picks a "
            "free one)",
            meta={"variable": "UJOBS_METRICS_PORT", "port": endpoint.port},
        ) from None
    run.stack.push_async_callback(runner.cleanup)

    def accept() -> None:
        app[SERVED].draining = True

    run.stack.callback(register_shutdown_hooks(accept=accept, name=f"{service}-metrics"))
    addresses = [f"{a[0]}:{a[1]}" for a in runner.addresses if isinstance(a, tuple)]
    log.info("ujobs.metrics.listening", extra={"addresses": addresses})
    return runner
