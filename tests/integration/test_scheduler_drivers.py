"""The scheduler's jobs land on ITS job driver, whatever that is, with the watermark in Postgres.

On the Redis driver the jobs are enqueued on Redis and the watermark moves after, in Postgres; a
crash between the two (injected: the database refuses the watermark's move once) re-fires the
occurrence with the same derived ids, so it still makes one job. And a fire wakes workers like
any enqueue: this process's loops at once, other processes through the Redis wake channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from tests.support.redis_keys import redis_test_driver
from tests.support.scheduler import T0, hours_from, occurrences_of, tick_job, ticking_task
from tests.support.wake import WAIT_S, Heard
from tests.support.worker import declare, registry_of
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, JobDriver
from ujobs.drivers.memory.driver import memory_driver
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.redis.driver import RedisDriver
from ujobs.execution.run import Run
from ujobs.jobs.task import TaskHandle, occurrence_ids
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.scheduler.job_scheduler import JobScheduler, job_scheduler
from ujobs.scheduler.leader_postgres import postgres_lease_leader
from ujobs.scheduler.rounds import FIRE_RETRY_MS
from ujobs.scheduler.state_postgres import postgres_scheduler_state
from ujobs.wake.announce import announcing, redis_announcer
from ujobs.wake.listener import redis_wake
from ujobs.worker import job_worker

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]

MINUTE_MS = 60_000

# The database refuses the FIRST write to x_scheduler_state after this is installed — a
# scheduler that dies after its jobs were enqueued and before its watermark moved. A sequence,
# because it is not rolled back with the statement the trigger fails.
FAIL_NEXT_WATERMARK_WRITE = """
create sequence watermark_writes;
create function fail_first_watermark_write() returns trigger language plpgsql as $$
begin
  if nextval('watermark_writes') = 1 then
    raise exception 'injected: the scheduler died before its watermark moved';
  end if;
  return new;
end $$;
create trigger fail_first_watermark_write before insert or update on x_scheduler_state
  for each row execute function fail_first_watermark_write();
