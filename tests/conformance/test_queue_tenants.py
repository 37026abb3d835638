"""Whose due work waits in a queue (``queue_tenants``): the tenants with the most due rows,
most first, each with its oldest due run time; only due rows of that queue count; a bounded
read past which the counts are lower bounds."""

from __future__ import annotations

from tests.support.conformance import req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, JobIntrospection, TenantBacklog


async def test_the_tenants_with_most_due_work_come_first(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    start = clock.now_ms()
    for n in range(3):
        await driver.enqueue(req(tenant_id="flood", key=f"f{n}"))
        clock.advance(10)
    await driver.enqueue(req(tenant_id="quiet", key="q"))
    await driver.enqueue(req(key="none"))  # no tenant: a group of its own
    await driver.enqueue(req(tenant_id="later", key="l", run_at_ms=clock.now_ms() + 60_000))
    await driver.enqueue(req(tenant_id="other-queue", key="o", queue="reports"))
    found = await introspect.queue_tenants("default", clock.now_ms(), cap=100, top=10)
    assert found.capped is False
    assert found.tenants == (
        TenantBacklog("flood", 3, start),
        TenantBacklog("quiet", 1, start + 30),
        TenantBacklog(None, 1, start + 30),
    )


async def test_past_the_cap_the_counts_are_lower_bounds_and_top_bounds_the_list(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    for n in range(5):
        await driver.enqueue(req(tenant_id=f"t{n}", key=f"k{n}"))
        clock.advance(1)
    found = await introspect.queue_tenants("default", clock.now_ms(), cap=3, top=2)
    assert found.capped is True
    assert [t.tenant_id for t in found.tenants] == ["t0", "t1"]  # equal counts: oldest first
