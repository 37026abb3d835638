"""``step.wait_for_event`` waits as its job's tenant, on every driver: an event published for
another tenant never resumes it, its own tenant's does, and an event of no tenant (an
operator's) reaches every waiter."""

from __future__ import annotations

from typing import Any

from tests.support.conformance import claim_one
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver
from ujobs.events.bus import MemoryEventBus, memory_event_bus
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import JobExecution
from ujobs.jobs.job import JobHandle, job
from ujobs.jobs.schema import t

POLL_MS = 1_000


@job(
    input=t.object(org=t.string, order=t.string),
    idempotency_key=lambda i: f"await:{i.org}:{i.order}",
    tenant=lambda i: i.org,
    event_poll=f"{POLL_MS}ms",
)
async def await_approval(run: Any) -> Any:
    return await run.step.wait_for_event("approval", "order.approved")


async def _attempt(
    driver: JobDriver, clock: FrozenClock, handle: JobHandle[Any], bus: MemoryEventBus
) -> JobExecution:
    """The due job's next attempt (then the clock moves to its next poll)."""
    claimed = await claim_one(driver)
    ran = await execute_job(claimed, driver=driver, handle=handle, context=None, events=bus)
    clock.advance(POLL_MS)
    return ran


async def _waiting(driver: JobDriver, clock: FrozenClock, org: str, order: str) -> MemoryEventBus:
    bus = memory_event_bus(clock=clock)
    await driver.enqueue(await_approval.request({"org": org, "order": order}, clock=clock))
    assert (await _attempt(driver, clock, await_approval, bus)).outcome == "suspended"
    return bus


async def test_another_tenants_event_never_resumes_a_wait_and_its_own_does(
    driver: JobDriver, clock: FrozenClock
) -> None:
    bus = await _waiting(driver, clock, "org-a", "o1")
    await bus.publish("order.approved", {"by": "org-b"}, tenant="org-b")
    assert (await _attempt(driver, clock, await_approval, bus)).outcome == "suspended"
    await bus.publish("order.approved", {"by": "org-a"}, tenant="org-a")
    resumed = await _attempt(driver, clock, await_approval, bus)
    assert (resumed.outcome, resumed.result) == ("completed", {"by": "org-a"})


async def test_an_event_of_no_tenant_reaches_every_tenants_wait(
    driver: JobDriver, clock: FrozenClock
) -> None:
    bus = await _waiting(driver, clock, "org-a", "o2")
    await bus.publish("order.approved", {"by": "operator"})
    resumed = await _attempt(driver, clock, await_approval, bus)
    assert (resumed.outcome, resumed.result) == ("completed", {"by": "operator"})
