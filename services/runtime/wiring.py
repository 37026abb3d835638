"""How a service process is wired to its queue: the driver it enqueues through and the wake
its loops listen to — the same for every role, so no service gets it subtly different.

* **announce**: the driver is wrapped with ``announcing()`` once, at boot, and installed with
  ``set_job_driver`` — an enqueue in this process (a job body's fan-out, the relay's publish)
  wakes this process's loops at once, and, with ``REDIS_URL``, other processes through the
  ``ujobs:wake`` channel. Without Redis the Postgres driver's own ``pg_notify`` announces.
* **listen** (the worker roles): ``redis_wake`` on ``REDIS_URL``, else ``postgres_wake`` — ONE
  dedicated LISTEN session on ``DATABASE_URL`` — proven by a probe before the idle loops trust
  it; until then (or without either) jobs start on the poll.
* **events**: with Postgres, ``step.wait_for_event`` and ``publish_event`` use the stored bus
  (``x_job_events``, the database's clock), so an event published by any process resumes a
  wait in any other. A Redis-only process (no ``DATABASE_URL``) keeps its memory bus and says so.
* **schema**: a service on Postgres refuses to start (``X_SCHEMA_OUTDATED``, exit 1) on a
  database whose migrations are missing, older or newer than its code's — one line saying to
  run ``ujobs db migrate`` instead of a claim failure every poll. A server running without
  autovacuum is said once (``ujobs.service.autovacuum-off``,
  ``ujobs.services.runtime.autovacuum_check``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ujobs.drivers.base import JobDriver
from ujobs.drivers.postgres.migrate import require_current_schema
from ujobs.events.bus import set_event_bus
from ujobs.events.bus_postgres import postgres_event_bus
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver
from ujobs.services.config.settings import Connections
from ujobs.services.runtime.autovacuum_check import warn_without_autovacuum
from ujobs.services.runtime.backends import Backend, open_backend
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.wake.announce import announcing, redis_announcer
from ujobs.wake.listener import ChannelWake, postgres_wake, redis_wake

log = logging.getLogger("ujobs.service")


@dataclass(frozen=True, slots=True)
class Wired:
    backend: Backend
    driver: JobDriver
    wake: ChannelWake | None


async def wire(
    run: ServiceRun,
    connections: Connections,
    *,
    listen: bool = False,
    need_database: bool = False,
    pool_size: int | None = None,
) -> Wired:
    """Open the backend, install the announcing driver, and (``listen``) start the wake; all
    closed by ``run.stack`` after the drain, in reverse order."""
    backend = await run.stack.enter_async_context(
        open_backend(connections, need_database=need_database, need_redis=True, pool_size=pool_size)
    )
    if backend.pool is not None:
        await require_current_schema(backend.pool, run.common.service)
        await warn_without_autovacuum(backend.pool, run.common.service)
        set_event_bus(postgres_event_bus(backend.pool))
        run.stack.callback(set_event_bus, None)
    else:
        log.warning(
            "ujobs.service.events-process-local",
            extra={
                "hint": "no DATABASE_URL: step.wait_for_event only sees events published in "
                "this process; set DATABASE_URL for the Postgres event bus"
            },
        )
    announcer = None
    # A Redis job driver built with a wake channel announces inside its enqueue script.
    if backend.redis is not None and getattr(backend.driver, "wake_channel", None) is None:
        announcer = redis_announcer(backend.redis)
        run.stack.push_async_callback(announcer.close)
    driver = announcing(backend.driver, announcer)
    set_job_driver(driver)
    run.stack.callback(reset_job_driver)
    wake: ChannelWake | None = None
    if listen:
        if backend.redis is not None:
            wake = redis_wake(backend.redis)
        elif backend.pool is not None and connections.database_url is not None:
            wake = postgres_wake(connections.database_url, backend.pool)
        if wake is not None:
            await wake.start()
            run.stack.push_async_callback(wake.stop)
    return Wired(backend=backend, driver=driver, wake=wake)
