"""The running scheduler: start/stop, the loop firing on real time, and the drain."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from tests.support.scheduler import queued_occurrences, tick_job, ticking_task
from ujobs.drivers.base import EnqueueRequest, JobDriver
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.lifecycle import Lifecycle
from ujobs.scheduler.job_scheduler import Fired, job_scheduler
from ujobs.scheduler.leader import AlwaysLeader
from ujobs.scheduler.state import MemorySchedulerState, memory_scheduler_state


@pytest.fixture
def driver() -> MemoryDriver:
    return memory_driver()


class StuckState(MemorySchedulerState):
    """A store whose fire hangs until told: a round caught mid-enqueue by the deadline."""

    def __init__(self, driver: MemoryDriver) -> None:
        super().__init__(driver)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def fire(
        self,
        task: str,
        occurrence_ms: int,
        requests: Sequence[EnqueueRequest],
        *,
        watermark_ms: int | None = None,
        driver: JobDriver | None = None,
    ) -> bool:
        self.entered.set()
        await self.release.wait()
        return await super().fire(
            task, occurrence_ms, requests, watermark_ms=watermark_ms, driver=driver
        )


async def test_the_loop_fires_a_per_second_task_on_real_time(driver: MemoryDriver) -> None:
    every_second = ticking_task(tick_job(), name="every-second", cron="* * * * * *")
    scheduler = job_scheduler(
        driver=driver,
        state=memory_scheduler_state(driver),
        leader=AlwaysLeader(),
        tasks=[every_second],
        lifecycle=Lifecycle(),
    )
    await scheduler.start()
    await scheduler.start()  # safe twice
    try:
        first: Fired = await scheduler.signals.wait("fired")
        second: Fired = await scheduler.signals.wait(
            "fired", lambda f: f.occurrence_ms > first.occurrence_ms
        )
        assert second.occurrence_ms - first.occurrence_ms == 1_000
        assert first.occurrence_ms % 1_000 == 0
    finally:
        await scheduler.stop()
        await scheduler.stop()  # safe twice
    assert (await queued_occurrences(driver))[:2] == [first.occurrence_ms, second.occurrence_ms]


async def test_stop_before_start_does_nothing(driver: MemoryDriver) -> None:
    scheduler = job_scheduler(driver=driver, tasks=[], lifecycle=Lifecycle())
    await scheduler.stop()


async def test_a_drain_stops_dispatching_and_releases_the_lease(driver: MemoryDriver) -> None:
    lifecycle = Lifecycle(deadline_ms=5_000)
    leader = AlwaysLeader()
    hourly = ticking_task(tick_job())
    scheduler = job_scheduler(
        driver=driver,
        state=memory_scheduler_state(driver),
        leader=leader,
        tasks=[hourly],
        lifecycle=lifecycle,
    )
    await scheduler.start()
    await scheduler.signals.wait("armed")
    assert lifecycle.hook_count == 1
    await lifecycle.drain()
    assert await scheduler.signals.wait("stopped") is False  # the lease was not kept
    assert leader.released
    assert scheduler.stopping
    assert lifecycle.hook_count == 0
    rounds = len(scheduler.signals.emitted("round"))
    await asyncio.sleep(0.05)
    assert len(scheduler.signals.emitted("round")) == rounds


async def test_a_round_still_enqueueing_at_the_deadline_keeps_the_lease(
    driver: MemoryDriver, caplog: pytest.LogCaptureFixture
) -> None:
    lifecycle = Lifecycle(deadline_ms=100)
    leader = AlwaysLeader()
    state = StuckState(driver)
    every_second = ticking_task(tick_job(), name="every-second", cron="* * * * * *")
    scheduler = job_scheduler(
        driver=driver, state=state, leader=leader, tasks=[every_second], lifecycle=lifecycle
    )
    await scheduler.start()
    await asyncio.wait_for(state.entered.wait(), 10)
    with caplog.at_level(logging.INFO, logger="ujobs.scheduler"):
        await asyncio.wait_for(lifecycle.drain(), 10)
    assert await scheduler.signals.wait("stopped") is True  # kept
    assert not leader.released
    assert any(r.msg == "jobs.scheduler.drain-abandoned" for r in caplog.records)
    assert scheduler.signals.emitted("fired") == []


async def test_a_drain_waits_for_the_round_in_flight_to_finish(driver: MemoryDriver) -> None:
    lifecycle = Lifecycle(deadline_ms=10_000)
    leader = AlwaysLeader()
    state = StuckState(driver)
    every_second = ticking_task(tick_job(), name="every-second", cron="* * * * * *")
    scheduler = job_scheduler(
        driver=driver, state=state, leader=leader, tasks=[every_second], lifecycle=lifecycle
    )
    await scheduler.start()
    await asyncio.wait_for(state.entered.wait(), 10)
    draining = asyncio.ensure_future(lifecycle.drain())
    await asyncio.sleep(0.05)
    assert not draining.done()
    state.release.set()
    await asyncio.wait_for(draining, 10)
    assert len(scheduler.signals.emitted("fired")) == 1  # the round finished; no other began
    assert leader.released
