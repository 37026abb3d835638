"""``ujobs worker``: run the app's jobs of the configured queues until SIGTERM has drained it.

Per-queue slots (``UJOBS_CONCURRENCY``) under one optional process cap
(``UJOBS_MAX_IN_FLIGHT``), leases of ``UJOBS_VISIBILITY_TIMEOUT_MS`` renewed by the heartbeat,
and the two-phase drain: stop claiming, finish what is held within
``UJOBS_DRAIN_DEADLINE_MS``, close. A run still going at the deadline is abandoned (logged
``jobs.worker.drain-abandoned``; its lease lapses and the queue delivers it again) and the
process exits 1 instead of 0. The app's ``define_api(context=)`` factory is entered once at
start (``ujobs.jobs.app_context``; its value is every run's ``run.ctx``) and exited after the
drain; the pool on ``DATABASE_URL`` is the one a ``keyset()`` without ``pool=`` reads through
(``ujobs.exports.library_pool``). The webhook deliverer and the exporter are this service pinned to
one queue. Standalone it serves /metrics, /healthz and /readyz on ``UJOBS_METRICS_PORT``
(``ujobs.services.runtime.metrics_server``); under ``ujobs dev`` the api's /metrics carries the
same series.
"""

from __future__ import annotations

import dataclasses

from ujobs.drivers.base import DEFAULT_QUEUE
from ujobs.exports.family import EXPORTS_QUEUE
from ujobs.exports.library_pool import set_library_pool
from ujobs.jobs.app_context import open_app_context
from ujobs.jobs.registry import Registry
from ujobs.results import set_result_max_bytes
from ujobs.services.config.settings import WorkerConfig
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.metrics_server import serve_metrics
from ujobs.services.runtime.retention import register_purge
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.services.runtime.wiring import Wired, wire
from ujobs.webhooks.family import WEBHOOKS_QUEUE
from ujobs.worker.job_worker import JobWorker, job_worker

PINNED_QUEUES = (WEBHOOKS_QUEUE, EXPORTS_QUEUE)
"""Served by their own services (the deliverer, the exporter), never by a default worker."""


def app_queues(registry: Registry) -> tuple[str, ...]:
    """What a worker given no queues serves: every queue the app's jobs name, plus ``default``
    (the built-in ``x.purge``'s), but the webhooks and exports queues, whose services are their
    own (a plain worker has neither the deliverer's key nor the exporter's store)."""
    named = {handle.queue for handle in registry.jobs.values()} | {DEFAULT_QUEUE}
    return tuple(sorted(named - set(PINNED_QUEUES)))


async def start_worker(
    run: ServiceRun,
    config: WorkerConfig,
    *,
    registry: Registry | None = None,
    wired: Wired | None = None,
) -> JobWorker:
    """Build and start the worker (on ``wired`` when given: ``ujobs dev`` shares one, and its
    api serves the metrics; otherwise this serves them); its drain hooks are the process
    lifecycle's."""
    reg = registry if registry is not None else load_api(config.common.app)
    if not config.queues_given:
        config = dataclasses.replace(config, queues=app_queues(reg), queues_given=True)
    if wired is None:
        # With DATABASE_URL the Postgres event bus is opened even for a Redis queue.
        has_database = config.common.connections.database_url is not None
        wired = await wire(run, config.common.connections, listen=True, need_database=has_database)
        await serve_metrics(run, config.metrics, wired.backend)
    register_purge(reg, config.common, pool=wired.backend.pool, task=False)
    set_result_max_bytes(config.result_max_bytes)
    run.stack.callback(set_result_max_bytes, None)
    set_library_pool(wired.backend.pool)  # a keyset() without pool= reads through it
    run.stack.callback(set_library_pool, None)
    # Entered after the backend, so exited before it: after the drain, the app's resources
    # close while the library's connections are still open.
    ctx = await open_app_context(run.stack, reg.context)
    worker = job_worker(
        driver=wired.driver,
        context=lambda: ctx,  # the value itself, even a callable one: build_ctx would call it
        registry=reg,
        queues=config.queues,
        concurrency={q: config.concurrency.for_queue(q) for q in config.queues},
        max_in_flight=config.max_in_flight,
        claim_ahead=config.claim_ahead_rows(),
        fair=config.fair(),
        visibility_timeout_ms=config.visibility_timeout_ms,
        wake=wired.wake,
        close_driver=False,
    )
    await worker.start()
    run.abandoned_if(config.common.service, lambda: bool(worker.signals.emitted("drain-abandoned")))
    return worker
