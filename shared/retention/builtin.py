"""``x.purge``: the sweep the services register with no app code.

It sweeps the tables the framework owns over one Postgres pool: ``x_jobs`` (with its steps and
lapsed leases), ``x_outbox``, ``x_job_events``, the webhooks' ledger and events
(``x_webhook_deliveries``, then ``x_webhook_events``: the ledger rows it removes free events)
and the NATS edge's ``x_settlements``, each at its own window. The worker registers
the job and hands it the pool; the scheduler registers the task (hourly by default,
``UJOBS_PURGE_CRON``); ``UJOBS_PURGE=off`` registers neither. A deployment with no worker or no
scheduler has no background work at all, and this is one more thing it does not do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ujobs.errors import DriverUnavailableError
from ujobs.events.bus import events_purge_target
from ujobs.events.bus_postgres import PostgresEventBus
from ujobs.jobs.job import JobHandle
from ujobs.jobs.registry import Registry
from ujobs.jobs.task import TaskHandle
from ujobs.outbox.purge_target import DEFAULT_PUBLISHED_RETENTION_MS, outbox_purge_target
from ujobs.retention.jobs_target import (
    DEFAULT_DEAD_RETENTION_MS,
    DEFAULT_DONE_RETENTION_MS,
    jobs_purge_target,
)
from ujobs.retention.ledger_targets import (
    DEFAULT_SETTLEMENTS_RETENTION_MS,
    DEFAULT_WEBHOOKS_RETENTION_MS,
    settlements_purge_target,
    webhook_deliveries_purge_target,
    webhook_events_purge_target,
)
from ujobs.retention.purge import Purge, PurgeTarget, purge, purge_task

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

BUILTIN_PURGE = "x.purge"


@dataclass(frozen=True, slots=True)
class RetentionWindows:
    """How long finished rows stay before ``x.purge`` deletes them (ms)."""

    done_ms: int = DEFAULT_DONE_RETENTION_MS
    dead_ms: int = DEFAULT_DEAD_RETENTION_MS
    outbox_ms: int = DEFAULT_PUBLISHED_RETENTION_MS
    webhooks_ms: int = DEFAULT_WEBHOOKS_RETENTION_MS
    settlements_ms: int = DEFAULT_SETTLEMENTS_RETENTION_MS


_pool: Pool | None = None
_windows = RetentionWindows()
_job: JobHandle[Any] | None = None
_tasks: dict[str, TaskHandle] = {}


def builtin_targets(
    pool: Pool | None = None, windows: RetentionWindows | None = None
) -> list[PurgeTarget]:
    """The targets of ``x.purge`` over ``pool`` and ``windows``, else the ones the process
    registered (read per attempt)."""
    pool = pool if pool is not None else _pool
    windows = windows if windows is not None else _windows
    if pool is None:
        raise DriverUnavailableError(
            f"{BUILTIN_PURGE} has no Postgres pool in this process; it runs on a worker with "
            "DATABASE_URL set",
            meta={"job": BUILTIN_PURGE},
        )
    return [
        jobs_purge_target(
            executor=pool, done_retention_ms=windows.done_ms, dead_retention_ms=windows.dead_ms
        ),
        outbox_purge_target(executor=pool, published_retention_ms=windows.outbox_ms),
        events_purge_target(PostgresEventBus(pool)),
        webhook_deliveries_purge_target(executor=pool, retention_ms=windows.webhooks_ms),
        webhook_events_purge_target(executor=pool, retention_ms=windows.webhooks_ms),
        settlements_purge_target(executor=pool, retention_ms=windows.settlements_ms),
    ]


def builtin_purge(cron: str | None = None) -> Purge:
    """The ``x.purge`` family: one job per process, and the task for ``cron`` (None: none)."""
    global _job
    if _job is None:
        _job = purge(name=BUILTIN_PURGE, targets=_registered_targets, cron=None).job
    cron_task = None
    if cron is not None:
        cron_task = _tasks.get(cron)
        if cron_task is None:
            cron_task = _tasks[cron] = purge_task(_job, cron=cron)
    return Purge(job=_job, task=cron_task, targets=_registered_targets)


def _registered_targets() -> list[PurgeTarget]:
    return builtin_targets()


def register_builtin_purge(
    registry: Registry,
    *,
    pool: Pool | None,
    cron: str | None,
    windows: RetentionWindows | None = None,
) -> Purge:
    """Put ``x.purge`` in ``registry``: its job, and its task when ``cron`` is given; ``pool``
    and ``windows`` (when given) are what the job sweeps in this process, and how old a row
    must be to go."""
    global _pool, _windows
    if pool is not None:
        _pool = pool
    if windows is not None:
        _windows = windows
    family = builtin_purge(cron)
    registry.register_job(family.job)
    if family.task is not None:
        registry.register_task(family.task)
    return family
