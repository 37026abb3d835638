"""What a scaler reads: ``stats()`` and the two process gauges (a stopped worker leaves both)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tests.support.worker import Gate, declare, enqueue, make_worker, sample
from ujobs.drivers.memory.driver import memory_driver
from ujobs.metrics import JobMetrics


async def test_stats_and_the_gauges_sum_the_live_workers_of_the_process() -> None:
    driver = memory_driver()
    gate = Gate()
    handle = declare(gate)
    for n in range(3):
        await enqueue(driver, handle, n)
    metrics = JobMetrics(CollectorRegistry())
    capped = make_worker(driver, [handle], max_in_flight=2, metrics=metrics)
    uncapped = make_worker(driver, [handle], concurrency=4, metrics=metrics)
    assert sample(metrics, "job_worker_capacity") == 0  # not started: not counted
    await capped.start()
    await capped.signals.wait("pass", lambda p: p.claimed == 2)
    stats = capped.stats()
    assert (stats.in_flight, stats.max_in_flight, stats.capacity) == (2, 2, 2)
    assert stats.refused == 0
    await uncapped.start()
    await uncapped.signals.wait("pass", lambda p: p.claimed == 1)
    assert uncapped.stats().max_in_flight is None
    assert uncapped.stats().capacity == 4
    assert sample(metrics, "job_worker_in_flight") == 3
    assert sample(metrics, "job_worker_capacity") == 6
    gate.open.set()
    await capped.stop()
    assert sample(metrics, "job_worker_capacity") == 4  # the stopped worker left both
    await uncapped.stop()
    assert sample(metrics, "job_worker_in_flight") == 0
    assert sample(metrics, "job_worker_capacity") == 0
    assert sample(metrics, "jobs_total", queue="default", outcome="ok") == 3
