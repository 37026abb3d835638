"""Postgres driver fixtures: a driver on a frozen clock over the test's own database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(1_700_000_000_000)


@pytest.fixture
async def pg(pg_pool: asyncpg.Pool[Any], clock: FrozenClock) -> AsyncIterator[PostgresDriver]:
    driver = postgres_driver(pg_pool, clock=clock)
    try:
        yield driver
    finally:
        await driver.close()


@pytest.fixture
async def other_pool(pg_dsn: str) -> AsyncIterator[asyncpg.Pool[Any]]:
    """A second process's pool (the enqueuing side of the wake tests)."""
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    assert pool is not None
    yield pool
    await pool.close()
