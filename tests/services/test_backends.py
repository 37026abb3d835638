"""``open_backend``: the services' pools are ``postgres_pool()`` — generic plans for the roles
that claim, Postgres' own choice for the ones serving operator pages — and the driver over
either runs the whole claim/settle path."""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from tests.services.test_api import MakeClient
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import BACKEND, create_app
from ujobs.services.config.settings import ApiConfig, Connections, WorkerConfig
from ujobs.services.runtime.backends import open_backend
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.services.worker import start_worker


async def _plan_mode(pool: asyncpg.Pool[Any] | None) -> str:
    assert pool is not None
    mode = await pool.fetchval("show plan_cache_mode")
    assert isinstance(mode, str)
    return mode


async def test_a_worker_side_backend_runs_generic_plans_and_settles(pg_dsn: str) -> None:
    async with open_backend(Connections(database_url=pg_dsn)) as backend:
        assert await _plan_mode(backend.pool) == "force_generic_plan"
        driver = backend.driver
        for i in range(7):  # past the five custom plans a cached statement starts with
            await driver.enqueue(EnqueueRequest(name="n", input={"i": i}, idempotency_key=f"k{i}"))
            [job] = await driver.claim(ClaimOptions(queues=["default"], limit=4, worker_id="w"))
            assert await driver.ack(job.id, job.ref)
        assert backend.pool is not None
        done = await backend.pool.fetchval("select count(*) from x_jobs where state = 'done'")
        assert done == 7


async def test_an_operator_backend_keeps_custom_plans(pg_dsn: str) -> None:
    async with open_backend(Connections(database_url=pg_dsn), generic_plans=False) as backend:
        assert await _plan_mode(backend.pool) == "auto"


async def test_the_api_serves_operator_pages_on_custom_plans(
    aiohttp_client: MakeClient, pg_dsn: str
) -> None:
    app = create_app(
        ApiConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_APP": "tests.unit.sample_app:api"}),
        metrics=JobMetrics(CollectorRegistry()),
    )
    client = await aiohttp_client(app)
    assert client.app is not None
    assert await _plan_mode(client.app[BACKEND].pool) == "auto"


async def test_the_worker_service_claims_ahead_by_default_and_runs_every_job(
    pg_dsn: str,
) -> None:
    """``ujobs worker`` on one queue claims ahead up to sixteen rows per slot, three at any pace
    (``UJOBS_CLAIM_AHEAD`` unset), on its generic-plan pool, and every job still runs exactly
    once."""
    env = {
        "DATABASE_URL": pg_dsn,
        "UJOBS_APP": "tests.e2e.services_app:api",
        "UJOBS_METRICS_PORT": "0",
    }
    config = WorkerConfig.load({**env, "UJOBS_CONCURRENCY": "4"})
    assert WorkerConfig.load({**env, "UJOBS_CLAIM_AHEAD": "0"}).claim_ahead_rows() == 0
    async with contextlib.AsyncExitStack() as stack:
        run = ServiceRun(common=config.common, stack=stack)
        worker = await start_worker(run, config)
        try:
            assert worker.options.claim_ahead == 64
            assert (worker.prefetch.limit, worker.prefetch.floor) == (64, 12)
            driver = worker.driver
            for i in range(40):
                await driver.enqueue(
                    EnqueueRequest(
                        name="process_order",
                        input={"order": f"o{i}", "ms": 0},
                        idempotency_key=f"order:o{i}",
                    )
                )
            await worker.signals.wait(
                "settled", lambda _: worker.runner.counters.settled >= 40, timeout_s=30
            )
        finally:
            await worker.stop()
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch("select state, attempt from x_jobs where name = 'process_order'")
    finally:
        await conn.close()
    assert len(rows) == 40
    assert {(r["state"], r["attempt"]) for r in rows} == {("done", 1)}
