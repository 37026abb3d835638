"""``ujobs scheduler``: fire the app's tasks, one leader at a time.

The only safe wiring — ``postgres_scheduler_state`` for durable watermarks (an occurrence and
its jobs move in one statement) and ``postgres_lease_leader`` for one leader at a time — over
ONE pool from ``DATABASE_URL``, for the app's tasks (``--app`` / ``UJOBS_APP``). The scheduler
always runs on Postgres: its fire statement writes the jobs beside the watermark. It applies
nothing to the schema (``ujobs db migrate`` does), drains on SIGTERM — stop dispatching, finish
the round, release the lease — and exits 0; 1 when the deadline found a round still
enqueueing (the lease is then kept and lapses on its own).
"""

from __future__ import annotations

from services.app_loader import load_api
from services.backends import open_pool
from services.config import SchedulerConfig
from services.runtime import ServiceRun
from shared.drivers.postgres import postgres_driver
from shared.scheduler import (
    JobScheduler,
    job_scheduler,
    postgres_lease_leader,
    postgres_scheduler_state,
)


async def start_scheduler(run: ServiceRun, config: SchedulerConfig) -> JobScheduler:
    """Build and start the scheduler; its drain hooks are the process lifecycle's."""
    tasks = list(load_api(config.common.app).tasks.values())
    url = config.common.connections.require_database("the scheduler")
    pool = await open_pool(url, max_size=4)
    run.stack.push_async_callback(pool.close)
    driver = postgres_driver(pool)
    run.stack.push_async_callback(driver.close)
    scheduler = job_scheduler(
        driver=driver,
        state=postgres_scheduler_state(pool),
        leader=postgres_lease_leader(executor=pool, ttl_ms=config.lease_ttl_ms),
        tasks=tasks,
        tick_interval_ms=config.tick_interval_ms,
    )
    await scheduler.start()
    run.abandoned_if("scheduler", lambda: scheduler.drain_abandoned)
    return scheduler
