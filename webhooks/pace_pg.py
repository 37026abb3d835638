"""``PgPace``: an endpoint's send slots in ``x_webhook_pace`` (``0015_webhook_pace.sql``), so
``rate_per_s`` holds fleet-wide: every deliverer reserves from the same row, under its lock.

One statement a reservation, and only for an endpoint that has a rate. Times come from the
clock given (the deliverer's); deliverers on hosts whose clocks disagree space their POSTs by
the gap plus at most that disagreement, since a slot is never earlier than the row's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.plan_settings import JitCheck
from ujobs.drivers.postgres.sql import query

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

_RESERVE = query("webhooks_pace_reserve")


class PgPace:
    def __init__(self, pool: Pool, clock: Clock = SYSTEM_CLOCK) -> None:
        self._pool = pool
        self._clock = clock
        self._jit = JitCheck("the webhook pace")

    async def reserve(self, endpoint_id: str, rate_per_s: float) -> float:
        await self._jit.once(self._pool)
        wait_ms = await self._pool.fetchval(_RESERVE, endpoint_id, rate_per_s, self._clock.now_ms())
        return float(wait_ms) / 1000


__all__ = ["PgPace"]
