"""Retention: ``purge()`` (a sweep as a job, with its cron task) and its targets, so no table
grows forever.

The map:

- ``purge``: ``purge()``: a retention sweep declared as a job, with its cron task.
- ``jobs_target``: ``jobs_purge_target()``: retention for ``x_jobs`` and what hangs off a
  finished run.
- ``ledger_targets``: the other families' ledgers: webhook deliveries and events, the NATS
  edge's settlements outbox.
- ``builtin``: ``x.purge``: the sweep the services register with no app code.

The other targets live beside their stores: ``outbox_purge_target`` (``ujobs.outbox``) and
``events_purge_target`` (``ujobs.events.bus``); both are re-exported here.
"""

from __future__ import annotations

from ujobs.drivers.postgres.ledger_purge import LedgerPurgeTarget
from ujobs.events.bus import EVENTS_PURGE_TARGET, EventsPurgeTarget, events_purge_target
from ujobs.outbox.purge_target import (
    OUTBOX_PURGE_TARGET,
    outbox_purge_target,
)
from ujobs.retention.jobs_target import (
    DEFAULT_DEAD_RETENTION_MS,
    DEFAULT_DONE_RETENTION_MS,
    JOBS_PURGE_TARGET,
    JobsPurgeTarget,
    jobs_purge_target,
)
from ujobs.retention.ledger_targets import (
    SETTLEMENTS_PURGE_TARGET,
    WEBHOOK_DELIVERIES_PURGE_TARGET,
    WEBHOOK_EVENTS_PURGE_TARGET,
    settlements_purge_target,
    webhook_deliveries_purge_target,
    webhook_events_purge_target,
)
from ujobs.retention.purge import DEFAULT_PURGE_CRON, Purge, PurgeTarget, purge, purge_task

__all__ = [
    "DEFAULT_DEAD_RETENTION_MS",
    "DEFAULT_DONE_RETENTION_MS",
    "DEFAULT_PURGE_CRON",
    "EVENTS_PURGE_TARGET",
    "JOBS_PURGE_TARGET",
    "OUTBOX_PURGE_TARGET",
    "SETTLEMENTS_PURGE_TARGET",
    "WEBHOOK_DELIVERIES_PURGE_TARGET",
    "WEBHOOK_EVENTS_PURGE_TARGET",
    "EventsPurgeTarget",
    "JobsPurgeTarget",
    "LedgerPurgeTarget",
    "Purge",
    "PurgeTarget",
    "events_purge_target",
    "jobs_purge_target",
    "outbox_purge_target",
    "purge",
    "purge_task",
    "settlements_purge_target",
    "webhook_deliveries_purge_target",
    "webhook_events_purge_target",
]
