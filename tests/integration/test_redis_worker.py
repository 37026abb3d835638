"""The worker on the Redis driver, in-process: a drain with steps and renewals through the
driver's batched calls, the refusal of ``concurrency`` it cannot hold (plain and keyed, also
behind the announcing wrapper the services install), and the operator surface answering
``X_NOT_IMPLEMENTED`` with a sentence naming the Postgres driver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.support.redis_keys import redis_test_driver
from tests.support.worker import declare, registry_of, sample
from ujobs import introspect as operator
from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.base import (
    BulkFilter,
    JobDriver,
    JobFilter,
    capabilities_of,
    require_backfills,
    require_introspection,
)
from ujobs.drivers.redis.driver import RedisDriver
from ujobs.errors import (
    ConcurrencyUnenforceableError,
    JobNotCancellableError,
    NotImplementedByDriverError,
)
from ujobs.execution.run import Run
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.wake.announce import announcing
from ujobs.worker.job_worker import JobWorker, job_worker


@pytest.fixture
async def driver(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=SYSTEM_CLOCK) as drv:
        yield drv


def worker_on(driver: JobDriver, *handles: Any, **options: Any) -> JobWorker:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry_of(*handles),
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        **options,
    )


async def test_a_worker_drains_steps_and_renewals_on_redis(driver: RedisDriver) -> None:
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        first = await run.step.run("first", lambda _signal: run.input.n * 10)
        await asyncio.sleep(0.05)  # long enough for a heartbeat tick or two
        second = await run.step.run("second", lambda _signal: first + 1)
        ran.append(second)

    handle = declare(body)
    await driver.enqueue_many([handle.request({"n": n}) for n in range(30)])
    worker = worker_on(driver, handle, concurrency=8, heartbeat_interval_ms=10)
    await worker.start()
    try:
        await worker.signals.wait("settled", lambda _: len(worker.signals.emitted("settled")) >= 30)
    finally:
        await worker.stop()
    assert sorted(ran) == [n * 10 + 1 for n in range(30)]
    assert sample(worker.metrics, "jobs_total", queue="default", outcome="ok") == 30
    assert sample(worker.metrics, "job_leases_lost_total") == 0
    stats = (await driver.stats()).queues["default"]
    assert (stats.done, stats.running, stats.ready) == (30, 0, 0)
    # The system clock runs here, so the 30 settles may straddle a minute boundary.
    buckets = await driver.counter_buckets(handle.name, 0)
    assert 1 <= len(buckets) <= 2
    assert sum(b.done for b in buckets) == 30


@pytest.mark.parametrize(
    "concurrency",
    [2, {"key": lambda i: f"acct:{i.n}", "limit": 1}, {"key": lambda i: "k", "when_busy": "fail"}],
    ids=["plain", "keyed", "keyed-fail"],
)
async def test_a_job_declaring_concurrency_refuses_start_on_redis(
    driver: RedisDriver, concurrency: Any
) -> None:
    capped = declare(lambda run: None, name="capped", concurrency=concurrency)
    plain = declare(lambda run: None, name="plain")
    await driver.enqueue(capped.request({"n": 1}))
    for on in (driver, announcing(driver)):
        worker = worker_on(on, capped, plain)
        with pytest.raises(ConcurrencyUnenforceableError) as info:
            await worker.start()
        assert info.value.code == "X_JOB_CONCURRENCY_UNENFORCEABLE"
        assert info.value.meta == {"jobs": ["capped"], "driver": "redis"}
        assert "postgres" in info.value.message
        assert worker.state == "new"
        await worker.stop()  # safe on a worker that never started
    stats = (await driver.stats()).queues["default"]
    assert (stats.ready, stats.running) == (1, 0)  # nothing was claimed
    # Without the capped job the same worker starts, and leaves the capped row alone.
    fine = worker_on(driver, plain)
    await fine.start()
    try:
        await fine.run_once()
    finally:
        await fine.stop()
    assert (await driver.stats()).queues["default"].ready == 1


async def test_operator_calls_answer_not_implemented_naming_postgres(driver: RedisDriver) -> None:
    for on in (driver, announcing(driver)):
        caps = capabilities_of(on)
        assert (caps.introspect, caps.leases, caps.workers, caps.backfills) == (False,) * 4
        with pytest.raises(NotImplementedByDriverError) as info:
            require_introspection(on)
        assert info.value.code == "X_NOT_IMPLEMENTED"
        assert info.value.message == (
            "queue introspection needs the Postgres driver; the Redis driver keeps no "
            "operator index"
        )
        assert info.value.meta == {"driver": "redis", "capability": "introspect"}
        with pytest.raises(NotImplementedByDriverError) as backfills:
            require_backfills(on)
        assert backfills.value.code == "X_NOT_IMPLEMENTED"
        assert "backfills need the Postgres driver" in backfills.value.message


async def test_every_operator_function_answers_not_implemented_on_redis(
    driver: RedisDriver,
) -> None:
    """``ujobs.introspect`` is what ``ujobs jobs/queues/workers`` (and any dashboard) call."""
    on = announcing(driver)
    job_id = (await driver.enqueue(declare(lambda run: None).request({"n": 1}))).id
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "list_jobs": lambda: operator.list_jobs(on, JobFilter()),
        "get_job": lambda: operator.get_job(on, job_id),
        "inspect_job": lambda: operator.inspect_job(on, job_id),
        "list_workers": lambda: operator.list_workers(on),
        "retry_job": lambda: operator.retry_job(on, job_id),
        "remove_job": lambda: operator.remove_job(on, job_id),
        "promote_job": lambda: operator.promote_job(on, job_id),
        "bulk_move": lambda: operator.bulk_move(on, "retry", BulkFilter(state="dead")),
        "pause_queues": lambda: operator.pause_queues(on, ["default"], pause=True),
    }
    for name, call in calls.items():
        with pytest.raises(NotImplementedByDriverError) as info:
            await call()
        assert info.value.code == "X_NOT_IMPLEMENTED", name
        assert "needs the Postgres driver" in info.value.message, name
    # A cancel is the spec's X_JOB_NOT_CANCELLABLE on a driver with no cancel.
    with pytest.raises(JobNotCancellableError) as refused:
        await operator.cancel_job(on, job_id)
    assert refused.value.code == "X_JOB_NOT_CANCELLABLE"
    # The queue depth is a core read: it answers on Redis too, and nothing above moved a row.
    [queue] = await operator.inspect_queues(on, driver.clock.now_ms())
    assert (queue["queue"], queue["ready"], queue["paused"]) == ("default", 1, False)
