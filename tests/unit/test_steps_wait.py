"""``step.wait_for_event``: the bus clock stamps the wait and alone decides its timeout."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.execute import T0, claim, enqueue, frozen_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import InvariantError, JobTimeoutError
from ujobs.events.bus import MemoryEventBus, memory_event_bus
from ujobs.execution.steps import WAIT_START_SUFFIX, Step, StepSuspension
from ujobs.jobs.job import job
from ujobs.signal import Signal


@job(idempotency_key="k", tenant="none")
async def waiter(run: Any) -> None:
    """Driven by hand."""


async def _setup(
    bus_clock: FrozenClock | None = None,
) -> tuple[MemoryDriver, ClaimedJob, FrozenClock, MemoryEventBus, FrozenClock]:
    driver, clock = frozen_driver()
    bus_clock = bus_clock or FrozenClock(T0)
    bus = memory_event_bus(clock=bus_clock)
    await enqueue(driver, waiter)
    return driver, await claim(driver), clock, bus, bus_clock


async def _step(driver: MemoryDriver, claimed: ClaimedJob, bus: MemoryEventBus, **kw: Any) -> Step:
    return await Step.load(
        driver=driver,
        job_id=claimed.id,
        run_id=claimed.run_id,
        tenant_id=claimed.tenant_id,
        ref=claimed.ref,
        signal=Signal(),
        clock=driver.clock,
        bus=bus,
        **kw,
    )


async def test_an_event_published_after_the_wait_began_resolves_it() -> None:
    driver, claimed, clock, bus, bus_clock = await _setup()
    await bus.publish("approval", {"doc": "d1", "ok": False})  # before the wait: never counts
    bus_clock.advance(10)
    step = await _step(driver, claimed, bus, event_poll_ms=5_000)
    with pytest.raises(StepSuspension) as parked:
        await step.wait_for_event("approve", "approval", match={"doc": "d1"})
    assert parked.value.kind == "wait"
    assert parked.value.resume_at_ms == clock.now_ms() + 5_000  # the job's event_poll
    stored = {
        s.name: s.output
        for s in await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id)
    }
    assert stored == {f"approve{WAIT_START_SUFFIX}": {"startedAtMs": T0 + 10, "event": "approval"}}

    bus_clock.advance(1)
    await bus.publish("approval", {"doc": "d2", "ok": True})
    await bus.publish("approval", {"doc": "d1", "ok": True})
    resumed = await _step(driver, claimed, bus, event_poll_ms=5_000)
    payload = await resumed.wait_for_event("approve", "approval", match={"doc": "d1"})
    assert payload == {"doc": "d1", "ok": True}

    replay = await _step(driver, claimed, bus)
    await bus.purge_expired()
    assert await replay.wait_for_event("approve", "approval") == {"doc": "d1", "ok": True}
    assert replay.replayed == ["approve"]


async def test_a_matching_event_already_there_resolves_without_suspending() -> None:
    driver, claimed, _, bus, _bus_clock = await _setup()
    step = await _step(driver, claimed, bus)

    async def publish_then_wait() -> Any:
        # The start is stamped first, so an event at the same bus instant counts.
        await bus.publish("ready", {"n": 1})
        return await step.wait_for_event("w", "ready", match=lambda p: p["n"] == 1)

    assert await publish_then_wait() == {"n": 1}


async def test_the_wait_times_out_on_the_bus_clock_with_x_job_timeout() -> None:
    driver, claimed, clock, bus, bus_clock = await _setup()
    step = await _step(driver, claimed, bus, event_poll_ms=60_000)
    with pytest.raises(StepSuspension) as parked:
        await step.wait_for_event("w", "never", timeout="10s")
    # Parks for the shorter of the poll and what is left of the timeout.
    assert parked.value.resume_at_ms == clock.now_ms() + 10_000
    clock.advance(10_000)
    bus_clock.advance(10_000)
    again = await _step(driver, claimed, bus, event_poll_ms=60_000)
    with pytest.raises(JobTimeoutError) as info:
        await again.wait_for_event("w", "never", timeout="10s")
    assert info.value.code == "X_JOB_TIMEOUT"
    assert info.value.meta == {"step": "w", "event": "never", "timeoutMs": 10_000}


async def test_a_bus_clock_lagging_the_worker_does_not_time_out_early() -> None:
    bus_clock = FrozenClock(T0 - 60_000)  # the database is a minute behind this worker
    driver, claimed, clock, bus, _ = await _setup(bus_clock)
    step = await _step(driver, claimed, bus, event_poll_ms=1_000)
    with pytest.raises(StepSuspension):
        await step.wait_for_event("w", "answer", timeout="5s")
    # The worker's clock passes the timeout; the bus clock has not.
    clock.advance(6_000)
    bus_clock.advance(4_000)
    later = await _step(driver, claimed, bus, event_poll_ms=1_000)
    with pytest.raises(StepSuspension) as parked:
        await later.wait_for_event("w", "answer", timeout="5s")
    assert parked.value.resume_at_ms == clock.now_ms() + 1_000
    # An answer published now (bus clock) still counts: it is after the stamped start.
    await bus.publish("answer", {"yes": True})
    last = await _step(driver, claimed, bus, event_poll_ms=1_000)
    assert await last.wait_for_event("w", "answer", timeout="5s") == {"yes": True}


async def test_the_start_is_asked_of_the_bus_not_the_worker() -> None:
    bus_clock = FrozenClock(T0 + 3_600_000)  # the bus runs an hour ahead
    driver, claimed, _, bus, _ = await _setup(bus_clock)
    step = await _step(driver, claimed, bus)
    with pytest.raises(StepSuspension):
        await step.wait_for_event("w", "e")
    marker = await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id)
    assert marker[0].output["startedAtMs"] == T0 + 3_600_000


async def test_no_timeout_polls_at_event_poll_forever() -> None:
    driver, claimed, clock, bus, bus_clock = await _setup()
    for _ in range(3):
        step = await _step(driver, claimed, bus, event_poll_ms=30_000)
        with pytest.raises(StepSuspension) as parked:
            await step.wait_for_event("w", "e")
        assert parked.value.resume_at_ms == clock.now_ms() + 30_000
        clock.advance(30_000)
        bus_clock.advance(30_000)


async def test_an_empty_event_name_is_refused() -> None:
    driver, claimed, _, bus, _ = await _setup()
    step = await _step(driver, claimed, bus)
    with pytest.raises(InvariantError):
        await step.wait_for_event("w", "")
