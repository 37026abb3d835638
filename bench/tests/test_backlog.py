"""The backlog-scaling bench's fills (``bench/backlog_fill.py``): rows an enqueue could have
written (valid, unique, time-ordered ids; the job's input), handed out in fill order, sleeping
rows never; and its picture (``bench/backlog_svg.py``) drawn from a result line."""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg

from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.ids import new_id

BENCH = Path(__file__).resolve().parents[1]


def bench_module(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


async def test_filled_rows_are_claimable_jobs_in_fill_order(pg_pool: asyncpg.Pool[Any]) -> None:
    fill = bench_module("backlog_fill")
    async with pg_pool.acquire() as conn:
        await fill.fill_jobs(conn, rows=50, name="backlog", queue="backlog", state="suspended")
        await fill.fill_jobs(conn, rows=100, name="backlog", queue="backlog", first=50)
        await fill.fill_outbox(conn, rows=10, name="backlog", queue="enqueued")
        rows = await conn.fetch("select id, run_id, idempotency_key from x_jobs")
    ids = [r["id"] for r in rows]
    assert all(str(uuid.UUID(i)) == i and uuid.UUID(i).version == 7 for i in ids)
    assert len(set(ids)) == len({r["run_id"] for r in rows}) == 150
    assert len({r["idempotency_key"] for r in rows}) == 150
    assert max(ids) < new_id()
    driver = postgres_driver(pg_pool)
    try:
        claimed = await driver.claim(ClaimOptions(["backlog"], 200, "w"))
    finally:
        await driver.close()
    assert [job.input["seq"] for job in claimed] == list(range(50, 150))  # not the sleepers
    assert await pg_pool.fetchval("select count(*) from x_outbox where published_at is null") == 10


async def test_the_claim_and_queues_plans_read_as_the_driver_sends_them(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    """The plans the bench reports are of the statements as they are now: a statement that
    gained a parameter made ``claim_plan`` fail in the full run only."""
    fill = bench_module("backlog_fill")
    plans = bench_module("backlog_plans")
    async with pg_pool.acquire() as conn:
        await fill.fill_jobs(conn, rows=200, name="backlog", queue="backlog")
    claim = await plans.claim_plan(pg_dsn)
    queues = await plans.queues_plan(pg_dsn)
    assert "x_jobs_fair_idx" in claim["indexes"]  # the default claim is the fair one
    assert claim["ms"] >= 0
    assert queues["ms"] >= 0


def test_the_curve_is_an_svg_with_a_line_per_series() -> None:
    svg = bench_module("backlog_svg")
    figures = {"drain_per_s": 100.0, "enqueue_per_s": 50.0, "batch_enqueue_per_s": 500.0}
    line = {
        "sizes": [10, 100],
        "at": "now",
        "postgres": {"ready_10": figures, "ready_100": figures},
        "redis": {"ready_10": figures, "ready_100": figures},
    }
    drawn = svg.draw(line)
    assert drawn.startswith("<svg")
    assert drawn.rstrip().endswith("</svg>")
    assert drawn.count("<polyline") == len(svg.SERIES)


async def test_the_raw_bound_writes_rows_the_redis_driver_claims(
    redis_url: str, redis_prefix: str
) -> None:
    """``backlog_redis_bound.raw_batch`` writes what ``enqueue.lua`` writes for a new row: the
    driver claims them, oldest first, with their queue's tally moved."""
    from redis.asyncio import Redis

    from ujobs.drivers.redis.driver import RedisDriver

    bound = bench_module("backlog_redis_bound")
    client = Redis.from_url(redis_url)
    driver = RedisDriver(client, prefix=redis_prefix)
    try:
        seconds = await bound.raw_batch(client, redis_prefix, 5)
        assert seconds > 0
        options = ClaimOptions(queues=[bound.QUEUE], limit=10, worker_id="w", visibility_ms=60_000)
        claimed = await driver.claim(options)
        assert [job.name for job in claimed] == [bound.NAME] * 5
        assert [job.id for job in claimed] == sorted(job.id for job in claimed)
        stats = (await driver.stats()).queues
        assert bound.QUEUE not in stats  # its queue set is its own: the queues read never sees it
        tally = await client.hgetall(f"{{{redis_prefix}}}:n:{bound.QUEUE}")
        assert tally == {b"ready": b"0", b"running": b"5"}
    finally:
        keys = [key async for key in client.scan_iter(match=f"{{{redis_prefix}}}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def test_the_keyspace_doubles_past_a_power_of_two() -> None:
    bound = bench_module("backlog_redis_bound")
    assert bound.keyspace_doubled(1_040_000, 1_054_000)  # past 2**20
    assert not bound.keyspace_doubled(50_000, 64_000)  # under 2**16
    assert not bound.keyspace_doubled(1 << 20, 1 << 20)  # full, nothing inserted yet
    assert bound.keyspace_doubled(1 << 20, (1 << 20) + 1)
