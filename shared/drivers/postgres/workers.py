"""The worker registry in ``x_job_workers``: what ``introspect.workers()`` and a scaler read.

A beat upserts the row and pushes its expiry ``ttl_ms`` out; ``draining_at`` is stamped by the
first beat that says the worker drains and never moved after, so a scaler stops counting the
jobs a draining worker still holds. Expired rows are deleted by any worker's next beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.clock import Clock
from ujobs.drivers.base import MAX_WORKER_IN_FLIGHT, WorkerInfo
from ujobs.drivers.postgres.sql import query

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]

_BEAT = query("worker_beat")
_REMOVE = query("worker_remove")

OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "beat": ("worker_beat",),
    "remove": ("worker_remove",),
}


class PostgresWorkerRegistry:
    """``WorkerRegistry`` for the Postgres driver (``driver.workers``)."""

    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    async def beat(
        self, info: WorkerInfo, in_flight: Sequence[str], ttl_ms: int, *, draining: bool = False
    ) -> None:
        await self._pool.execute(
            _BEAT,
            info.id,
            info.host,
            info.pid,
            info.started_at_ms,
            list(info.queues),
            info.slots,
            list(in_flight)[:MAX_WORKER_IN_FLIGHT],
            self._clock.now_ms(),
            ttl_ms,
            draining,
        )

    async def remove(self, worker_id: str) -> None:
        await self._pool.execute(_REMOVE, worker_id)
