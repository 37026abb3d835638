"""``PgWebhookLedger``: the ``WebhookLedger`` seam in Postgres, over ``x_webhook_deliveries``
and the endpoint row's verdict column (``0010_webhooks.sql``); ``PgWebhookStore.ledger`` is one.
Every statement is a named file under ``sql/queries/webhooks_*.sql``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.sql import query
from ujobs.webhooks.ledger import DeliveryAttempt

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

log = logging.getLogger("ujobs.webhooks")

MAX_DELIVERED_BATCH = 500


class PgWebhookLedger:
    """The ledger seam over ``x_webhook_deliveries`` and the endpoint row's verdict column.

    ``batch_delivered_ms`` (the deliverer sets it): a successful attempt is buffered and written
    with the others of the next few milliseconds in one statement, a commit saved per
    delivery. Nothing throws after a success, so nothing waits on its row; a failure flushes
    the buffer first, so the consecutive count is always moved in order; ``close`` flushes
    what is left. A process killed in between loses those rows (the ledger then shows fewer
    successes, never a failure that did not happen)."""

    def __init__(
        self, pool: Pool, clock: Clock = SYSTEM_CLOCK, *, batch_delivered_ms: int | None = None
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._batch_ms = batch_delivered_ms
        self._pending: list[DeliveryAttempt] = []
        self._flusher: asyncio.Task[None] | None = None
        self._flushing = asyncio.Lock()

    async def record(self, attempt: DeliveryAttempt) -> int:
        if self._batch_ms is not None and attempt.outcome == "delivered":
            self._pending.append(attempt)
            if len(self._pending) >= MAX_DELIVERED_BATCH:
                await self.flush()
            elif self._flusher is None:
                self._flusher = asyncio.ensure_future(self._flush_soon(self._batch_ms))
            return 0
        if self._pending:
            await self.flush()
        count = await self._pool.fetchval(
            query("webhooks_delivery_record"),
            attempt.endpoint_id,
            attempt.event_id,
            attempt.job_id,
            attempt.attempt,
            attempt.outcome,
            attempt.status,
            attempt.code,
            attempt.latency_ms,
            attempt.response_excerpt,
            attempt.at_ms,
        )
        return int(count)

    async def _flush_soon(self, delay_ms: int) -> None:
        await asyncio.sleep(delay_ms / 1000)
        self._flusher = None
        try:
            await self.flush()
        except Exception as exc:  # kept in the buffer: the next flush tries them again
            log.warning(
                "webhooks.ledger.flush-failed", extra={"error": f"{type(exc).__name__}: {exc}"}
            )

    async def flush(self) -> None:
        """Write the buffered successes (one statement)."""
        async with self._flushing:
            batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                await self._pool.execute(
                    query("webhooks_delivered_batch"),
                    [a.endpoint_id for a in batch],
                    [a.event_id for a in batch],
                    [a.job_id for a in batch],
                    [a.attempt for a in batch],
                    [a.status for a in batch],
                    [a.latency_ms for a in batch],
                    [a.response_excerpt for a in batch],
                    [a.at_ms for a in batch],
                )
            except BaseException:
                self._pending[:0] = batch
                raise

    async def close(self) -> None:
        """Stop the timer and write what is buffered."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        await self.flush()

    async def is_disabled(self, endpoint_id: str) -> bool:
        return bool(await self._pool.fetchval(query("webhooks_is_disabled"), endpoint_id))

    async def disable(self, endpoint_id: str, reason: str) -> None:
        await self._pool.fetchval(
            query("webhooks_endpoint_disable"), endpoint_id, reason, self._clock.now_ms()
        )
