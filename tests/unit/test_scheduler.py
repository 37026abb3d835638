"""The scheduler on a frozen clock: arming, fires, every catch-up policy, restarts and races.

The store here is the memory state (a dict) and the queue the memory driver; the Postgres
state and lease are held to the same behaviour in tests/integration/test_scheduler_pg.py.
"""

from __future__ import annotations

import asyncio
import logging
import zoneinfo
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from tests.support.scheduler import (
    HOUR,
    T0,
    YEAR,
    hours_from,
    last_hour_at_or_before,
    occurrences_of,
    queued_occurrences,
    queued_rows,
    tick_job,
    ticking_task,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest, JobDriver
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.jobs.registry import define_api
from ujobs.jobs.task import CatchUp, TaskHandle
from ujobs.scheduler.job_scheduler import PAUSE_RECHECK_MS, JobScheduler, job_scheduler
from ujobs.scheduler.leader import always_leader
from ujobs.scheduler.state import MemorySchedulerState, memory_scheduler_state


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def driver(clock: FrozenClock) -> MemoryDriver:
    return memory_driver(clock=clock)


@pytest.fixture
def hourly() -> TaskHandle:
    """An hourly task with the default catch-up (skip)."""
    return ticking_task(tick_job())


def scheduler_for(
    driver: MemoryDriver, clock: FrozenClock, state: MemorySchedulerState, hourly: TaskHandle
) -> JobScheduler:
    return job_scheduler(
        driver=driver, state=state, leader=always_leader(), tasks=[hourly], clock=clock
    )


# -- arming and an ordinary fire -----------------------------------------------------------


async def test_arming_sets_the_watermark_to_now_and_fires_nothing(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    state = memory_scheduler_state(driver)
    scheduler = scheduler_for(driver, clock, state, hourly)
    result = await scheduler.run_once()
    assert result.armed == ["hourly"]
    assert result.fired == []
    assert state.watermarks == {"hourly": T0}
    assert await queued_occurrences(driver) == []


async def test_an_occurrence_fires_once_with_an_occurrence_scoped_key(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    state = memory_scheduler_state(driver)
    scheduler = scheduler_for(driver, clock, state, hourly)
    await scheduler.run_once()
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen - 1)
    assert (await scheduler.run_once()).fired == []
    clock.set(thirteen)
    result = await scheduler.run_once()
    assert occurrences_of(result.fired) == [thirteen]
    assert result.fired[0].missed is False
    clock.advance(500)
    assert (await scheduler.run_once()).fired == []
    assert await queued_occurrences(driver) == [thirteen]
    (row,) = await queued_rows(driver)
    assert row.idempotency_key == f"tick:{thirteen}@hourly:{thirteen}"
    assert state.watermarks["hourly"] == thirteen
    assert scheduler.next_due("hourly") == thirteen + HOUR


async def test_tasks_default_to_the_process_registry(
    driver: MemoryDriver, clock: FrozenClock
) -> None:
    import types

    module = types.SimpleNamespace(nightly=ticking_task(tick_job(), name="nightly"))
    define_api(tasks=[module])
    scheduler = job_scheduler(driver=driver, leader=always_leader(), clock=clock)
    assert [t.name for t in scheduler.tasks] == ["nightly"]


# -- catch-up after downtime: every policy, 3 hours and a year -----------------------------


async def armed_then_down(
    driver: MemoryDriver,
    clock: FrozenClock,
    catch_up: CatchUp,
    down_ms: int,
    max_catch_up: int = 10,
) -> tuple[JobScheduler, MemorySchedulerState]:
    """Arm at T0 on one scheduler, then bring a fresh one up on the same store after
    ``down_ms`` (plus 20 minutes, so 'now' is not on an occurrence)."""
    hourly = ticking_task(tick_job(), catch_up=catch_up, max_catch_up=max_catch_up)
    state = memory_scheduler_state(driver)
    await scheduler_for(driver, clock, state, hourly).run_once()
    clock.advance(down_ms + 20 * 60_000)
    return scheduler_for(driver, clock, state, hourly), state


@pytest.mark.parametrize("down_ms", [3 * HOUR, YEAR], ids=["3h", "1y"])
async def test_skip_fires_the_true_latest_missed_occurrence(
    driver: MemoryDriver, clock: FrozenClock, down_ms: int
) -> None:
    scheduler, state = await armed_then_down(driver, clock, "skip", down_ms)
    now = clock.now_ms()
    result = await scheduler.run_once()
    latest = last_hour_at_or_before(now)
    assert occurrences_of(result.fired) == [latest]
    assert result.fired[0].missed is True
    # A bisection, not a walk: ~25 resolutions for three hours, ~35 for a year.
    assert result.fired[0].evaluations <= (25 if down_ms == 3 * HOUR else 37)
    assert state.watermarks["hourly"] == latest
    clock.advance(1_000)
    assert (await scheduler.run_once()).fired == []
    clock.set(latest + HOUR)
    assert occurrences_of((await scheduler.run_once()).fired) == [latest + HOUR]
    assert await queued_occurrences(driver) == [latest, latest + HOUR]


@pytest.mark.parametrize("down_ms", [3 * HOUR, YEAR], ids=["3h", "1y"])
async def test_run_once_fires_the_earliest_missed_once_and_passes_the_rest(
    driver: MemoryDriver, clock: FrozenClock, down_ms: int
) -> None:
    scheduler, state = await armed_then_down(driver, clock, "run-once", down_ms)
    now = clock.now_ms()
    (earliest,) = hours_from(T0, 1)
    result = await scheduler.run_once()
    assert occurrences_of(result.fired) == [earliest]
    assert state.watermarks["hourly"] == now
    for _ in range(5):  # once, not once per tick
        clock.advance(1_000)
        assert (await scheduler.run_once()).fired == []
    next_real = last_hour_at_or_before(now) + HOUR
    clock.set(next_real)
    assert occurrences_of((await scheduler.run_once()).fired) == [next_real]
    assert await queued_occurrences(driver) == [earliest, next_real]


async def test_run_all_fires_every_missed_occurrence_after_three_hours(
    driver: MemoryDriver, clock: FrozenClock
) -> None:
    scheduler, state = await armed_then_down(driver, clock, "run-all", 3 * HOUR)
    result = await scheduler.run_once()
    missed = hours_from(T0, 3)
    assert occurrences_of(result.fired) == missed
    assert [f.missed for f in result.fired] == [True, True, False]
    assert state.watermarks["hourly"] == missed[-1]
    clock.advance(1_000)
    assert (await scheduler.run_once()).fired == []
    assert await queued_occurrences(driver) == missed


async def test_run_all_after_a_year_walks_at_most_max_catch_up_per_tick(
    driver: MemoryDriver, clock: FrozenClock
) -> None:
    scheduler, state = await armed_then_down(driver, clock, "run-all", YEAR, max_catch_up=4)
    missed = hours_from(T0, 12)
    for tick in range(3):
        result = await scheduler.run_once()
        assert occurrences_of(result.fired) == missed[tick * 4 : tick * 4 + 4]
        assert state.watermarks["hourly"] == missed[tick * 4 + 3]
        clock.advance(1_000)
    assert await queued_occurrences(driver) == missed


# -- restarts and races ----------------------------------------------------------------------


async def test_a_replacement_scheduler_fires_the_occurrence_the_previous_one_dropped(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    state = memory_scheduler_state(driver)  # stands in for a durable store: it outlives both
    first = scheduler_for(driver, clock, state, hourly)
    await first.run_once()
    thirteen, fourteen = hours_from(T0, 2)
    clock.set(thirteen)
    await first.run_once()
    # The first scheduler dies before 14:00; its replacement comes up at 14:20.
    clock.set(fourteen + 20 * 60_000)
    second = scheduler_for(driver, clock, state, hourly)
    result = await second.run_once()
    assert result.armed == []
    assert occurrences_of(result.fired) == [fourteen]
    assert await queued_occurrences(driver) == [thirteen, fourteen]


async def test_a_scheduler_without_a_durable_watermark_arms_and_loses_the_gap(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    """Why the defaults warn: a fresh dict re-arms to now and never sees what was missed."""
    await scheduler_for(driver, clock, memory_scheduler_state(driver), hourly).run_once()
    clock.advance(3 * HOUR)
    result = await scheduler_for(driver, clock, memory_scheduler_state(driver), hourly).run_once()
    assert result.armed == ["hourly"]
    assert result.fired == []


async def test_two_schedulers_racing_on_one_store_fire_once(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    state = memory_scheduler_state(driver)
    a = scheduler_for(driver, clock, state, hourly)
    b = scheduler_for(driver, clock, state, hourly)
    await a.run_once()
    await b.run_once()
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    results = await asyncio.gather(a.run_once(), b.run_once())
    assert sorted(len(r.fired) for r in results) == [0, 1]
    assert sorted(len(r.refused) for r in results) == [0, 1]
    assert await queued_occurrences(driver) == [thirteen]
    # The loser re-read the store: it does not try again.
    clock.advance(1_000)
    assert [(await s.run_once()).fired for s in (a, b)] == [[], []]


async def test_two_schedulers_with_separate_stores_still_produce_one_row(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    """Belt and braces: the occurrence-scoped key dedupes even two leaders that both fired."""
    a = scheduler_for(driver, clock, memory_scheduler_state(driver), hourly)
    b = scheduler_for(driver, clock, memory_scheduler_state(driver), hourly)
    await a.run_once()
    await b.run_once()
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    results = await asyncio.gather(a.run_once(), b.run_once())
    assert [len(r.fired) for r in results] == [1, 1]
    assert await queued_occurrences(driver) == [thirteen]


async def test_the_state_refuses_an_occurrence_at_or_behind_its_watermark(
    driver: MemoryDriver,
) -> None:
    state = memory_scheduler_state(driver, {"hourly": 1_000})
    request = EnqueueRequest(name="tick", input={"occurrence_ms": 1_000}, idempotency_key="k")
    assert await state.fire("hourly", 1_000, [request]) is False
    assert await state.fire("hourly", 999, [request]) is False
    assert await queued_rows(driver) == []
    assert await state.fire("hourly", 2_000, [request], watermark_ms=5_000) is True
    assert state.watermarks["hourly"] == 5_000
    await state.advance("hourly", 4_000)  # never backwards
    assert state.watermarks["hourly"] == 5_000


# -- idle cost ---------------------------------------------------------------------------------


class CountingState(MemorySchedulerState):
    """The memory state, counting what reaches it: the idle-cost claim is about store reads."""

    def __init__(self, driver: MemoryDriver) -> None:
        super().__init__(driver)
        self.calls: list[str] = []

    async def load(self) -> dict[str, int]:
        self.calls.append("load")
        return await super().load()

    async def advance(self, task: str, watermark_ms: int) -> None:
        self.calls.append("advance")
        await super().advance(task, watermark_ms)

    async def fire(
        self,
        task: str,
        occurrence_ms: int,
        requests: Sequence[EnqueueRequest],
        *,
        watermark_ms: int | None = None,
        driver: JobDriver | None = None,
    ) -> bool:
        self.calls.append("fire")
        return await super().fire(
            task, occurrence_ms, requests, watermark_ms=watermark_ms, driver=driver
        )


class CountingLeader:
    """A lease that is ours (or another node's, ``held=False``), counting every ask."""

    exclusive = True
    ttl_ms = 30_000
    renew_every_ms = 10_000

    def __init__(self, held: bool = True) -> None:
        self.acquires = 0
        self.held = held

    async def acquire(self) -> bool:
        self.acquires += 1
        return self.held

    async def release(self) -> None:
        return None


async def test_an_idle_minute_reads_no_store_and_renews_the_lease_six_times(
    driver: MemoryDriver, clock: FrozenClock
) -> None:
    state = CountingState(driver)
    leader = CountingLeader()
    tasks = [ticking_task(tick_job(f"job{i}"), name=f"task{i}") for i in range(35)]
    scheduler = job_scheduler(driver=driver, state=state, leader=leader, tasks=tasks, clock=clock)
    await scheduler.run_once()  # leads, loads once, arms all 35
    assert state.calls == ["load"] + ["advance"] * 35
    state.calls.clear()
    leader.acquires = 0
    for _ in range(60):  # one idle minute of 1-second rounds, before 13:00
        clock.advance(1_000)
        result = await scheduler.run_once()
        assert result.leading
        assert (result.fired, result.armed) == ([], [])
    assert state.calls == []
    assert leader.acquires == 6


async def test_a_standby_asks_for_the_lease_every_renewal_not_every_round(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    state = CountingState(driver)
    leader = CountingLeader(held=False)
    scheduler = job_scheduler(
        driver=driver, state=state, leader=leader, tasks=[hourly], clock=clock
    )
    for _ in range(60):
        assert not (await scheduler.run_once()).leading
        clock.advance(1_000)
    assert leader.acquires == 6
    assert state.calls == []  # a standby never touches the store


# -- logs ----------------------------------------------------------------------------------------


async def test_the_defaults_warn_loudly_at_start(
    driver: MemoryDriver, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    from ujobs.lifecycle import Lifecycle
    from ujobs.scheduler import SchedulerOptions

    scheduler = job_scheduler(
        driver=driver,
        tasks=[],
        clock=clock,
        lifecycle=Lifecycle(),
        options=SchedulerOptions(tick_interval_ms=60_000),
    )
    with caplog.at_level(logging.WARNING, logger="ujobs.scheduler"):
        await scheduler.start()
        await scheduler.stop()
    (warning,) = [r for r in caplog.records if r.msg == "jobs.scheduler.unsafe-defaults"]
    assert warning.levelno == logging.WARNING
    assert len(warning.reasons) == 2  # type: ignore[attr-defined]


async def test_a_fire_is_logged_with_its_fields(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = scheduler_for(driver, clock, memory_scheduler_state(driver), hourly)
    await scheduler.run_once()
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    with caplog.at_level(logging.INFO, logger="ujobs.scheduler"):
        await scheduler.run_once()
    (fired,) = [r for r in caplog.records if r.msg == "jobs.scheduler.fired"]
    assert (fired.task, fired.occurrence_ms, fired.jobs) == ("hourly", thirteen, 1)  # type: ignore[attr-defined]


# -- pauses --------------------------------------------------------------------------------------


async def test_a_paused_task_holds_at_its_next_occurrence_and_resumes_by_run_once(
    driver: MemoryDriver, clock: FrozenClock
) -> None:
    introspect = driver.introspect
    assert introspect is not None
    hourly = ticking_task(tick_job(), catch_up="run-once")
    scheduler = scheduler_for(driver, clock, memory_scheduler_state(driver), hourly)
    await scheduler.run_once()
    await introspect.pause_task("hourly")
    thirteen, fourteen, fifteen = hours_from(T0, 3)
    clock.set(thirteen)
    assert (await scheduler.run_once()).paused == ["hourly"]
    assert scheduler.next_due("hourly") == thirteen + PAUSE_RECHECK_MS
    clock.set(fourteen + 60_000)
    assert (await scheduler.run_once()).paused == ["hourly"]
    await introspect.resume_task("hourly")
    clock.advance(PAUSE_RECHECK_MS)
    result = await scheduler.run_once()
    # run-once: the earliest of the two missed, once; the watermark passes 14:00.
    assert occurrences_of(result.fired) == [thirteen]
    clock.set(fifteen)
    assert occurrences_of((await scheduler.run_once()).fired) == [fifteen]
    assert await queued_occurrences(driver) == [thirteen, fifteen]
    assert [(f.task, f.occurrence_ms) for f in await introspect.task_fires()] == [
        ("hourly", fifteen)
    ]


async def test_a_pause_is_read_only_when_a_task_is_due(
    driver: MemoryDriver, clock: FrozenClock, hourly: TaskHandle
) -> None:
    introspect = driver.introspect
    assert introspect is not None
    scheduler = scheduler_for(driver, clock, memory_scheduler_state(driver), hourly)
    await scheduler.run_once()
    await introspect.pause_task("hourly")
    clock.advance(1_000)
    assert (await scheduler.run_once()).paused == []  # not due: nothing asked
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    assert (await scheduler.run_once()).paused == ["hourly"]


# -- DST, through the scheduler --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "day", "expected"),
    [
        ("0 2 * * *", (2024, 3, 10), ["03:00 EDT"]),  # 02:00 does not exist: once, after the gap
        ("0 2 * * *", (2024, 11, 3), ["02:00 EST"]),  # 02:00 happens once: once
        ("30 1 * * *", (2024, 11, 3), ["01:30 EDT"]),  # 01:30 happens twice: the first only
    ],
    ids=["spring-forward", "fall-back", "fall-back-repeated-wall-time"],
)
async def test_a_daily_new_york_task_fires_once_on_each_switch_day(
    cron: str, day: tuple[int, int, int], expected: list[str]
) -> None:
    zone = zoneinfo.ZoneInfo("America/New_York")
    start = int(datetime(*day, tzinfo=zone).timestamp() * 1000)
    end = int((datetime(*day, tzinfo=zone) + timedelta(days=1)).timestamp() * 1000)
    clock = FrozenClock(start)
    driver = memory_driver(clock=clock)
    daily = ticking_task(tick_job(), name="daily", cron=cron, tz="America/New_York")
    scheduler = scheduler_for(driver, clock, memory_scheduler_state(driver), daily)
    fired = []
    while clock.now_ms() < end:  # a round every 30 s through the whole local day
        fired += (await scheduler.run_once()).fired
        clock.advance(30_000)
    local = [
        datetime.fromtimestamp(f.occurrence_ms / 1000, zone).strftime("%H:%M %Z") for f in fired
    ]
    assert local == expected
    assert await queued_occurrences(driver) == [f.occurrence_ms for f in fired]
