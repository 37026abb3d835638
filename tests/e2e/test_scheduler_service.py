"""``ujobs scheduler`` as a process: its jobs land where the workers claim, and wake them.

On ``UJOBS_DRIVER=redis`` a per-second task's jobs are enqueued on Redis (the watermark and the
fire's record stay in Postgres) and ``ujobs worker`` completes them. On Postgres, a worker in
ANOTHER process that polls once a minute and hears only the Redis wake channel starts a fired
job long before its poll would have.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from tests.e2e import services_app
from tests.e2e.service_process import ServiceProcess, service_env
from tests.support.redis_keys import drop_prefix
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.redis.driver import redis_driver
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.wake.listener import redis_wake
from ujobs.worker import job_worker

pytestmark = pytest.mark.slow

APP = "tests.e2e.services_app:api"
MINUTE_MS = 60_000
WAIT_S = 30.0
"""Generous, and still half the worker's one-minute poll: only the wake starts a job in time."""


async def test_a_per_second_task_runs_on_the_redis_driver(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], redis_url: str, redis_prefix: str
) -> None:
    env = service_env(
        DATABASE_URL=pg_dsn,
        REDIS_URL=redis_url,
        UJOBS_DRIVER="redis",
        UJOBS_REDIS_PREFIX=redis_prefix,
        UJOBS_APP=APP,
    )
    client = Redis.from_url(redis_url)
    queue = redis_driver(client, prefix=redis_prefix)
    services = [
        await ServiceProcess.start("worker", "--queues", "default", env=env),
        await ServiceProcess.start("scheduler", env=env),
    ]
    try:
        for service in services:
            await service.log_event("ujobs.service.started")
        async with asyncio.timeout(WAIT_S):
            while (stats := (await queue.stats()).queues.get("default")) is None or stats.done < 2:
                await asyncio.sleep(0.05)
        for service in services:
            service.terminate()
        codes = [await service.exit_code(15) for service in services]
        fires = await pg_pool.fetch("select task from x_task_fires")
        stranded = await pg_pool.fetchval("select count(*) from x_jobs")
        watermark = await pg_pool.fetchval(
            "select watermark_ms from x_scheduler_state where task = 'every_second'"
        )
    finally:
        for service in services:
            await service.kill()
        await drop_prefix(client, redis_prefix)
        await client.aclose()
    assert codes == [0, 0]
    assert stranded == 0  # nothing written where no worker claims it
    assert [r["task"] for r in fires] == ["every_second"]
    assert watermark is not None


async def test_a_fire_wakes_a_worker_that_hears_only_the_redis_wake(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], redis_url: str
) -> None:
    wake = redis_wake(redis_url)
    worker = job_worker(
        driver=postgres_driver(pg_pool),
        context=None,
        registry=services_app.api,
        queues=["default"],
        wake=wake,
        poll_interval_ms=MINUTE_MS,
        idle_poll_max_ms=MINUTE_MS,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )
    scheduler: ServiceProcess | None = None
    await wake.start()
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        await worker.start()
        await worker.signals.wait("waiting", timeout_s=WAIT_S)  # its one poll is behind it
        env = service_env(DATABASE_URL=pg_dsn, REDIS_URL=redis_url, UJOBS_APP=APP)
        scheduler = await ServiceProcess.start("scheduler", env=env)
        await worker.signals.wait("settled", timeout_s=WAIT_S)
        scheduler.terminate()
        assert await scheduler.exit_code(15) == 0
    finally:
        if scheduler is not None:
            await scheduler.kill()
        await worker.stop()
        await wake.stop()
    assert ("default", True) in worker.signals.emitted("wake")
