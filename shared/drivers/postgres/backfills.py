"""The backfill ledger in ``x_backfills``: one row per pass, the twin of ``x_migrations``."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.clock import Clock
from ujobs.drivers.base import BackfillRow, BackfillStatus
from ujobs.drivers.postgres.rows import backfill_row, dumps
from ujobs.drivers.postgres.sql import query

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
JSONValue = Any

_BEGIN = query("backfill_begin")
_PROGRESS = query("backfill_progress")
_FINISH = query("backfill_finish")
_LIST = query("backfill_list")
_LATEST = query("backfill_latest_completed")

OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "begin": ("backfill_begin",),
    "progress": ("backfill_progress",),
    "finish": ("backfill_finish",),
    "list": ("backfill_list",),
    "latest_completed": ("backfill_latest_completed",),
}


class PostgresBackfillLedger:
    """``BackfillLedger`` for the Postgres driver (``driver.backfills``)."""

    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    async def begin(
        self,
        name: str,
        run_id: str,
        checksum: str,
        app_version: str | None,
        tenant: str | None = None,
    ) -> BackfillRow:
        row = await self._pool.fetchrow(
            _BEGIN, name, run_id, checksum, app_version, self._clock.now_ms(), tenant
        )
        assert row is not None
        return backfill_row(row)

    async def progress(
        self, name: str, run_id: str, rows: int, cursor: JSONValue, *, tenant: str | None = None
    ) -> None:
        await self._pool.execute(_PROGRESS, name, run_id, rows, dumps(cursor), tenant)

    async def finish(
        self,
        name: str,
        run_id: str,
        status: BackfillStatus,
        error: str | None = None,
        *,
        tenant: str | None = None,
    ) -> None:
        await self._pool.execute(_FINISH, name, run_id, status, error, self._clock.now_ms(), tenant)

    async def list(
        self, *, name: str | None = None, status: BackfillStatus | None = None, limit: int = 100
    ) -> builtins.list[BackfillRow]:
        return [backfill_row(r) for r in await self._pool.fetch(_LIST, name, status, limit)]

    async def latest_completed(self, name: str, tenant: str | None = None) -> BackfillRow | None:
        row = await self._pool.fetchrow(_LATEST, name, tenant)
        return None if row is None else backfill_row(row)
