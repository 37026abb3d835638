"""The transactional outbox: an enqueue that joins the caller's transaction.

A job row written in the same transaction as the business rows cannot run against rows that
rolled back, and cannot be lost to a crash between COMMIT and enqueue. It is NOT on by
default; three things make it true in a process::

    store = postgres_outbox_store(executor=pool)                    # x_outbox ships in 0001
    set_jobs_facade(outbox_jobs_facade(store=store, driver=driver))  # enqueue joins the tx
    await outbox_relay(store=store, driver=driver, wake=wake).start()  # publishes after COMMIT

with ``wake = postgres_wake(dsn, pool, channels=(OUTBOX_WAKE_CHANNEL,))`` started first.

Inside ``transaction(conn)`` / ``bind_transaction(conn)`` (``ujobs.context``),
``handle.enqueue()`` STAGES the job on the caller's connection — one insert — and answers
``Enqueued(id, run_id, deduped=False)`` with the job's real ids, both minted at staging (the
outbox row id IS the job id). Outside a transaction it publishes straight to the driver, or
with ``mode="required"`` refuses with ``X_OUTBOX_NO_TX``.

The one case the answered ids name no row: ``deduped`` is only the publish's to give, and a
staged enqueue whose idempotency key a LIVE job already holds creates nothing when the relay
publishes it. Give a run its own key (a request id) when the caller keeps the ids.

The map:

- ``install``: ``install_outbox(pool, dsn=...)``: the three steps above in one call.
- ``contract``: what a store, a claimed row and a wake are.
- ``staging_facade``: the jobs facade that stages inside the ambient transaction.
- ``store_postgres`` / ``store_memory``: staged enqueues in ``x_outbox`` / in a dict.
- ``relay``: publishes committed rows onto the queue, in staging order; ``options`` its
  ``RelayOptions``.
- ``purge_target``: retention for ``x_outbox``, a target for the purge job.

The relay's wake is the worker's: ``ujobs.wake.listener``'s ``postgres_wake(dsn, pool,
channels=(OUTBOX_WAKE_CHANNEL,))`` (LISTEN ``x_outbox_wake``).
"""

from __future__ import annotations

from ujobs.outbox.contract import (
    OUTBOX_WAKE_CHANNEL,
    OutboxRecord,
    OutboxStore,
    OutboxWake,
    Staged,
)
from ujobs.outbox.install import InstalledOutbox, install_outbox
from ujobs.outbox.options import RelayOptions
from ujobs.outbox.purge_target import outbox_purge_target
from ujobs.outbox.relay import OutboxRelay, RelayPass, outbox_relay
from ujobs.outbox.staging_facade import OutboxJobsFacade, OutboxMode, outbox_jobs_facade
from ujobs.outbox.store_memory import MemoryOutboxStore, memory_outbox_store
from ujobs.outbox.store_postgres import PostgresOutboxStore, postgres_outbox_store

__all__ = [
    "OUTBOX_WAKE_CHANNEL",
    "InstalledOutbox",
    "MemoryOutboxStore",
    "OutboxJobsFacade",
    "OutboxMode",
    "OutboxRecord",
    "OutboxRelay",
    "OutboxStore",
    "OutboxWake",
    "PostgresOutboxStore",
    "RelayOptions",
    "RelayPass",
    "Staged",
    "install_outbox",
    "memory_outbox_store",
    "outbox_jobs_facade",
    "outbox_purge_target",
    "outbox_relay",
    "postgres_outbox_store",
]
