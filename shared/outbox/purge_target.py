"""``outbox_purge_target()``: retention for ``x_outbox``, a target for the purge job.

Only PUBLISHED rows older than ``published_retention_ms`` (default 7 days,
``jobs.outboxRetentionMs``) go; an unpublished row is a job not yet handed over and is never
deleted. Age is measured against the clock the purge job passes in (``purge_expired(now_ms)``,
one reading per pass) — the relay stamped ``published_at`` from its own clock, not the
database's. A pass deletes at most ``max_batches`` batches of ``batch_size`` rows,
``skip locked``, so two sweeps split the work instead of queueing on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.drivers.postgres.sql import query
from shared.errors import ConfigInvalidError
from shared.outbox.store_postgres import PgFetch

_PURGE = query("outbox_purge")
_COUNT = query("outbox_purge_count")

OUTBOX_PURGE_TARGET = "x_outbox"
DEFAULT_PUBLISHED_RETENTION_MS = 7 * 86_400_000
DEFAULT_PURGE_BATCH_SIZE = 1_000
DEFAULT_PURGE_MAX_BATCHES = 50


@dataclass(frozen=True, slots=True)
class OutboxPurgeTarget:
    """A ``PurgeTarget``: ``name`` and ``purge_expired(now_ms) -> rows removed``."""

    executor: PgFetch
    published_retention_ms: int = DEFAULT_PUBLISHED_RETENTION_MS
    batch_size: int = DEFAULT_PURGE_BATCH_SIZE
    max_batches: int = DEFAULT_PURGE_MAX_BATCHES
    name: str = OUTBOX_PURGE_TARGET

    async def purge_expired(self, now_ms: int) -> int:
        cutoff = now_ms - self.published_retention_ms
        removed = 0
        for _ in range(self.max_batches):
            rows = await self.executor.fetch(_PURGE, cutoff, self.batch_size)
            deleted = int(rows[0]["deleted"])
            removed += deleted
            if deleted < self.batch_size:
                break
        return removed

    async def count_expired(self, now_ms: int) -> int:
        """The rows a pass at ``now_ms`` would remove (``ujobs db purge --dry-run``)."""
        rows = await self.executor.fetch(_COUNT, now_ms - self.published_retention_ms)
        return int(rows[0]["expired"])


def outbox_purge_target(
    *,
    executor: PgFetch,
    published_retention_ms: int = DEFAULT_PUBLISHED_RETENTION_MS,
    batch_size: int = DEFAULT_PURGE_BATCH_SIZE,
    max_batches: int = DEFAULT_PURGE_MAX_BATCHES,
) -> OutboxPurgeTarget:
    """The ``x_outbox`` retention target; every option is a positive whole number."""
    for option, value in (
        ("published_retention_ms", published_retention_ms),
        ("batch_size", batch_size),
        ("max_batches", max_batches),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigInvalidError(
                f"{option} must be a positive whole number; got {value!r}",
                meta={"option": option},
            )
    return OutboxPurgeTarget(executor, published_retention_ms, batch_size, max_batches)
