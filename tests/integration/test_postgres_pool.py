"""``postgres_pool()``: generic plans on by default, no reset round trip, and the driver runs
the same on it (settles, dedupe) as on a plain pool."""

from __future__ import annotations

from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.pool import postgres_pool


async def test_pool_settings_and_a_round_trip(pg_dsn: str) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=2)
    plain = await postgres_pool(pg_dsn, min_size=1, max_size=1, generic_plans=False)
    try:
        assert await pool.fetchval("show plan_cache_mode") == "force_generic_plan"
        assert await plain.fetchval("show plan_cache_mode") == "auto"
        driver = postgres_driver(pool)
        for i in range(8):  # past the five custom plans a cached statement starts with
            request = EnqueueRequest(name="n", input={"i": i}, idempotency_key=f"k{i}")
            assert not (await driver.enqueue(request)).deduped
            assert (await driver.enqueue(request)).deduped
            [job] = await driver.claim(ClaimOptions(queues=["default"], limit=5, worker_id="w"))
            assert await driver.ack(job.id, job.ref)
        assert await pool.fetchval("select count(*) from x_jobs where state = 'done'") == 8
    finally:
        await pool.close()
        await plain.close()
