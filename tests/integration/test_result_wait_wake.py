"""A result wait on a job waiting to start announces the job's queue.

Why: the wait's mark (``result_watch.sql``) holds the row's lock for a moment, and a claim that
meets the row then skips it (SKIP LOCKED) and goes back to its poll. A job enqueued and waited
for at once (``POST /v1/jobs/{name}?wait=``, ``handle.result()``) started up to an idle poll
late. The watch now tells this process's workers, notifies ``x_jobs_wake`` for LISTEN workers,
and (through ``announcing()``) publishes on the Redis wake.

The worker here polls once a minute, so a job that settles within the wait was started by the
announce, not by the poll; the enqueue goes through a plain driver on another pool, which tells
this process nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from tests.support.wake import WAIT_S, heard_on_redis
from tests.support.worker import declare, registry_of
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.results import results_of
from ujobs.execution.run import Run
from ujobs.jobs.result_read import job_result
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.wake.announce import announcing
from ujobs.worker.job_worker import job_worker

MINUTE_MS = 60_000


async def body(run: Run[Any]) -> Any:
    return {"n": run.input.n}


async def test_a_wait_on_a_ready_job_starts_it_on_this_process_idle_worker(
    pg_pool: asyncpg.Pool[Any], other_pool: asyncpg.Pool[Any]
) -> None:
    handle = declare(body, queue="rpc")
    driver = postgres_driver(pg_pool)
    other = postgres_driver(other_pool)
    worker = job_worker(
        driver=driver,
        context=None,
        registry=registry_of(handle),
        queues=["rpc"],
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        poll_interval_ms=MINUTE_MS,
        idle_poll_max_ms=MINUTE_MS,
    )
    await worker.start()
    try:
        await worker.signals.wait("waiting", timeout_s=WAIT_S)  # its first, empty pass is done
        enqueued = await other.enqueue(handle.request({"n": 7}))
        result = await job_result(enqueued.id, timeout="10s", driver=driver)
        assert result == {"n": 7}
    finally:
        await worker.stop()
        await driver.close()
        await other.close()


async def test_the_mark_of_a_due_row_notifies_its_queue_once(
    pg_pool: asyncpg.Pool[Any], pg_dsn: str
) -> None:
    handle = declare(body, queue="rpc")
    later = declare(body, name="later", queue="rpc-later")
    listener = await asyncpg.connect(pg_dsn)
    heard: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener("x_jobs_wake", lambda *args: heard.put_nowait(args[3]))
    driver = postgres_driver(pg_pool)
    try:
        due = await driver.enqueue(handle.request({"n": 1}))
        not_due = await driver.enqueue(later.request({"n": 2}, delay="1h"))
        while not heard.empty():  # the enqueues' own notifies
            heard.get_nowait()
        await asyncio.sleep(0.05)
        while not heard.empty():
            heard.get_nowait()
        results = results_of(driver)
        assert results is not None
        await results.watch(not_due.id)
        await results.watch(due.id)
        assert await asyncio.wait_for(heard.get(), WAIT_S) == "rpc"
        await results.watch(due.id)  # marked already: no lock taken, nothing to announce
        await asyncio.sleep(0.1)
        assert heard.empty(), "only the first mark of the due row announces"
    finally:
        await driver.close()
        await listener.close()


async def test_an_announcing_driver_publishes_a_due_rows_queue_on_the_redis_wake(
    pg_pool: asyncpg.Pool[Any], redis_url: str, redis_prefix: str
) -> None:
    handle = declare(body, queue="rpc")
    async with heard_on_redis(redis_url, f"{redis_prefix}:wake") as (heard, announcer):
        plain = postgres_driver(pg_pool)
        try:
            enqueued = await plain.enqueue(handle.request({"n": 3}))
            results = results_of(announcing(plain, announcer))
            assert results is not None
            row = await results.watch(enqueued.id)
            assert row is not None
            assert row.state == "ready"
            await heard.until("rpc")
        finally:
            await plain.close()
