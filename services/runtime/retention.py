"""The built-in ``x.purge`` a service registers at boot (``ujobs db purge`` is the CLI's).

``register_purge(registry, common, pool=..., task=...)``: the worker gets the ``x.purge`` job
and the pool it sweeps, the scheduler its task (hourly by default, ``UJOBS_PURGE_CRON``).
``UJOBS_PURGE=off`` registers nothing; no app code is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ujobs.backfill.settings import configure_backfills
from ujobs.jobs.registry import Registry
from ujobs.retention.builtin import register_builtin_purge
from ujobs.services.config.settings import CommonConfig

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]


def register_purge(
    registry: Registry, common: CommonConfig, *, pool: Pool | None, task: bool
) -> None:
    """``x.purge`` into ``registry`` unless ``UJOBS_PURGE=off``: the job, swept over ``pool``
    (a worker), and with ``task`` its cron task (the scheduler). Also tells this process's
    backfill passes which environment they run in (``UJOBS_ENVIRONMENT``)."""
    configure_backfills(environment=common.environment)
    if common.purge_cron is None or (pool is None and not task):
        return  # off, or a worker with no Postgres to sweep (one with a pool takes the job)
    register_builtin_purge(
        registry,
        pool=pool,
        cron=common.purge_cron if task else None,
        windows=common.retention,
    )


__all__ = ["register_purge"]
