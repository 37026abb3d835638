"""``ujobs scheduler``: fire the app's tasks, one leader at a time.

The only safe wiring: ``postgres_scheduler_state`` for durable watermarks and
``postgres_lease_leader`` for one leader at a time, both over the Postgres pool of
``DATABASE_URL`` (the scheduler always needs it, whatever the queue's driver), for the app's
tasks (``--app`` / ``UJOBS_APP``). The jobs go on the queue the workers claim from —
``UJOBS_DRIVER``, through the same announcing driver every service uses
(``ujobs.services.runtime.wiring``):

* ``postgres`` (the default): the driver and the state share the pool, so an occurrence fires in
  ONE statement — watermark, jobs and the fire's record together.
* ``redis``: the jobs are enqueued on Redis, then the watermark moves in Postgres. Each job's
  id is derived from its task, occurrence and entry, so an occurrence fired again after a crash
  between the two (or by a second scheduler racing the leader) is a dedupe, never a second job.

Either way a fire wakes workers at once: the statement's ``pg_notify`` for LISTEN workers and,
with ``REDIS_URL``, the ``ujobs:wake`` channel. It applies nothing to the schema (``ujobs db
migrate`` does), drains on SIGTERM — stop dispatching, finish the round, release the lease —
and exits 0; 1 when the deadline found a round still enqueueing (the lease is then kept and
lapses on its own). Standalone it serves /metrics (``scheduler_task_fires_total{task}``,
``scheduler_leader``), /healthz and /readyz on ``UJOBS_METRICS_PORT``.
"""

from __future__ import annotations

from ujobs.scheduler.job_scheduler import (
    JobScheduler,
    SchedulerOptions,
    job_scheduler,
    postgres_lease_leader,
    postgres_scheduler_state,
)
from ujobs.services.config.settings import SchedulerConfig
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.metrics_server import serve_metrics
from ujobs.services.runtime.retention import register_purge
from ujobs.services.runtime.service_metrics import scheduler_metrics
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.services.runtime.wiring import Wired, wire

POOL_SIZE = 4


async def start_scheduler(
    run: ServiceRun, config: SchedulerConfig, *, wired: Wired | None = None
) -> JobScheduler:
    """Build and start the scheduler (on ``wired`` when given: ``ujobs dev`` shares one); its
    drain hooks are the process lifecycle's."""
    registry = load_api(config.common.app)
    register_purge(registry, config.common, pool=None, task=True)
    tasks = list(registry.tasks.values())
    config.common.connections.require_database("the scheduler")
    standalone = wired is None
    if wired is None:
        wired = await wire(run, config.common.connections, need_database=True, pool_size=POOL_SIZE)
    pool = wired.backend.require_pool("the scheduler")
    scheduler = job_scheduler(
        driver=wired.driver,
        state=postgres_scheduler_state(pool),
        leader=postgres_lease_leader(executor=pool, ttl_ms=config.lease_ttl_ms),
        tasks=tasks,
        options=SchedulerOptions(tick_interval_ms=config.tick_interval_ms),
    )
    scheduler_metrics().track(scheduler)
    await scheduler.start()
    if standalone:
        await serve_metrics(run, config.metrics, wired.backend)
    run.abandoned_if("scheduler", lambda: scheduler.drain_abandoned)
    return scheduler
