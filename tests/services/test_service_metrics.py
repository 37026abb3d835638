"""The relay's backlog gauges read Postgres (on the database clock), and the metrics endpoint
of a service without an api answers readiness the way the api does."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from ujobs.drivers.base import EnqueueRequest
from ujobs.errors import ConfigInvalidError
from ujobs.outbox import postgres_outbox_store
from ujobs.services.config.settings import MetricsEndpoint, WorkerConfig
from ujobs.services.runtime.backends import open_backend
from ujobs.services.runtime.metrics_server import SERVED, metrics_app, serve_metrics
from ujobs.services.runtime.service_metrics import RelayMetrics
from ujobs.services.runtime.service_run import ServiceRun

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]


async def test_the_outbox_gauges_read_the_backlog_and_its_age(pg_pool: asyncpg.Pool[Any]) -> None:
    metrics = RelayMetrics(CollectorRegistry())
    store = postgres_outbox_store(executor=pg_pool)
    async with pg_pool.acquire() as conn, conn.transaction():
        await store.stage(
            conn,
            [
                EnqueueRequest(name="send", input={"n": n}, idempotency_key=f"send:{n}")
                for n in range(3)
            ],
        )
    await pg_pool.execute("update x_outbox set staged_at = now() - interval '90 seconds'")
    await metrics.refresh(pg_pool)
    assert metrics.registry.get_sample_value("outbox_pending_rows") == 3
    lag = metrics.registry.get_sample_value("outbox_lag_seconds")
    assert lag is not None
    assert 90 <= lag < 120


async def test_readyz_turns_503_on_a_drain_and_when_the_schema_is_missing(
    aiohttp_client: MakeClient, pg_dsn: str, pg_fresh_dsn: str
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for dsn, expected in ((pg_dsn, 200), (pg_fresh_dsn, 503)):
            config = WorkerConfig.load({"DATABASE_URL": dsn})
            backend = await stack.enter_async_context(open_backend(config.common.connections))
            client = await aiohttp_client(
                metrics_app("worker", backend, registry=CollectorRegistry())
            )
            response = await client.get("/readyz")
            assert response.status == expected
            if expected == 503:
                assert (await response.json())["error"]["code"] == "X_SCHEMA_OUTDATED"
                continue
            assert client.app is not None
            client.app[SERVED].draining = True
            response = await client.get("/readyz")
            assert response.status == 503
            assert (await response.json())["error"]["code"] == "X_DRAINING"
            assert (await client.get("/healthz")).status == 200


async def test_a_busy_port_stops_the_service_at_start_whether_asked_for_or_defaulted(
    pg_dsn: str,
) -> None:
    """A second service on one host with the default port taken fails at start naming
    UJOBS_METRICS_PORT, rather than running with no /metrics and no /readyz."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    config = WorkerConfig.load({"DATABASE_URL": pg_dsn})
    try:
        async with (
            open_backend(config.common.connections) as backend,
            contextlib.AsyncExitStack() as stack,
        ):
            run = ServiceRun(common=config.common, stack=stack)
            for explicit in (True, False):
                asked = MetricsEndpoint(port=port, explicit=explicit)
                with pytest.raises(ConfigInvalidError) as info:
                    await serve_metrics(run, asked, backend)
                assert info.value.meta == {"variable": "UJOBS_METRICS_PORT", "port": port}
                assert "0 picks a free one" in info.value.message
            assert "give each service its own UJOBS_METRICS_PORT" in info.value.message
    finally:
        taken.close()
