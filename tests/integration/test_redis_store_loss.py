"""The Redis driver across a Redis restart, on a PRIVATE redis-server (the shared one is never
restarted): with an append-only file every job enqueued before the restart completes, once;
without persistence the keyspace comes back empty and a worker holding rows reports it ONCE,
as an error (``jobs.store.lost``), not a warning per row."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from tests.support.restartable import PrivateRedis
from tests.support.worker import declare, records, registry_of
from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.redis import RedisDriver, redis_driver
from ujobs.execution.run import Run
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.worker import JobWorker, job_worker

PER_ROW_EVENTS = ("jobs.settle.unowned", "jobs.lease.lost", "jobs.attempt.failed")


@pytest.fixture
def no_persistence() -> Iterator[PrivateRedis]:
    with PrivateRedis(aof=False) as server:
        yield server


@pytest.fixture
def aof_everysec() -> Iterator[PrivateRedis]:
    with PrivateRedis(aof=True, appendfsync="everysec") as server:
        yield server


@asynccontextmanager
async def driver_on(server: PrivateRedis) -> AsyncIterator[RedisDriver]:
    client = Redis.from_url(server.url)
    driver = redis_driver(client, prefix="lossq", clock=SYSTEM_CLOCK)
    try:
        yield driver
    finally:
        await driver.close()
        await client.aclose()


def worker_on(driver: RedisDriver, *handles: Any, **options: Any) -> JobWorker:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry_of(*handles),
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        poll_interval_ms=50,
        idle_poll_max_ms=100,
        **options,
    )


async def wait_for(predicate: Any, timeout_s: float = 20.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("refused_by", ["renewal", "settle"])
async def test_a_restart_without_persistence_is_reported_once_as_an_error(
    no_persistence: PrivateRedis, refused_by: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="ujobs")
    started: list[int] = []
    release = asyncio.Event()

    async def body(run: Run[Any]) -> None:
        started.append(run.input.n)
        await release.wait()

    handle = declare(body)
    async with driver_on(no_persistence) as driver:
        await driver.enqueue_many([handle.request({"n": n}) for n in range(6)])
        # "renewal": the heartbeat meets the empty keyspace first; "settle": the bodies end
        # after the restart and their acks meet it (the heartbeat has not come round yet).
        interval = 50 if refused_by == "renewal" else 20_000
        worker = worker_on(driver, handle, concurrency=4, heartbeat_interval_ms=interval)
        await worker.start()
        try:
            await wait_for(lambda: len(started) == 4)
            await asyncio.to_thread(no_persistence.restart)
            if refused_by == "settle":
                release.set()
            await wait_for(lambda: len(worker.signals.emitted("settled")) >= 4)
            release.set()
        finally:
            await worker.stop()
        assert sorted(started) == [0, 1, 2, 3]  # rows 4 and 5 went with the keyspace
        assert all(not e.settled for e in worker.signals.emitted("settled"))
    [lost] = records(caplog, "jobs.store.lost")
    assert lost.levelno == logging.ERROR
    assert lost.__dict__["prefix"] == "lossq"
    assert lost.__dict__["held_lost"] == 4
    assert lost.__dict__["mark"] != lost.__dict__["lost_mark"]
    per_row = [r for name in PER_ROW_EVENTS for r in records(caplog, name)]
    assert per_row, "each held row still leaves a debug line"
    assert all(r.levelno == logging.DEBUG for r in per_row)


async def test_an_idle_worker_reports_the_empty_keyspace_from_its_next_claim(
    no_persistence: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    done: list[int] = []

    async def body(run: Run[Any]) -> None:
        done.append(run.input.n)

    handle = declare(body)
    async with driver_on(no_persistence) as driver:
        worker = worker_on(driver, handle)
        await driver.enqueue(handle.request({"n": 1}))
        await worker.start()
        try:
            await wait_for(lambda: done == [1])
            await asyncio.to_thread(no_persistence.restart)
            await wait_for(lambda: bool(records(caplog, "jobs.store.lost")), timeout_s=10)
            await driver.enqueue(handle.request({"n": 2}))  # the queue works on, reported once
            await wait_for(lambda: done == [1, 2])
        finally:
            await worker.stop()
    [lost] = records(caplog, "jobs.store.lost")
    assert (lost.levelno, lost.__dict__["held_lost"]) == (logging.ERROR, 0)


async def test_with_aof_every_job_enqueued_before_a_restart_completes_once(
    aof_everysec: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = 60
    completed: Counter[int] = Counter()

    async def body(run: Run[Any]) -> None:
        await asyncio.sleep(0.02)
        completed[run.input.n] += 1

    handle = declare(body)
    async with driver_on(aof_everysec) as driver:
        await driver.enqueue_many([handle.request({"n": n}) for n in range(jobs)])
        worker = worker_on(driver, handle, concurrency=4, heartbeat_interval_ms=200)
        await worker.start()
        try:
            await wait_for(lambda: sum(completed.values()) >= 10)
            await asyncio.to_thread(aof_everysec.restart)
            await wait_for(lambda: len(completed) == jobs, timeout_s=40)
            await wait_for(lambda: worker.stats().in_flight == 0)
        finally:
            await worker.stop()
        stats = (await driver.stats()).queues["default"]
        assert (stats.done, stats.ready, stats.running) == (jobs, 0, 0)
    assert sorted(completed) == list(range(jobs))
    assert set(completed.values()) == {1}
    assert records(caplog, "jobs.store.lost") == []
