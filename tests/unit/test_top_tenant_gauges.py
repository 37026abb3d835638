"""The queue gauges name how much of a queue's due work is one tenant's, with one series per
queue (never per tenant): ``queue_top_tenant_due`` and ``queue_top_tenant_share``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.memory.driver import memory_driver
from ujobs.metrics import JobMetrics


def _req(tenant: str | None, key: str, queue: str = "default") -> EnqueueRequest:
    return EnqueueRequest(name="j", input={}, idempotency_key=key, tenant_id=tenant, queue=queue)


async def test_the_largest_tenants_due_work_and_share_per_queue() -> None:
    clock = FrozenClock()
    driver = memory_driver(clock=clock)
    for n in range(3):
        await driver.enqueue(_req("flood", f"f{n}"))
    await driver.enqueue(_req("quiet", "q"))
    await driver.enqueue(_req(None, "r", queue="reports"))
    registry = CollectorRegistry()
    metrics = JobMetrics(registry)
    await metrics.refresh_queue_gauges(driver, clock)

    def value(name: str, queue: str) -> float | None:
        return registry.get_sample_value(name, {"queue": queue})

    assert value("queue_top_tenant_due", "default") == 3
    assert value("queue_top_tenant_share", "default") == 0.75
    assert value("queue_top_tenant_due", "reports") == 1  # jobs without a tenant: one group
    assert value("queue_top_tenant_share", "reports") == 1.0
    # One series per queue, whatever the tenants.
    series = [
        s.labels
        for metric in registry.collect()
        if metric.name == "queue_top_tenant_due"
        for s in metric.samples
    ]
    assert sorted(s["queue"] for s in series) == ["default", "reports"]
