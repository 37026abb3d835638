"""``ujobs worker`` as a process: it runs jobs on either driver, and a job longer than the
drain budget makes it exit 1 (drain abandoned) instead of 0 — the lease lapses and the queue
delivers the job again."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.redis.driver import redis_driver

pytestmark = pytest.mark.slow


def order(key: str, ms: int) -> EnqueueRequest:
    return EnqueueRequest(
        name="process_order", input={"order": key, "ms": ms}, idempotency_key=f"order:{key}"
    )


async def test_a_job_longer_than_the_budget_makes_the_worker_exit_1(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    env = service_env(
        DATABASE_URL=pg_dsn,
        UJOBS_APP="tests.e2e.services_app:api",
        UJOBS_DRAIN_DEADLINE_MS="300",
    )
    driver = postgres_driver(pg_pool)
    worker = await ServiceProcess.start("worker", "--queues", "default", env=env)
    try:
        await worker.log_event("ujobs.service.started")
        queued = await driver.enqueue(order("slow", 60_000))
        async with asyncio.timeout(30):  # until the body has started (its first progress)
            while (row := await driver.introspect.get(queued.id)) is None or row.progress is None:
                await asyncio.sleep(0.05)
        worker.terminate()
        code = await worker.exit_code(15)
    finally:
        await worker.kill()
    assert code == 1
    [abandoned] = worker.events("jobs.worker.drain-abandoned")
    assert abandoned["job_ids"] == [queued.id]
    [stopped] = worker.events("ujobs.service.stopped")
    assert stopped["abandoned"] == ["worker"]


async def test_the_worker_runs_jobs_on_the_redis_driver(redis_url: str, redis_prefix: str) -> None:
    env = service_env(
        REDIS_URL=redis_url,
        UJOBS_DRIVER="redis",
        UJOBS_REDIS_PREFIX=redis_prefix,
        UJOBS_APP="tests.e2e.services_app:api",
    )
    client = Redis.from_url(redis_url)
    driver = redis_driver(client, prefix=redis_prefix)
    worker = await ServiceProcess.start("worker", env=env)
    try:
        await worker.log_event("ujobs.service.started")
        queued = [await driver.enqueue(order(f"r{n}", 0)) for n in range(3)]
        async with asyncio.timeout(30):
            while (await driver.stats()).queues["default"].done < len(queued):
                await asyncio.sleep(0.05)
        worker.terminate()
        code = await worker.exit_code(15)
    finally:
        await worker.kill()
        await client.aclose()
    assert code == 0
