"""Purge targets for the ledgers the other families keep: webhook deliveries and events, and
the NATS edge's settlements outbox.

Each is one ``LedgerPurgeTarget`` (``ujobs.drivers.postgres.ledger_purge``: a window, a
bounded ``skip locked`` delete, its count), as the outbox's is. What is not yet delivered is
never deleted:

- ``x_webhook_deliveries`` (``webhook_deliveries_purge_target``, 30 days): the attempt rows of
  a delivery still live stay with it.
- ``x_webhook_events`` (``webhook_events_purge_target``, the same window): an event goes once
  no ledger row names it (``redeliver`` reads failed events from the ledger) and no job row of
  the built-in families carries it, whatever its state: dead jobs are kept longer than events,
  and retrying a dead delivery reads its event. Run it after the deliveries target: the rows
  that one removes are what frees an event (and the jobs target's, in time).
- ``x_settlements`` (``settlements_purge_target``, 1 day): published rows only; a pending one is
  a settlement not yet on ``UJOBS_SETTLED``.

The exports keep no ledger of their own: an export is an ``x_jobs`` row with its steps (the
jobs target sweeps them) and objects on its sink, which a sweep never deletes (the README's
"Retention" says why and what to set on the store instead).
"""

from __future__ import annotations

from collections.abc import Sequence

from ujobs.drivers.postgres.executor import PgExecutor
from ujobs.drivers.postgres.ledger_purge import (
    DEFAULT_LEDGER_BATCH_SIZE,
    DEFAULT_LEDGER_MAX_BATCHES,
    LedgerPurgeTarget,
    check_purge_options,
)
from ujobs.drivers.postgres.sql import query

DAY_MS = 86_400_000

WEBHOOK_DELIVERIES_PURGE_TARGET = "x_webhook_deliveries"
WEBHOOK_EVENTS_PURGE_TARGET = "x_webhook_events"
SETTLEMENTS_PURGE_TARGET = "x_settlements"
DEFAULT_WEBHOOKS_RETENTION_MS = 30 * DAY_MS
DEFAULT_SETTLEMENTS_RETENTION_MS = DAY_MS
BUILTIN_WEBHOOK_FAMILIES: tuple[str, ...] = ("ujobs.webhooks", "ujobs.webhooks.global")
"""The families whose deliveries read ``x_webhook_events`` (``ujobs.webhooks.builtin``; ``shared``
does not import ``webhooks``, and a test holds the two lists equal)."""


def webhook_deliveries_purge_target(
    *,
    executor: PgExecutor,
    retention_ms: int = DEFAULT_WEBHOOKS_RETENTION_MS,
    batch_size: int = DEFAULT_LEDGER_BATCH_SIZE,
    max_batches: int = DEFAULT_LEDGER_MAX_BATCHES,
) -> LedgerPurgeTarget:
    """``x_webhook_deliveries`` rows recorded longer ago than ``retention_ms``, but never the
    attempts of a delivery still live."""
    check_purge_options(retention_ms=retention_ms, batch_size=batch_size, max_batches=max_batches)
    return LedgerPurgeTarget(
        WEBHOOK_DELIVERIES_PURGE_TARGET,
        executor,
        retention_ms,
        query("webhooks_deliveries_purge"),
        query("webhooks_deliveries_purge_count"),
        batch_size=batch_size,
        max_batches=max_batches,
    )


def webhook_events_purge_target(
    *,
    executor: PgExecutor,
    retention_ms: int = DEFAULT_WEBHOOKS_RETENTION_MS,
    batch_size: int = DEFAULT_LEDGER_BATCH_SIZE,
    max_batches: int = DEFAULT_LEDGER_MAX_BATCHES,
    families: Sequence[str] = BUILTIN_WEBHOOK_FAMILIES,
) -> LedgerPurgeTarget:
    """``x_webhook_events`` stored longer ago than ``retention_ms`` that no ledger row and no
    job row of ``families`` (in any state) still names."""
    check_purge_options(retention_ms=retention_ms, batch_size=batch_size, max_batches=max_batches)
    return LedgerPurgeTarget(
        WEBHOOK_EVENTS_PURGE_TARGET,
        executor,
        retention_ms,
        query("webhooks_events_purge"),
        query("webhooks_events_purge_count"),
        args=(list(families),),
        batch_size=batch_size,
        max_batches=max_batches,
    )


def settlements_purge_target(
    *,
    executor: PgExecutor,
    retention_ms: int = DEFAULT_SETTLEMENTS_RETENTION_MS,
    batch_size: int = DEFAULT_LEDGER_BATCH_SIZE,
    max_batches: int = DEFAULT_LEDGER_MAX_BATCHES,
) -> LedgerPurgeTarget:
    """``x_settlements`` rows published longer ago than ``retention_ms``; never a pending one."""
    check_purge_options(retention_ms=retention_ms, batch_size=batch_size, max_batches=max_batches)
    return LedgerPurgeTarget(
        SETTLEMENTS_PURGE_TARGET,
        executor,
        retention_ms,
        query("settlements_purge"),
        query("settlements_purge_count"),
        batch_size=batch_size,
        max_batches=max_batches,
    )
