"""``ujobs api``: the HTTP edge (aiohttp) — enqueue, events and the operator surface behind
bearer tokens, plus health, readiness, metrics and the manifest.

Built the standard way (STYLE #13): ``create_app(config)`` answers an ``Application`` whose
backend is opened and closed by a ``cleanup_ctx``, state lives under typed ``web.AppKey``s
(``api.common``), and each concern is a ``RouteTableDef`` of its own module: ``api.enqueue``
(jobs, batches, events), ``api.jobs`` (one job, pages, moves), ``api.queues`` (queues, tasks),
``api.token_routes`` (the token list), ``api.webhooks`` (webhook endpoints and their deliveries).
Who may call what is ``ujobs.services.api.auth`` (shared with the NATS edge); the per-token rate limit is
``api.ratelimit``; concurrent single enqueues share a commit through ``api.enqueue_batcher``.
Tests drive it with ``aiohttp_client(create_app(config))``.

| Route | Answers |
|---|---|
| ``GET /healthz`` | 200 while the process runs (liveness: restart me only if this fails) |
| ``GET /readyz`` | 200 when the database answers with this code's schema and the process is not draining; 503 otherwise |
| ``GET /metrics`` | Prometheus text; queue gauges re-read from ``driver.stats()`` at most every ``UJOBS_METRICS_REFRESH_MS`` |
| ``GET /v1/manifest`` | every job and task descriptor of the app (``UJOBS_APP``) |
| ``GET /v1/openapi.json`` | the OpenAPI 3.1 document of every route, a typed input per job |
| ``/v1/jobs…``, ``/v1/events…``, ``/v1/queues…``, ``/v1/tasks…``, ``/v1/webhooks…`` | see the route modules |
| ``/_x…`` | the operator dashboard (HTML, a login cookie): ``ujobs.services.dashboard`` |

Errors are ``{"error": {"code", "message", "meta"}}`` with the status ``status_for(code)``
names; Postgres away (refusing, restarting, a session ended) is 503 ``X_DRIVER_UNREACHABLE``
with ``Retry-After``, whichever call met it. On SIGTERM readiness turns 503 at once (the load balancer stops sending), requests in
flight finish within the drain budget, then the process exits 0.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.unreachable import store_unreachable, unreachable
from ujobs.errors import (
    ConfigInvalidError,
    DriverUnavailableError,
    InputInvalidError,
    JobDrainedError,
    RateLimitedError,
    UltimateError,
)
from ujobs.events.bus import set_event_bus
from ujobs.events.bus_postgres import postgres_event_bus
from ujobs.lifecycle import Deadline, register_shutdown_hooks
from ujobs.metrics import JobMetrics, job_metrics
from ujobs.services.api import enqueue as api_enqueue
from ujobs.services.api import jobs as api_jobs
from ujobs.services.api import queues as api_queues
from ujobs.services.api import results as api_results
from ujobs.services.api import tenants as api_tenants
from ujobs.services.api import token_routes as api_tokens
from ujobs.services.api.auth import NO_TOKENS, TokenLookup
from ujobs.services.api.common import (
    BACKEND,
    CONFIG,
    EDGE,
    REGISTRY,
    STATE,
    ApiState,
    BodyTooLargeError,
    Edge,
    error_response,
    json_ok,
    status_for,
)
from ujobs.services.api.enqueue_batcher import EnqueueBatcher
from ujobs.services.api.exports import add_export_routes, token_reader
from ujobs.services.api.openapi import openapi_document
from ujobs.services.api.ratelimit import TokenBuckets, retry_after_header
from ujobs.services.api.strict_batch import strict_batch
from ujobs.services.api.token_facts import KnownTokens
from ujobs.services.api.token_guard import token_guard
from ujobs.services.api.tokens import BatchedLookup, TokenStore
from ujobs.services.api.webhooks import add_webhook_routes
from ujobs.services.config.settings import ApiConfig
from ujobs.services.dashboard.routes import setup_dashboard
from ujobs.services.nats.edge import NatsEdge
from ujobs.services.nats.names import NatsNames
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.backends import open_backend
from ujobs.services.runtime.schema_check import schema_problem
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.wake.announce import announcing, redis_announcer

log = logging.getLogger("ujobs.api")

READY_PING_TIMEOUT_S = 2.0

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return json_ok({"status": "ok", "service": request.app[CONFIG].common.service})


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
            ),
            transient=True,  # no answer now; a restart or a failover answers in a second
        )
    outdated = await schema_problem(request.app[BACKEND], request.app[CONFIG].common.service)
    if outdated is not None:
        return error_response(outdated)
    return json_ok({"status": "ready"})


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
    return json_ok(request.app[REGISTRY].manifest())


@routes.get("/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return json_ok(openapi_document(request.app[REGISTRY]))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as ``{"error": {code, message, meta}}``, never an HTML page."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 413:
            limit = request.app[CONFIG].max_body_bytes
            return error_response(
                BodyTooLargeError(
                    f"the body is over {limit} bytes (UJOBS_API_MAX_BODY_BYTES)",
                    meta={"max": limit},
                )
            )
        code = {404: "X_NOT_FOUND", 405: "X_METHOD_NOT_ALLOWED"}.get(exc.status, "X_HTTP")
        return error_response(
            UltimateError(exc.reason, code=code, meta={"path": request.path}), exc.status
        )
    except RateLimitedError as exc:
        return error_response(exc, headers=retry_after_header(exc))
    except UltimateError as exc:
        return error_response(exc)
    except (asyncpg.UntranslatableCharacterError, asyncpg.CharacterNotInRepertoireError):
        # A NUL character in a string the request carried (an event payload, a runId, a path
        # parameter): Postgres stores no NUL in text or jsonb. A job's input is refused earlier,
        # by its schema, naming the field.
        return error_response(
            InputInvalidError(
                "the request carries a NUL character (\\u0000), which cannot be stored; remove it",
                meta={"issues": [{"path": "", "message": "NUL character"}]},
            )
        )
    except Exception as exc:
        if isinstance(exc, asyncpg.InterfaceError) and "pool is clos" in str(exc):
            # The process closes its pool at the end of its drain: a request that got in under
            # the wire is the drain's 503, to be sent again to another replica, not a bug.
            return error_response(
                JobDrainedError(
                    "this api is shutting down (its database pool is closed); send the request "
                    "to another replica",
                    meta={"cause": type(exc).__name__},
                )
            )
        if store_unreachable(exc):
            # Postgres refused, restarting or gone mid-statement, in a call that did not
            # translate it itself: the client should try again, not report a bug.
            return error_response(unreachable(exc))
        log.exception("ujobs.api.unhandled", extra={"path": request.path})
        return error_response(
            UltimateError(f"unexpected {type(exc).__name__}; the api logged the detail"), 500
        )


def create_app(
    config: ApiConfig, *, metrics: JobMetrics | None = None, clock: Clock = SYSTEM_CLOCK
) -> web.Application:
    """The api's application; its backend opens on startup and closes on cleanup. ``clock``
    is the driver's (token expiry and the rate limit read it too)."""
    # The body limit is enforced by read_json with a JSON 413; aiohttp's own limit sits just
    # above it so a chunked body with no Content-Length is cut off too.
    app = web.Application(middlewares=[errors_as_json], client_max_size=config.max_body_bytes)
    app[CONFIG] = config
    app[REGISTRY] = load_api(config.common.app)
    app[STATE] = ApiState(metrics=metrics or job_metrics())

    async def backend_ctx(app: web.Application) -> AsyncIterator[None]:
        async with _edge(app, clock):
            yield

    app.cleanup_ctx.append(backend_ctx)
    app.add_routes(routes)
    app.add_routes(api_enqueue.routes)
    app.add_routes(api_results.routes)
    app.add_routes(api_jobs.routes)
    app.add_routes(api_queues.routes)
    app.add_routes(api_tenants.routes)
    app.add_routes(api_tokens.routes)
    setup_dashboard(app)
    add_export_routes(app, authorize=token_reader)
    add_webhook_routes(app)
    return app


