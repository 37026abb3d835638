"""Events cross processes: a ``ujobs worker`` waiting in ``step.wait_for_event`` resumes when a
job in ANOTHER ``ujobs worker`` process publishes (both on the Postgres event bus the services
install), and a wait nobody answers still times out on the bus clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.operator_surface import JobRow
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver

pytestmark = pytest.mark.slow


@pytest.fixture
async def workers(pg_dsn: str) -> AsyncIterator[tuple[ServiceProcess, ServiceProcess]]:
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="tests.e2e.events_app:api")
    waiter = await ServiceProcess.start("worker", "--queues", "default", env=env)
    publisher = await ServiceProcess.start("worker", "--queues", "signals", env=env)
    try:
        await waiter.log_event("ujobs.service.started")
        await publisher.log_event("ujobs.service.started")
        yield waiter, publisher
        for process in (waiter, publisher):
            process.terminate()
        assert [await p.exit_code(15) for p in (waiter, publisher)] == [0, 0]
    finally:
        await waiter.kill()
        await publisher.kill()


async def _until(driver: PostgresDriver, job_id: str, *states: str) -> JobRow:
    async with asyncio.timeout(30):
        while True:
            row = await driver.introspect.get(job_id)
            if row is not None and row.state in states:
                return row
            await asyncio.sleep(0.05)


def _wait(order: str, timeout_ms: int) -> EnqueueRequest:
    return EnqueueRequest(
        name="await_approval",
        input={"order": order, "timeout_ms": timeout_ms},
        idempotency_key=f"await:{order}",
        max_attempts=1,
    )


async def test_a_publish_in_one_process_resumes_a_wait_in_another(
    workers: tuple[ServiceProcess, ServiceProcess], pg_pool: asyncpg.Pool[Any]
) -> None:
    driver = postgres_driver(pg_pool)
    waiting = await driver.enqueue(_wait("o-1", 60_000))
    await _until(driver, waiting.id, "suspended")  # parked in its wait, in the waiter process
    await driver.enqueue(
        EnqueueRequest(
            name="approve",
            input={"order": "o-1", "by": "ops"},
            idempotency_key="approve:o-1",
            queue="signals",
        )
    )
    row = await _until(driver, waiting.id, "done", "dead", "failed")
    assert row.state == "done", row.last_error
    stored = await driver.load_steps(waiting.run_id, tenant_id=row.tenant_id)
    steps = {s.name: s.output for s in stored}
    assert steps["approval"] == {"order": "o-1", "by": "ops"}


async def test_a_wait_nobody_answers_still_times_out(
    workers: tuple[ServiceProcess, ServiceProcess], pg_pool: asyncpg.Pool[Any]
) -> None:
    driver = postgres_driver(pg_pool)
    waiting = await driver.enqueue(_wait("o-2", 600))
    row = await _until(driver, waiting.id, "done", "dead", "failed")
    assert row.state == "dead"
    assert row.last_error is not None
    assert "X_JOB_TIMEOUT" in row.last_error
