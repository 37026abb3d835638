"""Every service without an api serves /metrics, /healthz and /readyz on UJOBS_METRICS_PORT:
a real ``ujobs worker`` after it ran jobs (the spec's worker series move), a real ``ujobs
relay`` after it published outbox rows, and a real ``ujobs scheduler`` after it fired a task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.outbox import postgres_outbox_store

pytestmark = pytest.mark.slow

APP = "tests.e2e.services_app:api"


def sample(text: str, series: str) -> float | None:
    """The value of one exposition line ``series value`` (labels included in ``series``)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def scrape_until(base: str, series: str, at_least: float) -> str:
    async with asyncio.timeout(30):
        while True:
            status, text = await get(f"{base}/metrics")
            assert status == 200
            value = sample(text, series)
            if value is not None and value >= at_least:
                return text
            await asyncio.sleep(0.1)


@pytest.fixture
async def started(pg_dsn: str) -> AsyncIterator[list[ServiceProcess]]:
    processes: list[ServiceProcess] = []
    yield processes
    for process in processes:
        process.terminate()
    codes = [await process.exit_code(15) for process in processes]
    for process in processes:
        await process.kill()
    assert codes == [0] * len(processes)


async def start(processes: list[ServiceProcess], dsn: str, *args: str) -> str:
    """Start ``ujobs ARGS`` and answer the base URL of its metrics endpoint."""
    process = await ServiceProcess.start(*args, env=service_env(DATABASE_URL=dsn, UJOBS_APP=APP))
    processes.append(process)
    listening = await process.log_event("ujobs.metrics.listening")
    await process.log_event("ujobs.service.started")
    return f"http://{listening['addresses'][0]}"


async def test_a_worker_serves_its_series_after_running_jobs(
    started: list[ServiceProcess], pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    base = await start(started, pg_dsn, "worker", "--queues", "default")
    assert await get(f"{base}/healthz") == (200, '{"status": "ok", "service": "worker"}')
    status, _ = await get(f"{base}/readyz")
    assert status == 200
    driver = postgres_driver(pg_pool)
    for n in range(3):
        await driver.enqueue(
            EnqueueRequest(
                name="process_order",
                input={"order": f"m{n}", "ms": 0},
                idempotency_key=f"order:m{n}",
            )
        )
    text = await scrape_until(base, 'jobs_total{outcome="ok",queue="default"}', 3)
    assert sample(text, "job_worker_capacity") == 8
    assert sample(text, "job_worker_in_flight") == 0
    assert "# TYPE job_leases_lost_total counter" in text


async def test_a_relay_counts_what_it_published(
    started: list[ServiceProcess], pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    base = await start(started, pg_dsn, "relay")
    status, text = await get(f"{base}/metrics")
    assert status == 200
    assert sample(text, "outbox_pending_rows") == 0
    assert sample(text, "outbox_lag_seconds") == 0
    store = postgres_outbox_store(executor=pg_pool)
    async with pg_pool.acquire() as conn, conn.transaction():
        await store.stage(
            conn,
            [
                EnqueueRequest(
                    name="process_order",
                    input={"order": f"x{n}", "ms": 0},
                    idempotency_key=f"order:x{n}",
                )
                for n in range(2)
            ],
        )
    text = await scrape_until(base, "outbox_published_total", 2)
    assert sample(text, "outbox_publish_failures_total") == 0
    assert (await get(f"{base}/readyz"))[0] == 200


async def test_a_scheduler_exports_its_fires_and_leadership(
    started: list[ServiceProcess], pg_dsn: str
) -> None:
    base = await start(started, pg_dsn, "scheduler")
    text = await scrape_until(base, 'scheduler_task_fires_total{task="every_second"}', 1)
    assert sample(text, "scheduler_leader") == 1
