"""The Postgres driver: the queue in ``x_jobs``, every statement a named file in
``sql/queries`` (loaded by ``sql``), the migrations runner, and the held connections it runs on.

The map:

- ``backfills``: The backfill ledger in ``x_backfills``: one row per pass, the twin of
  ``x_migrations``.
- ``copy``: A batch enqueue as COPY's text format (sql/queries/enqueue_many_copy.sql).
- ``copy_rows``: One job's batch (``RequestRows``) as COPY text, each line from the shared fields
  and the row, no request per row.
- ``deadlock_retry``: One more try for a statement Postgres chose as a deadlock victim.
- ``driver``: The Postgres driver: the queue in ``x_jobs``, every statement a named file in
  ``sql/queries``.
- ``enqueue``: Enqueue on Postgres: one statement per job, one statement per batch.
- ``enqueue_rows``: The rows an enqueue sends: a single enqueue's arguments, a batch's rows with
  its repeats collapsed.
- ``executor``: ``PgExecutor``: what the Postgres scheduler state and lease leader are handed.
- ``held_connections``: A few pooled connections the driver keeps checked out for its hot
  statements.
- ``introspect``: The operator surface (``JobIntrospection``) over ``x_jobs`` and its side
  tables.
- ``leases``: Fleet leases in ``x_job_leases``: at most ``limit`` live holders per key, one row
  per slot.
- ``ledger_purge``: ``LedgerPurgeTarget``: the one shape of every append-only ledger's
  retention target.
- ``migrate``: ``ujobs db migrate``: apply ``sql/migrations/*.sql`` in order, each once,
  recorded.
- ``children``: Children: the child inserted with its parent, the wait's mark and read, the
  job page's list.
- ``plan_settings``: The session settings (``jit = off``) the driver's statements need to keep
  their plans as tables grow.
- ``pool``: ``postgres_pool()``: an asyncpg pool built the way the driver runs fastest.
- ``pooled``: one pooled connection for one call, the database being away leaving as
  ``X_DRIVER_UNREACHABLE`` (the token store's lookups).
- ``progress``: ``run.progress()`` writes, throttled to one per ``PROGRESS_INTERVAL_MS`` per
  run.
- ``read_batch``: Coalescing of concurrent reads into one statement.
- ``results``: Result waits: the row read with its result, the ``result_waited`` mark, and one
  ``LISTEN x_jobs_settled`` session per process while any wait is open.
- ``rows``: Records from the Postgres statements, turned into the contract's dataclasses.
- ``settle_batch``: Coalescing of concurrent settles into one statement.
- ``weights``: Tenant weights in ``x_tenant_weights`` (``TenantWeights``), read by the fair
  claim.
- ``sql``: The named statements under ``sql/queries/``, loaded once at import.
- ``unreachable``: Which asyncpg failures mean "the database was not there", and what they leave
  the driver as.
- ``workers``: The worker registry in ``x_job_workers``: what ``introspect.workers()`` and a
  scaler read.

What this package exports is the public import path of DESIGN.md; code inside
``shared`` imports the leaf modules instead, so no import cycle can form.
"""

from __future__ import annotations

from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.enqueue import (
    WAKE_CHANNEL,
    WAKE_DUE_WITHIN_MS,
    WAKE_SLOT_MS,
    wake_slot,
)

__all__ = [
    "WAKE_CHANNEL",
    "WAKE_DUE_WITHIN_MS",
    "WAKE_SLOT_MS",
    "PostgresDriver",
    "postgres_driver",
    "wake_slot",
]