@contextlib.asynccontextmanager
async def _edge(app: web.Application, clock: Clock) -> AsyncIterator[None]:
    """Open the backend and build what the routes run on; enqueues announce on the wake like
    every other service's (Redis when REDIS_URL is set, else the driver's pg_notify)."""
    config = app[CONFIG]
    async with contextlib.AsyncExitStack() as stack:
        backend = await stack.enter_async_context(
            open_backend(
                config.common.connections,
                need_database=True,
                need_redis=True,
                pool_size=max(4, config.common.connections.pg_pool_size),
                generic_plans=False,
                clock=clock,
            )
        )
        app[BACKEND] = backend
        announcer = None
        if backend.redis is not None and getattr(backend.driver, "wake_channel", None) is None:
            announcer = redis_announcer(backend.redis)
            stack.push_async_callback(announcer.close)
        driver = announcing(backend.driver, announcer)
        tokens: TokenLookup = NO_TOKENS
        store = None
        if backend.pool is not None:
            store = TokenStore(backend.pool, clock=clock)
            tokens = BatchedLookup(store)
            set_event_bus(postgres_event_bus(backend.pool))
            stack.callback(set_event_bus, None)
        guard = token_guard(backend.driver, driver, store)
        batcher = EnqueueBatcher(driver, guard=guard)
        stack.push_async_callback(batcher.close)
        # One bucket per token for both edges: a token's rate counts HTTP and NATS together.
        buckets = TokenBuckets(config.rate_per_token, clock)
        app[EDGE] = Edge(
            driver=driver,
            tokens=tokens,
            buckets=buckets,
            batcher=batcher,
            strict=strict_batch(backend.driver, driver),
            known=None if guard is None else KnownTokens(),
        )
        nats_url = config.common.connections.nats_url
        if nats_url is not None:
            from ujobs.services.nats.service import nats_edge
            from ujobs.services.nats.settlements import SettlementResults

            connections = config.common.connections
            redis_outbox = None
            if connections.driver == "redis" and backend.redis is not None:
                from ujobs.drivers.redis.settlements import RedisSettlementsOutbox

                redis_outbox = RedisSettlementsOutbox(backend.redis, connections.redis_prefix)

            nats = NatsEdge(
                registry=app[REGISTRY],
                driver=driver,
                tokens=tokens,
                batcher=batcher,
                buckets=buckets,
                known=app[EDGE].known,
            )
            await stack.enter_async_context(
                nats_edge(
                    nats_url,
                    nats,
                    NatsNames(config.nats_prefix),
                    pool=backend.pool,
                    redis_outbox=redis_outbox,
                    ack_wait_s=config.nats_ack_wait_ms / 1000,
                    max_ack_pending=config.nats_max_ack_pending,
                    max_deliveries=config.nats_max_deliveries,
                    ping=backend.ping,
                    settlement_results=SettlementResults.of(
                        config.nats_settlement_results, config.result_max_bytes
                    ),
                )
            )
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


__all__ = [
    "BACKEND",
    "CONFIG",
    "EDGE",
    "REGISTRY",
    "STATE",
    "create_app",
    "start_api",
    "status_for",
]
