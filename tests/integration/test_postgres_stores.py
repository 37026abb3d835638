"""The side stores on Postgres: fleet leases, the worker registry, the backfill ledger, the
event bus (database clock), and the scaler's depth statement."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest, WorkerInfo
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.leases import job_lease_key
from ujobs.errors import InputInvalidError, InvariantError
from ujobs.events.bus_postgres import PostgresEventBus


async def test_leases_hold_at_most_limit_in_slot_order_and_reclaim_by_ttl(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    leases = pg.leases
    key = job_lease_key("sync", "acct-1")
    assert key == "job-key:sync:acct-1"
    assert job_lease_key("sync") == "job:sync"
    assert await leases.acquire(key, "h1", 2, 1_000)
    assert await leases.acquire(key, "h2", 2, 1_000)
    assert not await leases.acquire(key, "h3", 2, 1_000)
    assert await leases.acquire(key, "h1", 2, 1_000)  # a holder re-acquiring renews
    assert await leases.holders(key) == ["h1", "h2"]
    await leases.release(key, "h1")
    assert await leases.acquire(key, "h3", 2, 1_000)
    assert await leases.holders(key) == ["h3", "h2"]
    clock.advance(500)
    assert await leases.renew(key, "h2", 1_000)
    clock.advance(600)  # h3 lapsed (SIGKILLed holder), h2 renewed
    assert not await leases.renew(key, "h3", 1_000)
    assert await leases.holders(key) == ["h2"]
    assert await leases.acquire(key, "h4", 2, 1_000)
    assert await leases.holders(key) == ["h4", "h2"]


async def test_concurrent_acquires_never_exceed_the_limit(
    pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    drivers = [postgres_driver(pg_pool, clock=clock) for _ in range(8)]
    got = await asyncio.gather(
        *(d.leases.acquire("job:x", f"h{i}", 3, 10_000) for i, d in enumerate(drivers))
    )
    assert sum(got) == 3
    assert len(await drivers[0].leases.holders("job:x")) == 3


def info(worker_id: str, started: int) -> WorkerInfo:
    return WorkerInfo(
        id=worker_id, host="h", pid=1, started_at_ms=started, queues=("default",), slots=4
    )


async def test_worker_registry_stamps_draining_once_and_rows_expire(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    t0 = clock.now_ms()
    await pg.workers.beat(info("w1", t0), ["j1"], 1_000)
    await pg.workers.beat(info("w2", t0 + 1), [f"j{i}" for i in range(150)], 5_000)
    clock.advance(100)
    await pg.workers.beat(info("w1", t0), ["j1", "j2"], 1_000, draining=True)
    clock.advance(100)
    await pg.workers.beat(info("w1", t0), [], 1_000, draining=True)
    rows = {w.id: w for w in await pg.introspect.workers()}
    assert rows["w1"].draining_at_ms == t0 + 100
    assert rows["w1"].in_flight == ()
    assert rows["w1"].last_heartbeat_ms == t0 + 200
    assert len(rows["w2"].in_flight) == 100
    assert rows["w2"].draining_at_ms is None
    clock.advance(1_000)
    assert [w.id for w in await pg.introspect.workers()] == ["w2"]
    await pg.workers.remove("w2")
    assert await pg.introspect.workers() == []


async def test_backfill_ledger_adopts_a_retry_and_reports_passes(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    ledger = pg.backfills
    first = await ledger.begin("slugs", "run-1", "abc", "1.0")
    assert (first.status, first.rows_processed, first.started_at_ms) == (
        "running",
        0,
        clock.now_ms(),
    )
    await ledger.progress("slugs", "run-1", 1_000, {"after": 42})
    clock.advance(50)
    retry = await ledger.begin("slugs", "run-1", "abc", "1.0")
    assert retry.started_at_ms == first.started_at_ms
    assert retry.last_cursor == {"after": 42}
    await ledger.finish("slugs", "run-1", "completed")
    clock.advance(50)
    await ledger.begin("slugs", "run-2", "abc", "1.1")
    await ledger.finish("slugs", "run-2", "failed", "boom")
    latest = await ledger.latest_completed("slugs")
    assert latest is not None
    assert latest.run_id == "run-1"
    assert latest.completed_at_ms == clock.now_ms() - 50
    assert [r.run_id for r in await ledger.list(name="slugs")] == ["run-2", "run-1"]
    [failed] = await ledger.list(status="failed")
    assert failed.error == "boom"
    assert await ledger.latest_completed("other") is None


async def test_event_bus_uses_the_database_clock_and_purges(pg_pool: asyncpg.Pool[Any]) -> None:
    bus = PostgresEventBus(pg_pool)
    db_now = int(await pg_pool.fetchval("select x_ms(date_trunc('milliseconds', now()))"))
    before = await bus.now()
    assert abs(before - db_now) < 60_000
    published = await bus.publish("paid", {"order": 1, "tags": ["a", "b"]})
    assert published.published_at_ms >= before
    assert published.expires_at_ms > published.published_at_ms
    assert (await bus.find("paid", since_ms=before, match={"order": 1})) == published
    assert await bus.find("paid", since_ms=before, match={"order": 2}) is None
    assert await bus.find("paid", since_ms=before, match={"tags": ["a"]}) is None
    assert await bus.find("paid", since_ms=before, match=lambda p: p["order"] == 1) == published
    assert await bus.find("paid", since_ms=published.published_at_ms + 1) is None
    short = await bus.publish("paid", {"order": 3}, ttl_ms=1)
    await pg_pool.execute(
        "update x_job_events set expires_at = now() - interval '1 second' where id = $1",
        short.id,
    )
    assert await bus.find("paid", since_ms=before, match={"order": 3}) is None
    assert await bus.purge_expired() == 1
    assert await bus.purge_expired() == 0


async def test_scaler_depth_counts_running_and_due_minus_draining_and_paused(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """On the system clock: the scaler's statement reads the database's now()."""
    pg = postgres_driver(pg_pool)
    for i in range(3):
        await pg.enqueue(EnqueueRequest(name="j", input={}, idempotency_key=f"b{i}", queue="banks"))
    await pg.enqueue(EnqueueRequest(name="j", input={}, idempotency_key="l", queue="banks-long"))
    await pg.enqueue(
        EnqueueRequest(
            name="j",
            input={},
            idempotency_key="later",
            queue="banks",
            run_at_ms=pg.clock.now_ms() + 3_600_000,
        )
    )
    await pg.enqueue(EnqueueRequest(name="j", input={}, idempotency_key="o", queue="other"))
    assert await pg.scaler_depth(["banks", "banks-long"]) == 4
    [held] = await pg.claim(ClaimOptions(queues=["banks"], limit=1, worker_id="old-pod"))
    [kept] = await pg.claim(ClaimOptions(queues=["banks"], limit=1, worker_id="new-pod"))
    assert await pg.scaler_depth(["banks", "banks-long"]) == 4
    now = pg.clock.now_ms()
    await pg.workers.beat(
        WorkerInfo("old-pod", "h", 1, now, ("banks",), 1), [held.id], 60_000, draining=True
    )
    await pg.workers.beat(WorkerInfo("new-pod", "h", 2, now, ("banks",), 1), [kept.id], 60_000)
    assert await pg.scaler_depth(["banks", "banks-long"]) == 3
    await pg.introspect.pause_queue("banks-long")
    assert await pg.scaler_depth(["banks", "banks-long"]) == 2
    await pg.workers.remove("old-pod")  # a claimer whose row lapsed is counted again
    assert await pg.scaler_depth(["banks", "banks-long"]) == 3


async def test_event_bus_refuses_what_it_cannot_store(pg_pool: asyncpg.Pool[Any]) -> None:
    bus = PostgresEventBus(pg_pool)
    with pytest.raises(InvariantError):
        await bus.publish("", {})
    with pytest.raises(InvariantError):
        await bus.publish("e", {}, ttl_ms=0)
    with pytest.raises(InputInvalidError):
        await bus.publish("e", {"when": object()})
    with pytest.raises(InvariantError):
        PostgresEventBus(pg_pool, ttl_ms=-1)
    assert await pg_pool.fetchval("select count(*) from x_job_events") == 0
