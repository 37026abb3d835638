"""A table of one test's own in the session's database.

The database outlives the test (``pg_dsn`` empties its tables between tests, it does not drop
them), so a table a test creates for a user's app is dropped when the test ends, and one left by
a killed run is dropped before it is made again."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg


@contextlib.asynccontextmanager
async def scratch_table(pool: asyncpg.Pool[Any], name: str, ddl: str) -> AsyncIterator[None]:
    """``ddl`` (which creates ``name``) for the block; ``name`` dropped before and after."""
    await pool.execute(f"drop table if exists {name}")
    await pool.execute(ddl)
    try:
        yield
    finally:
        await pool.execute(f"drop table if exists {name}")