"""


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
async def redis(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock) as driver:
        yield driver


@pytest.fixture
def hourly() -> TaskHandle:
    return ticking_task(tick_job())


def scheduler(
    driver: JobDriver, pool: Pool, clock: FrozenClock, tasks: list[TaskHandle]
) -> JobScheduler:
    return job_scheduler(
        driver=driver,
        state=postgres_scheduler_state(pool, clock=clock),
        leader=postgres_lease_leader(executor=pool, holder="node", clock=clock),
        tasks=tasks,
        clock=clock,
    )


async def default_queue(driver: JobDriver) -> tuple[int, int]:
    """(ready, done) on the default queue."""
    stats = (await driver.stats()).queues.get("default")
    return (0, 0) if stats is None else (stats.ready, stats.done)


async def pg_rows(pool: Pool, table: str) -> list[tuple[Any, ...]]:
    if table == "x_task_fires":
        return [tuple(r) for r in await pool.fetch("select task, occurrence_ms from x_task_fires")]
    return [tuple(r) for r in await pool.fetch("select id from x_jobs")]


# -- through a driver that is not Postgres -------------------------------------------------------


async def test_on_the_redis_driver_the_jobs_go_to_redis_and_the_watermark_to_postgres(
    pg_pool: Pool, clock: FrozenClock, redis: RedisDriver, hourly: TaskHandle
) -> None:
    sched = scheduler(redis, pg_pool, clock, [hourly])
    assert (await sched.run_once()).armed == ["hourly"]
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    assert occurrences_of((await sched.run_once()).fired) == [thirteen]
    [job] = await redis.claim(ClaimOptions(queues=("default",), limit=10, worker_id="w"))
    assert (job.id, job.run_id) == occurrence_ids("hourly", thirteen, 0, "tick")
    assert job.input == {"occurrence_ms": thirteen}
    assert await pg_rows(pg_pool, "x_jobs") == []  # nothing where no worker claims it
    assert await postgres_scheduler_state(pg_pool).load() == {"hourly": thirteen}
    # Redis has no operator surface: the fire is recorded beside the watermark.
    assert await pg_rows(pg_pool, "x_task_fires") == [("hourly", thirteen)]


async def test_a_crash_between_the_enqueue_and_the_watermark_still_makes_one_job(
    pg_pool: Pool, clock: FrozenClock, redis: RedisDriver, hourly: TaskHandle
) -> None:
    first = scheduler(redis, pg_pool, clock, [hourly])
    assert (await first.run_once()).armed == ["hourly"]
    await pg_pool.execute(FAIL_NEXT_WATERMARK_WRITE)
    thirteen, fourteen = hours_from(T0, 2)
    clock.set(thirteen)
    assert (await first.run_once()).failed == ["hourly"]
    assert await default_queue(redis) == (1, 0)  # enqueued; the watermark did not move
    assert await postgres_scheduler_state(pg_pool).load() == {"hourly": T0}
    # The job runs to the end before anyone fires again, so no LIVE row holds its key: only
    # its id can keep a second one out.
    [job] = await redis.claim(ClaimOptions(queues=("default",), limit=10, worker_id="w"))
    assert await redis.ack(job.id, job.ref)
    # The process that died is replaced; the replacement reads the old watermark and fires the
    # same occurrence again.
    clock.advance(FIRE_RETRY_MS)
    second = scheduler(redis, pg_pool, clock, [hourly])
    assert occurrences_of((await second.run_once()).fired) == [thirteen]
    assert await default_queue(redis) == (0, 1)
    assert await postgres_scheduler_state(pg_pool).load() == {"hourly": thirteen}
    clock.set(fourteen)
    assert occurrences_of((await second.run_once()).fired) == [fourteen]
    assert await default_queue(redis) == (1, 1)


async def test_schedulers_racing_through_redis_make_one_job_per_occurrence(
    pg_pool: Pool, pg_dsn: str, clock: FrozenClock, redis: RedisDriver, hourly: TaskHandle
) -> None:
    """Each racer on its own pool; both pass the watermark check often enough to matter."""
    other = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    assert other is not None
    try:
        states = [postgres_scheduler_state(p, clock=clock) for p in (pg_pool, other)]
        await states[0].advance("hourly", T0)
        occurrences = hours_from(T0, 10)
        for occurrence in occurrences:
            results = await asyncio.gather(
                *(
                    s.fire("hourly", occurrence, hourly.requests_for(occurrence), driver=redis)
                    for s in states
                )
            )
            assert sorted(results) == [False, True]
        assert await default_queue(redis) == (len(occurrences), 0)
        assert await states[0].load() == {"hourly": occurrences[-1]}
    finally:
        await other.close()


async def test_a_driver_with_an_operator_surface_records_the_fire_itself(
    pg_pool: Pool, clock: FrozenClock, hourly: TaskHandle
) -> None:
    memory = memory_driver(clock=clock)
    sched = scheduler(memory, pg_pool, clock, [hourly])
    await sched.run_once()
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    assert occurrences_of((await sched.run_once()).fired) == [thirteen]
    assert await default_queue(memory) == (1, 0)
    introspect = memory.introspect
    assert introspect is not None
    fires = await introspect.task_fires()
    assert [(f.task, f.occurrence_ms) for f in fires] == [("hourly", thirteen)]
    assert await pg_rows(pg_pool, "x_task_fires") == []
    assert await pg_rows(pg_pool, "x_jobs") == []


async def test_the_postgres_driver_on_the_states_pool_fires_in_one_statement_with_the_same_ids(
    pg_pool: Pool, clock: FrozenClock, hourly: TaskHandle
) -> None:
    driver = announcing(postgres_driver(pg_pool, clock=clock))
    state = postgres_scheduler_state(pg_pool, clock=clock)
    assert state.fires_in_one_statement(driver)
    assert not state.fires_in_one_statement(memory_driver(clock=clock))
    sched = scheduler(driver, pg_pool, clock, [hourly])
    await sched.run_once()
    (thirteen,) = hours_from(T0, 1)
    clock.set(thirteen)
    assert occurrences_of((await sched.run_once()).fired) == [thirteen]
    assert await pg_rows(pg_pool, "x_jobs") == [(occurrence_ids("hourly", thirteen, 0, "tick")[0],)]
    assert await pg_rows(pg_pool, "x_task_fires") == [("hourly", thirteen)]


# -- the wake ------------------------------------------------------------------------------------


async def test_a_one_statement_fire_starts_an_idle_worker_of_this_process_at_once(
    pg_pool: Pool,
) -> None:
    """The worker polls once a minute and listens to no channel: only the fire's in-process
    signal can start the job within the wait."""
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(run.input.n)

    handle = declare(body, queue="emails")
    driver = postgres_driver(pg_pool)
    worker = job_worker(
        driver=driver,
        context=None,
        registry=registry_of(handle),
        queues=["emails"],
        poll_interval_ms=MINUTE_MS,
        idle_poll_max_ms=MINUTE_MS,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )
    await worker.start()
    try:
        await worker.signals.wait("waiting", timeout_s=WAIT_S)
        state = postgres_scheduler_state(pg_pool)
        now = driver.clock.now_ms()
        assert await state.fire("mail", now, [handle.request({"n": 7})], driver=driver)
        await worker.signals.wait("settled", timeout_s=WAIT_S)
        assert ran == [7]
    finally:
        await worker.stop()


async def test_a_one_statement_fire_publishes_each_queue_it_filled_on_the_redis_wake(
    pg_pool: Pool, redis_url: str, redis_prefix: str
) -> None:
    channel = f"{redis_prefix}:wake"
    wake = redis_wake(redis_url, channel)
    heard = Heard()
    unsubscribe = wake.subscribe(heard)
    await wake.start()
    announcer = redis_announcer(redis_url, channel)
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        driver = announcing(postgres_driver(pg_pool), announcer)
        state = postgres_scheduler_state(pg_pool)
        handle = declare(lambda run: None, queue="emails")
        other = declare(lambda run: None, name="other", queue="reports")
        now = driver.clock.now_ms()
        later = now + MINUTE_MS
        requests = [
            handle.request({"n": 1}),
            other.request({"n": 2}, run_at_ms=later),  # not due: nobody is woken for it
        ]
        assert await state.fire("mail", now, requests, driver=driver)
        await heard.until("emails")
        await announcer.flush()
        assert "reports" not in heard.payloads
    finally:
        unsubscribe()
        await announcer.close()
        await wake.stop()
