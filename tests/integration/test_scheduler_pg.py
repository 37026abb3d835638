"""The scheduler on real Postgres: the one-statement fire, durable watermarks, the lease row,
pauses, and the wake. Time is a FrozenClock that reaches the statements."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from tests.support.scheduler import HOUR, T0, hours_from, occurrences_of, tick_job, ticking_task
from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.jobs.task import TaskHandle
from ujobs.scheduler.job_scheduler import PAUSE_RECHECK_MS, JobScheduler, job_scheduler
from ujobs.scheduler.leader_postgres import PostgresLeaseLeader, postgres_lease_leader
from ujobs.scheduler.state_postgres import PostgresSchedulerState, postgres_scheduler_state

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
async def driver(pg_pool: Pool, clock: FrozenClock) -> AsyncIterator[PostgresDriver]:
    driver = postgres_driver(pg_pool, clock=clock)
    yield driver
    await driver.close()


@pytest.fixture
def hourly() -> TaskHandle:
    return ticking_task(tick_job())


def scheduler(
    driver: PostgresDriver,
    pool: Pool,
    clock: FrozenClock,
    tasks: list[TaskHandle],
    *,
    holder: str = "a",
    ttl_ms: int = 30_000,
) -> JobScheduler:
    return job_scheduler(
        driver=driver,
        state=postgres_scheduler_state(pool, clock=clock),
        leader=postgres_lease_leader(executor=pool, holder=holder, ttl_ms=ttl_ms, clock=clock),
        tasks=tasks,
        clock=clock,
    )


async def rows_by_occurrence(pool: Pool) -> dict[int, int]:
    records = await pool.fetch(
        "select (input->>'occurrence_ms')::bigint as occ, count(*) as n from x_jobs group by 1"
    )
    return {r["occ"]: r["n"] for r in records}


def request(occurrence: int, key: str | None = None) -> EnqueueRequest:
    return EnqueueRequest(
        name="tick",
        input={"occurrence_ms": occurrence},
        idempotency_key=key or f"tick:{occurrence}@hourly:{occurrence}",
    )


# -- the one-statement fire ---------------------------------------------------------------------


async def test_a_fire_moves_the_watermark_inserts_the_jobs_and_records_the_fire(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver
) -> None:
    state = postgres_scheduler_state(pg_pool, clock=clock)
    await state.advance("hourly", T0)
    assert await state.load() == {"hourly": T0}
    occurrence = T0 + HOUR
    assert await state.fire("hourly", occurrence, [request(occurrence)]) is True
    assert await state.load() == {"hourly": occurrence}
    assert await rows_by_occurrence(pg_pool) == {occurrence: 1}
    fires = await driver.introspect.task_fires()
    assert [(f.task, f.occurrence_ms, f.fired_at_ms) for f in fires] == [("hourly", occurrence, T0)]
    # The same occurrence again, or an older one: refused, and nothing is inserted.
    assert await state.fire("hourly", occurrence, [request(occurrence, "other")]) is False
    assert await state.fire("hourly", occurrence - 1, [request(occurrence - 1)]) is False
    assert await rows_by_occurrence(pg_pool) == {occurrence: 1}


async def test_a_fire_can_move_the_watermark_past_its_occurrence_and_advance_never_goes_back(
    pg_pool: Pool, clock: FrozenClock
) -> None:
    state = postgres_scheduler_state(pg_pool, clock=clock)
    assert await state.fire("hourly", T0 + HOUR, [], watermark_ms=T0 + 5 * HOUR) is True
    assert await state.load() == {"hourly": T0 + 5 * HOUR}
    await state.advance("hourly", T0)
    assert await state.load() == {"hourly": T0 + 5 * HOUR}
    assert await state.fire("hourly", T0 + 3 * HOUR, [request(T0 + 3 * HOUR)]) is False


async def test_a_fire_dedupes_on_the_live_key_like_the_driver(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver
) -> None:
    occurrence = T0 + HOUR
    existing = await driver.enqueue(request(occurrence))
    state = postgres_scheduler_state(pg_pool, clock=clock)
    assert await state.fire("hourly", occurrence, [request(occurrence), request(occurrence)])
    ids = [r["id"] for r in await pg_pool.fetch("select id from x_jobs")]
    assert ids == [existing.id]


async def test_schedulers_racing_on_one_occurrence_produce_one_row(
    pg_pool: Pool, pg_dsn: str, clock: FrozenClock
) -> None:
    """Each racer on its own pool (its own connections), twenty occurrences in a row."""
    other = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    assert other is not None
    try:
        states = [
            postgres_scheduler_state(pg_pool, clock=clock),
            postgres_scheduler_state(other, clock=clock),
        ]
        await states[0].advance("hourly", T0)
        for n in range(1, 21):
            occurrence = T0 + n * HOUR
            # Different keys per racer: only the watermark can keep the second out.
            results = await asyncio.gather(
                *(
                    s.fire("hourly", occurrence, [request(occurrence, f"racer{i}:{occurrence}")])
                    for i, s in enumerate(states)
                )
            )
            assert sorted(results) == [False, True]
        counts = await rows_by_occurrence(pg_pool)
        assert counts == {T0 + n * HOUR: 1 for n in range(1, 21)}
    finally:
        await other.close()


async def test_a_fire_announces_each_queue_it_filled_and_a_refused_one_is_silent(
    pg_pool: Pool, pg_dsn: str, clock: FrozenClock
) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(pg_dsn)
    try:
        await listener.add_listener("x_jobs_wake", lambda *args: heard.put_nowait(args[3]))
        state = postgres_scheduler_state(pg_pool, clock=clock)
        occurrence = T0 + HOUR
        jobs = [
            request(occurrence),
            EnqueueRequest(name="tick", input={}, idempotency_key="b", queue="emails"),
            EnqueueRequest(name="tick", input={}, idempotency_key="c", queue="emails"),
        ]
        assert await state.fire("hourly", occurrence, jobs) is True
        got = {await asyncio.wait_for(heard.get(), 5) for _ in range(2)}
        assert got == {"default", "emails"}
        assert await state.fire("hourly", occurrence, jobs) is False
        await listener.execute("select 1")  # a round trip: any notification would be in by now
        assert heard.empty()
    finally:
        await listener.close()


# -- the scheduler over Postgres ------------------------------------------------------------------


async def test_a_replacement_scheduler_fires_the_occurrence_the_dead_leader_dropped(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver, hourly: TaskHandle
) -> None:
    first = scheduler(driver, pg_pool, clock, [hourly], holder="first")
    assert (await first.run_once()).armed == ["hourly"]
    thirteen, fourteen = hours_from(T0, 2)
    clock.set(thirteen)
    assert occurrences_of((await first.run_once()).fired) == [thirteen]
    # `first` dies holding the lease. Its replacement comes up at 14:20: the lease lapsed
    # long ago, the watermark (13:00) did not.
    clock.set(fourteen + 20 * 60_000)
    second = scheduler(driver, pg_pool, clock, [hourly], holder="second")
    result = await second.run_once()
    assert result.leading
    assert result.armed == []
    assert occurrences_of(result.fired) == [fourteen]
    assert await rows_by_occurrence(pg_pool) == {thirteen: 1, fourteen: 1}


async def test_a_standby_takes_over_after_the_ttl_and_the_old_leader_learns_it(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver, hourly: TaskHandle
) -> None:
    leader = scheduler(driver, pg_pool, clock, [hourly], holder="a", ttl_ms=30_000)
    standby = scheduler(driver, pg_pool, clock, [hourly], holder="b", ttl_ms=30_000)
    assert (await leader.run_once()).leading
    assert not (await standby.run_once()).leading
    # The leader stops renewing (killed, or paused). Before the TTL the standby still waits.
    clock.advance(29_000)
    assert not (await standby.run_once()).leading
    clock.advance(1_000)  # the standby asks every 10 s; its next ask is after the TTL
    clock.advance(10_000)
    result = await standby.run_once()
    assert result.leading
    # The old leader comes back: its next acquire is refused, so it is demoted and dispatches
    # nothing.
    clock.advance(1_000)
    demoted = await leader.run_once()
    assert not demoted.leading
    assert leader.signals.emitted("leader") == [True, False]
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    assert occurrences_of((await standby.run_once()).fired) == [thirteen]
    assert (await leader.run_once()).fired == []


async def test_a_clean_stop_releases_the_lease_for_the_standby_at_once(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver
) -> None:
    a = postgres_lease_leader(executor=pg_pool, holder="a", clock=clock)
    b = postgres_lease_leader(executor=pg_pool, holder="b", clock=clock)
    assert await a.acquire()
    assert not await b.acquire()
    current = await a.current()
    assert current is not None
    assert (current.holder, current.expires_at_ms) == ("a", T0 + 30_000)
    clock.advance(10_000)
    assert await a.acquire()  # the renewal moves the expiry, keeps the take time
    renewed = await a.current()
    assert renewed is not None
    assert (renewed.acquired_at_ms, renewed.expires_at_ms) == (T0, T0 + 40_000)
    await a.release()
    assert await b.acquire()
    assert not await a.acquire()
    await a.release()  # not the holder: changes nothing
    assert (await b.current()).holder == "b"  # type: ignore[union-attr]


async def test_the_lease_renews_every_third_of_its_ttl(pg_pool: Pool) -> None:
    leader = postgres_lease_leader(executor=pg_pool, ttl_ms=30_000)
    assert leader.renew_every_ms == 10_000
    assert isinstance(leader, PostgresLeaseLeader)


async def test_a_leader_whose_renewals_fail_stops_dispatching_when_the_lease_lapses(
    pg_pool: Pool, pg_dsn: str, clock: FrozenClock, driver: PostgresDriver, hourly: TaskHandle
) -> None:
    lease_pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1)
    assert lease_pool is not None
    sched = job_scheduler(
        driver=driver,
        state=postgres_scheduler_state(pg_pool, clock=clock),
        leader=postgres_lease_leader(executor=lease_pool, clock=clock),
        tasks=[hourly],
        clock=clock,
    )
    assert (await sched.run_once()).leading
    await lease_pool.close()  # every renewal from now on raises
    for _ in range(29):
        clock.advance(1_000)
        assert (await sched.run_once()).leading
    clock.advance(1_000)  # 30 s since the last renewal that landed
    assert not (await sched.run_once()).leading


async def test_a_paused_task_is_not_dispatched_and_resumes_by_its_catch_up(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver, hourly: TaskHandle
) -> None:
    sched = scheduler(driver, pg_pool, clock, [hourly])
    await sched.run_once()
    await driver.introspect.pause_task("hourly")
    thirteen, fourteen = hours_from(T0, 2)
    clock.set(thirteen)
    assert (await sched.run_once()).paused == ["hourly"]
    assert sched.next_due("hourly") == thirteen + PAUSE_RECHECK_MS
    clock.advance(PAUSE_RECHECK_MS - 1)
    assert (await sched.run_once()).paused == []  # not looked at again before the recheck
    clock.advance(1)
    assert (await sched.run_once()).paused == ["hourly"]
    clock.set(fourteen + 60_000)
    assert (await sched.run_once()).paused == ["hourly"]
    await driver.introspect.resume_task("hourly")
    clock.advance(PAUSE_RECHECK_MS)
    result = await sched.run_once()
    # skip: the latest of the two it missed while paused, the older one dropped.
    assert occurrences_of(result.fired) == [fourteen]
    assert await rows_by_occurrence(pg_pool) == {fourteen: 1}


async def test_the_leader_rolls_the_counters_up_once_a_minute(
    pg_pool: Pool, clock: FrozenClock, driver: PostgresDriver, hourly: TaskHandle
) -> None:
    sched = scheduler(driver, pg_pool, clock, [hourly])
    for _ in range(150):  # two and a half minutes of 1-second rounds
        await sched.run_once()
        clock.advance(1_000)
    assert len(sched.signals.emitted("rollup")) == 3  # at 0 s, 60 s and 120 s


async def test_state_is_a_durable_scheduler_state(pg_pool: Pool) -> None:
    state = postgres_scheduler_state(pg_pool)
    assert isinstance(state, PostgresSchedulerState)
    assert state.durable
