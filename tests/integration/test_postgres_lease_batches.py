"""The Postgres lease store's acquires and releases share statements: those that arrive while
one is in flight go out together, each caller still answered for its own slot (held or not,
freed) only once the statement committed; the limits hold whatever shares a statement."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.leases import PostgresLeaseStore


class CountingPool:
    """The real pool, counting the statements the store sends through ``execute``."""

    def __init__(self, pool: asyncpg.Pool[Any]) -> None:
        self.pool = pool
        self.executed = 0
        self.fetched = 0

    async def execute(self, sql: str, *args: Any) -> str:
        self.executed += 1
        return await self.pool.execute(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self.fetched += 1
        return await self.pool.fetchrow(sql, *args)

    async def fetch(self, sql: str, *args: Any) -> Any:
        self.fetched += 1
        return await self.pool.fetch(sql, *args)


async def test_concurrent_releases_share_a_statement_and_each_frees_its_slot(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    counting = CountingPool(pg_pool)
    leases = PostgresLeaseStore(counting, FrozenClock())  # type: ignore[arg-type]
    pairs = [(f"job-key:hook:ep_{n % 4}", f"w{n}") for n in range(16)]
    assert all(
        await asyncio.gather(*(leases.acquire(key, holder, 8, 30_000) for key, holder in pairs))
    )
    # The first alone; the other fifteen (four keys) in rounds of distinct keys.
    assert counting.fetched <= 1 + 4
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


async def test_a_limit_holds_when_its_acquirers_share_statements(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    leases = PostgresLeaseStore(pg_pool, FrozenClock())
    got = await asyncio.gather(*(leases.acquire("k", f"w{n}", 3, 30_000) for n in range(10)))
    assert sum(got) == 3
    assert await leases.holders("k") == [f"w{n}" for n in range(10) if got[n]]
    # One holder asking twice at once holds one slot, and both asks are answered held.
    both = await asyncio.gather(
        leases.acquire("j", "w1", 2, 30_000), leases.acquire("j", "w1", 2, 30_000)
    )
    assert list(both) == [True, True]
    assert await leases.holders("j") == ["w1"]
    await leases.close()
