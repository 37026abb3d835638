"""The wake end to end: another process's enqueue starts a job on an idle worker.

The worker polls once a minute here (``poll_interval_ms`` and the ceiling both 60 s), so a job
that starts within the wait below was started by the wake, not by the poll. "Another process"
is a driver that does not share the worker's in-process wake: a plain Postgres driver (whose
statement notifies ``x_jobs_wake``) plus, for Redis, the announce that process's
``announcing()`` wrapper would publish.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from tests.support.wake import WAIT_S
from tests.support.worker import declare, registry_of
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.execution.run import Run
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.wake.announce import redis_announcer
from ujobs.wake.listener import ChannelWake, postgres_wake, redis_wake
from ujobs.wake.protocol import IDLE_POLL_CEILING_MS, WOKEN_IDLE_POLL_CEILING_MS
from ujobs.worker.job_worker import JobWorker, job_worker

MINUTE_MS = 60_000


def started_worker_parts(
    pool: asyncpg.Pool[Any], wake: ChannelWake, **options: Any
) -> tuple[JobWorker, list[int], Any]:
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(run.input.n)

    handle = declare(body, queue="emails")
    worker = job_worker(
        driver=postgres_driver(pool),
        context=None,
        registry=registry_of(handle),
        queues=["emails"],
        wake=wake,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        **options,
    )
    return worker, ran, handle


async def idle(worker: JobWorker) -> None:
    """Until the worker's first (empty) pass is behind it and it waits for the next."""
    await worker.signals.wait("waiting", timeout_s=WAIT_S)


async def test_a_redis_announce_starts_a_job_on_an_idle_worker(
    pg_pool: asyncpg.Pool[Any],
    other_pool: asyncpg.Pool[Any],
    redis_url: str,
    redis_prefix: str,
) -> None:
    channel = f"{redis_prefix}:wake"
    wake = redis_wake(redis_url, channel)
    await wake.start()
    worker, ran, handle = started_worker_parts(
        pg_pool, wake, poll_interval_ms=MINUTE_MS, idle_poll_max_ms=MINUTE_MS
    )
    announcer = redis_announcer(redis_url, channel)
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        await worker.start()
        await idle(worker)
        await postgres_driver(other_pool).enqueue(handle.request({"n": 1}))
        announcer.announce("emails")
        await worker.signals.wait("settled", timeout_s=WAIT_S)
        assert ran == [1]
        assert ("emails", True) in worker.signals.emitted("wake")
    finally:
        await worker.stop()
        await announcer.close()
        await wake.stop()


async def test_a_listen_notify_wake_starts_a_job_on_an_idle_worker(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], other_pool: asyncpg.Pool[Any]
) -> None:
    wake = postgres_wake(pg_dsn, pg_pool)
    await wake.start()
    worker, ran, handle = started_worker_parts(
        pg_pool, wake, poll_interval_ms=MINUTE_MS, idle_poll_max_ms=MINUTE_MS
    )
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        await worker.start()
        await idle(worker)
        # The enqueue statement itself announces (pg_notify, delivered on commit).
        await postgres_driver(other_pool).enqueue(handle.request({"n": 2}))
        await worker.signals.wait("settled", timeout_s=WAIT_S)
        assert ran == [2]
        assert ("emails", True) in worker.signals.emitted("wake")
    finally:
        await worker.stop()
        await wake.stop()


async def test_the_workers_idle_ceiling_rises_only_while_the_wake_is_proven(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    wake = postgres_wake(pg_dsn, pg_pool)
    worker, _, _ = started_worker_parts(pg_pool, wake)
    assert worker.idle_ceiling_ms() == IDLE_POLL_CEILING_MS
    await wake.start()
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        assert worker.idle_ceiling_ms() == WOKEN_IDLE_POLL_CEILING_MS
    finally:
        await wake.stop()
    assert worker.idle_ceiling_ms() == IDLE_POLL_CEILING_MS
