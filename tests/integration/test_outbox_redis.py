"""The outbox on a Redis deployment: rows still stage in Postgres, inside the caller's
transaction, and the relay publishes the committed ones onto the REDIS driver under their own
ids — the job on Redis carries the outbox row's id and run_id — and a relay killed between a
publish and its mark republishes into the job its first publish made, never a second one."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.outbox import (
    Billing,
    Pool,
    billing_jobs,
    job_rows,
    outbox_rows,
    split_options,
)
from tests.support.redis_keys import prefix_keys, redis_test_driver
from ujobs.clock import SYSTEM_CLOCK, FrozenClock
from ujobs.context import bind_transaction, transaction
from ujobs.drivers.base import ClaimedJob, ClaimOptions
from ujobs.drivers.redis.driver import RedisDriver
from ujobs.execution.attempt import execute_job
from ujobs.jobs.enqueue_target import set_jobs_facade
from ujobs.jobs.job import JobHandle
from ujobs.lifecycle import Lifecycle
from ujobs.outbox import (
    OutboxRelay,
    PostgresOutboxStore,
    outbox_jobs_facade,
    outbox_relay,
    postgres_outbox_store,
)

ROOT = Path(__file__).resolve().parents[2]
LEASE = 30_000


@pytest.fixture
async def redis(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=SYSTEM_CLOCK) as driver:
        yield driver


def wire(pool: Pool, driver: RedisDriver) -> PostgresOutboxStore:
    """The facade stages in ``x_outbox`` inside a transaction, publishes on Redis outside one."""
    store = postgres_outbox_store(executor=pool)
    set_jobs_facade(outbox_jobs_facade(store=store, driver=driver))
    return store


def relay(store: PostgresOutboxStore, driver: RedisDriver, **options: Any) -> OutboxRelay:
    return outbox_relay(
        store=store, driver=driver, **split_options({"lifecycle": Lifecycle(), **options})
    )


async def stage(pool: Pool, billing: Billing, orders: list[str]) -> None:
    for order in orders:
        async with pool.acquire() as conn, transaction(conn):
            await billing.create_invoice.enqueue({"order": order})
            await billing.charge_card.enqueue({"order": order})


async def claim_all(driver: RedisDriver) -> list[ClaimedJob]:
    return await driver.claim(ClaimOptions(queues=["default"], limit=100, worker_id="w"))


async def run_all(driver: RedisDriver, handles: dict[str, JobHandle[Any]]) -> list[str]:
    """Claim and run every due job on Redis, in claim order; answers their ids."""
    ran: list[str] = []
    while jobs := await claim_all(driver):
        for job in jobs:
            await execute_job(job, driver=driver, handle=handles[job.name], context=None)
            ran.append(job.id)
    return ran


async def test_committed_rows_are_published_onto_redis_under_their_ids(
    pg_pool: Pool, redis: RedisDriver
) -> None:
    billing = billing_jobs()
    store = wire(pg_pool, redis)
    await stage(pg_pool, billing, ["o1", "o2"])
    # A rolled-back transaction stages nothing.
    async with pg_pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        with bind_transaction(conn):
            await billing.create_invoice.enqueue({"order": "rolled-back"})
        await tx.rollback()
    staged = await outbox_rows(pg_pool)
    assert len(staged) == 4
    assert await claim_all(redis) == []  # nothing reaches Redis before the relay

    result = await relay(store, redis).run_once()
    assert result.published == [r["id"] for r in staged]
    assert await job_rows(pg_pool) == []  # Postgres holds the outbox only, no job rows

    jobs = await claim_all(redis)
    assert [(j.id, j.run_id, j.name) for j in jobs] == [
        (r["id"], r["run_id"], r["name"]) for r in staged
    ]
    assert [j.input for j in jobs] == [{"order": o} for o in ("o1", "o1", "o2", "o2")]
    assert all(r["published_at_ms"] is not None for r in await outbox_rows(pg_pool))
    assert await store.pending() == 0

    # Outside a transaction the facade publishes straight onto Redis: no outbox row.
    direct = await billing.create_invoice.enqueue({"order": "o3"})
    assert len(await outbox_rows(pg_pool)) == 4
    [fresh] = await claim_all(redis)
    assert (fresh.id, fresh.run_id) == (direct.id, direct.run_id)


@pytest.mark.slow
async def test_a_relay_killed_between_publish_and_mark_makes_no_second_job_on_redis(
    pg_dsn: str, pg_pool: Pool, redis: RedisDriver, redis_url: str, redis_prefix: str
) -> None:
    billing = billing_jobs()
    handles = {"create_invoice": billing.create_invoice, "charge_card": billing.charge_card}
    store = wire(pg_pool, redis)
    await stage(pg_pool, billing, ["o1", "o2", "o3"])
    staged = [r["id"] for r in await outbox_rows(pg_pool)]

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.outbox_relay_child",
        pg_dsn,
        "3",
        redis_url,
        redis_prefix,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        async with asyncio.timeout(30):
            while not (line := (await child.stdout.readline()).decode()).startswith("STALLED "):
                if not line:
                    stderr = await child.stderr.read() if child.stderr else b""
                    raise AssertionError(f"the relay ended first: {stderr.decode()}")
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    assert line.split() == ["STALLED", staged[2]]

    # Three jobs on Redis; the third was published but never marked.
    published = [r["published_at_ms"] is not None for r in await outbox_rows(pg_pool)]
    assert published == [True, True] + [False] * 4
    # Every job the dead relay made runs to the end, the unmarked third one included.
    assert await run_all(redis, handles) == staged[:3]

    # Past the dead relay's lease another relay republishes the third: it meets the FINISHED
    # job on Redis (same id), so nothing is inserted; then it publishes the rest in order.
    later = relay(store, redis, clock=FrozenClock(SYSTEM_CLOCK.now_ms() + LEASE + 1_000))
    result = await later.run_once()
    assert result.published == staged[2:]
    assert result.deduped == [staged[2]]
    assert await run_all(redis, handles) == staged[3:]
    assert billing.ran == [
        (name, order) for order in ("o1", "o2", "o3") for name in ("create_invoice", "charge_card")
    ]
    stats = (await redis.stats()).queues["default"]
    assert (stats.done, stats.ready, stats.running) == (6, 0, 0)
    rows = [k for k in await prefix_keys(redis.client, redis_prefix) if ":job:" in k]
    assert sorted(k.rsplit(":", 1)[1] for k in rows) == sorted(staged)  # six rows, no seventh
    assert await store.pending() == 0
