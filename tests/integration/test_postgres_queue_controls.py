"""Debounce and unique_for on Postgres beyond the conformance suite: many enqueues of one key
on separate connections make one run; a run a claim takes while a debounce waits for its row
lock is deduped, not moved (the UPDATE re-reads the row it locked); a batch that cannot honour
them refuses them and queues nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.support.conformance import req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import Enqueued, EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.errors import EnqueueOptionUnsupportedError

T0 = 1_700_000_040_000
HOUR_MS = 3_600_000


async def test_enqueues_on_separate_connections_make_one_run(pg_dsn: str) -> None:
    pools = [await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1) for _ in range(8)]
    drivers = [postgres_driver(pool, clock=FrozenClock(T0)) for pool in pools]
    try:
        controls: list[dict[str, Any]] = [{"debounce_ms": 5_000}, {"unique_for_ms": HOUR_MS}]
        for options in controls:
            key = f"burst-{sorted(options)[0]}"
            answers = await asyncio.gather(
                *(
                    drivers[n % len(drivers)].enqueue(req(key=key, input={"n": n}, **options))
                    for n in range(64)
                )
            )
            assert len({a.id for a in answers}) == 1
            assert sum(not a.deduped for a in answers) == 1
        count = await pools[0].fetchval("select count(*) from x_jobs")
        assert count == 2
    finally:
        for driver in drivers:
            await driver.close()
        for pool in pools:
            await pool.close()


async def test_a_run_claimed_while_the_debounce_waits_for_its_lock_is_deduped(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    try:
        first = await driver.enqueue(req(key="k", input={"v": 1}, debounce_ms=5_000))
        async with pg_pool.acquire() as conn, conn.transaction():
            # A claim's own shape: the row locked, then made running under claim 1.
            await conn.execute("select 1 from x_jobs where id = $1 for update", first.id)
            await conn.execute(
                "update x_jobs set state = 'running', claim = 1, attempt = 1 where id = $1",
                first.id,
            )
            moving = asyncio.ensure_future(
                driver.enqueue(req(key="k", input={"v": 2}, debounce_ms=5_000))
            )
            async with asyncio.timeout(10):
                while not await _waits_for_a_lock(pg_pool):
                    await asyncio.sleep(0.01)
        answer = await moving
        assert (answer.id, answer.deduped, answer.debounced) == (first.id, True, False)
        row = await pg_pool.fetchrow("select state, input from x_jobs where id = $1", first.id)
        assert row is not None
        assert (row["state"], row["input"]) == ("running", '{"v": 1}')
    finally:
        await driver.close()


@pytest.mark.parametrize("in_batch", [False, True])
async def test_a_holder_acked_while_the_insert_runs_still_holds_its_unique_for_key(
    pg_pool: asyncpg.Pool[Any], in_batch: bool
) -> None:
    """The window enqueue_controlled.sql alone leaves open: its snapshot saw the holder
    running, and the ack committed while the insert waited on the holder's row, so the insert
    no longer conflicts. The driver's second look in the same transaction finds the holder
    done and rolls the insert back: one run, the new enqueue answered deduped onto it."""
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    try:
        first = await driver.enqueue(req(key="k", unique_for_ms=HOUR_MS))
        await pg_pool.execute(
            "update x_jobs set state = 'running', claim = 1, attempt = 1 where id = $1", first.id
        )
        async with pg_pool.acquire() as conn:
            ack = conn.transaction()
            await ack.start()
            # The ack's own shape: the row done, its finish stamped, not yet committed.
            await conn.execute(
                "update x_jobs set state = 'done', finished_at = x_ts($2::bigint),"
                " lease_expires_at = null where id = $1",
                first.id,
                T0,
            )
            again = req(key="k", input={"v": 2}, unique_for_ms=HOUR_MS)

            async def enqueue_again() -> Enqueued:
                if in_batch:
                    return (await driver.enqueue_many([again]))[0]
                return await driver.enqueue(again)

            racing = asyncio.ensure_future(enqueue_again())
            async with asyncio.timeout(10):
                while not await _waits_for_a_lock(pg_pool):
                    await asyncio.sleep(0.01)
            await ack.commit()
        answer = await racing
        assert (answer.id, answer.deduped) == (first.id, True)
        assert await pg_pool.fetchval("select count(*) from x_jobs") == 1
    finally:
        await driver.close()


async def _waits_for_a_lock(pool: asyncpg.Pool[Any]) -> bool:
    waiting = await pool.fetchval(
        "select count(*) from pg_stat_activity"
        " where datname = current_database() and wait_event_type = 'Lock'"
    )
    return int(waiting) > 0


async def test_a_batch_that_cannot_honour_them_refuses_them_and_queues_nothing(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = postgres_driver(pg_pool, clock=FrozenClock(T0))
    try:

        def mixed() -> Any:
            yield req(key="plain")
            yield req(key="debounced", debounce_ms=5_000)

        with pytest.raises(EnqueueOptionUnsupportedError):
            await driver.enqueue_many(mixed())
        with pytest.raises(EnqueueOptionUnsupportedError) as info:
            await driver.enqueue_many_new([req(key="a"), req(key="b", unique_for_ms=HOUR_MS)])
        assert info.value.meta["index"] == 1
        assert await pg_pool.fetchval("select count(*) from x_jobs") == 0
        # The same batch as a list is seen whole: honoured, one statement per job.
        as_list: list[EnqueueRequest] = list(mixed())
        answers = await driver.enqueue_many(as_list)
        assert [a.deduped for a in answers] == [False, False]
    finally:
        await driver.close()
