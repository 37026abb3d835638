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


async def test_the_rows_read_are_the_first_in_hand_out_order_priority_first(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    """Past the cap the rows read are those the claim would hand out first: an urgent band's,
    not an older routine band's."""
    for n in range(2):
        await driver.enqueue(req(tenant_id="routine", key=f"r{n}", priority=9))
    clock.advance(10)
    urgent_at = clock.now_ms()
    for n in range(4):
        await driver.enqueue(req(tenant_id="urgent", key=f"u{n}"))
    found = await introspect.queue_tenants("default", clock.now_ms(), cap=3, top=10)
    assert found.capped is True
    # The cap's rows, not one more: the three first urgent rows (the fourth is past the cap).
    assert [(t.tenant_id, t.due, t.oldest_due_ms) for t in found.tenants] == [
        ("urgent", 3, urgent_at)
    ]


async def test_a_tenants_oldest_due_row_is_its_oldest_across_bands(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    start = clock.now_ms()
    await driver.enqueue(req(tenant_id="a", key="routine", priority=9))
    clock.advance(10)
    await driver.enqueue(req(tenant_id="a", key="urgent"))
    found = await introspect.queue_tenants("default", clock.now_ms(), cap=100, top=10)
    assert found.tenants == (TenantBacklog("a", 2, start),)
