"""``outbox_purge_target()``: retention for ``x_outbox``, a target for the purge job.

Only PUBLISHED rows older than ``published_retention_ms`` (default 7 days,
``jobs.outboxRetentionMs``) go; an unpublished row is a job not yet handed over and is never
deleted. Age is measured against the clock the purge job passes in (``purge_expired(now_ms)``,
one reading per pass) — the relay stamped ``published_at`` from its own clock, not the
database's. A pass deletes at most ``max_batches`` batches of ``batch_size`` rows,
``skip locked``, so two sweeps split the work instead of queueing on each other (one
``LedgerPurgeTarget``, the shape every ledger's target shares).
"""

from __future__ import annotations

from ujobs.drivers.postgres.executor import PgExecutor
from ujobs.drivers.postgres.ledger_purge import (
    DEFAULT_LEDGER_BATCH_SIZE,
    DEFAULT_LEDGER_MAX_BATCHES,
    LedgerPurgeTarget,
    check_purge_options,
)
from ujobs.drivers.postgres.sql import query

OUTBOX_PURGE_TARGET = "x_outbox"
DEFAULT_PUBLISHED_RETENTION_MS = 7 * 86_400_000


def outbox_purge_target(
    *,
    executor: PgExecutor,
    published_retention_ms: int = DEFAULT_PUBLISHED_RETENTION_MS,
    batch_size: int = DEFAULT_LEDGER_BATCH_SIZE,
    max_batches: int = DEFAULT_LEDGER_MAX_BATCHES,
) -> LedgerPurgeTarget:
    """The ``x_outbox`` retention target; every option is a positive whole number."""
    check_purge_options(
        published_retention_ms=published_retention_ms,
        batch_size=batch_size,
        max_batches=max_batches,
    )
    return LedgerPurgeTarget(
        OUTBOX_PURGE_TARGET,
        executor,
        published_retention_ms,
        query("outbox_purge"),
        query("outbox_purge_count"),
        batch_size=batch_size,
        max_batches=max_batches,
    )
