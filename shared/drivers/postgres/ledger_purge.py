"""``LedgerPurgeTarget``: the one shape of every append-only ledger's retention target.

A window (rows older than ``now_ms - retention_ms`` on the clock the sweep passes in go), one
statement that deletes up to ``batch_size`` of them ``skip locked`` and answers how many, and
its count for ``ujobs db purge --dry-run``. A pass runs at most ``max_batches`` batches, so a
sweep never holds a long lock, two sweeps split the work instead of queueing on each other, and
a backlog is worked off across passes. What a ledger must keep (an unpublished outbox row, a
delivery still live) is the statement's to leave alone. The outbox, the webhook ledgers and the
settlements outbox are each one of these with their own statements and defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from ujobs.drivers.postgres.executor import PgExecutor
from ujobs.errors import ConfigInvalidError

DEFAULT_LEDGER_BATCH_SIZE = 1_000
DEFAULT_LEDGER_MAX_BATCHES = 50


@dataclass(frozen=True, slots=True)
class LedgerPurgeTarget:
    """A ``PurgeTarget``: ``name`` and ``purge_expired(now_ms) -> rows removed``, over one
    delete statement (cutoff ms, batch size, ``args``...) and its count (cutoff ms,
    ``args``...)."""

    name: str
    executor: PgExecutor
    retention_ms: int
    purge_statement: str
    count_statement: str
    args: tuple[object, ...] = ()
    batch_size: int = DEFAULT_LEDGER_BATCH_SIZE
    max_batches: int = DEFAULT_LEDGER_MAX_BATCHES

    async def purge_expired(self, now_ms: int) -> int:
        cutoff = now_ms - self.retention_ms
        removed = 0
        for _ in range(self.max_batches):
            rows = await self.executor.fetch(
                self.purge_statement, cutoff, self.batch_size, *self.args
            )
            deleted = int(rows[0]["deleted"])
            removed += deleted
            if deleted < self.batch_size:
                break
        return removed

    async def count_expired(self, now_ms: int) -> int:
        """The rows a pass at ``now_ms`` would remove (``ujobs db purge --dry-run``)."""
        rows = await self.executor.fetch(
            self.count_statement, now_ms - self.retention_ms, *self.args
        )
        return int(rows[0]["expired"])


def check_purge_options(**options: int) -> None:
    """Every retention option is a positive whole number (``X_CONFIG_INVALID`` naming it)."""
    for option, value in options.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigInvalidError(
                f"{option} must be a positive whole number; got {value!r}",
                meta={"option": option},
            )
