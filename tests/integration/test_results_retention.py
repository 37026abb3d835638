"""A job's result lives in its row: the retention sweep that purges a done job takes its
result with it (Postgres)."""

from __future__ import annotations

from typing import Any

import asyncpg

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres import postgres_driver
from ujobs.retention.jobs_target import DAY_MS, jobs_purge_target


async def test_the_sweep_purges_a_done_job_with_its_result(pg_pool: asyncpg.Pool[Any]) -> None:
    clock = FrozenClock(1_700_000_000_000)
    driver = postgres_driver(pg_pool, clock=clock)
    queued = await driver.enqueue(EnqueueRequest(name="r", input={}, idempotency_key="k"))
    [job] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    assert await driver.ack(job.id, job.ref, result='{"kept": "until purged"}')
    stored = await pg_pool.fetchval("select result::text from x_jobs where id = $1", queued.id)
    assert stored == '{"kept": "until purged"}'
    target = jobs_purge_target(executor=pg_pool, done_retention_ms=DAY_MS, rest_ratio=0)
    assert await target.purge_expired(clock.now_ms() + 2 * DAY_MS) == 1
    assert driver.results is not None
    assert await driver.results.read(queued.id) is None
    assert await pg_pool.fetchval("select count(*) from x_jobs where result is not null") == 0
    await driver.close()
