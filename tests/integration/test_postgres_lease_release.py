"""The Postgres lease store's releases share statements: releases that arrive while one is in
flight go out together, each caller still answered only once its slot is free."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from shared.clock import FrozenClock
from shared.drivers.postgres.leases import PostgresLeaseStore


class CountingPool:
    """The real pool, counting the statements the store sends through ``execute``."""

    def __init__(self, pool: asyncpg.Pool[Any]) -> None:
        self.pool = pool
        self.executed = 0

    async def execute(self, sql: str, *args: Any) -> str:
        self.executed += 1
        return await self.pool.execute(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        return await self.pool.fetchrow(sql, *args)

    async def fetch(self, sql: str, *args: Any) -> Any:
        return await self.pool.fetch(sql, *args)


async def test_concurrent_releases_share_a_statement_and_each_frees_its_slot(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    counting = CountingPool(pg_pool)
    leases = PostgresLeaseStore(counting, FrozenClock())  # type: ignore[arg-type]
    pairs = [(f"job-key:hook:ep_{n % 4}", f"w{n}") for n in range(16)]
    for key, holder in pairs:
        assert await leases.acquire(key, holder, 8, 30_000)
    await asyncio.gather(*(leases.release(key, holder) for key, holder in pairs))
    assert counting.executed <= 2  # the first alone, the fifteen that waited for it together
    assert await pg_pool.fetchval("select count(*) from x_job_leases") == 0
    # Only the named holders' slots go: another holder of the same key keeps its own.
    assert await leases.acquire("job-key:hook:ep_0", "stays", 8, 30_000)
    assert await leases.acquire("job-key:hook:ep_0", "goes", 8, 30_000)
    await asyncio.gather(
        leases.release("job-key:hook:ep_0", "goes"), leases.release("job-key:hook:ep_1", "stays")
    )
    assert await leases.holders("job-key:hook:ep_0") == ["stays"]
    await leases.close()
