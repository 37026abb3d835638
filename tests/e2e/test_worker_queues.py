"""``ujobs worker`` given no queues (no ``--queues``, ``UJOBS_QUEUES`` unset or empty, as
compose passes it) serves every queue the app's jobs name, as ``ujobs dev`` does; a named
queue list still serves only those."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver

pytestmark = pytest.mark.slow


def _request(name: str, queue: str, n: int) -> EnqueueRequest:
    key = "mail" if name == "send_mail" else "report"
    return EnqueueRequest(name=name, input={"n": n}, idempotency_key=f"{key}:{n}", queue=queue)


@pytest.mark.parametrize("queues", [None, ""])
async def test_a_worker_given_no_queues_serves_every_queue_the_app_names(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], queues: str | None
) -> None:
    extra = {} if queues is None else {"UJOBS_QUEUES": queues}
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="tests.e2e.queues_app:api", **extra)
    driver = postgres_driver(pg_pool)
    worker = await ServiceProcess.start("worker", env=env)
    try:
        started = await worker.log_event("ujobs.service.started")
        assert started["gc_threshold"] == 10_000  # UJOBS_GC_THRESHOLD's default, in force
        assert started["event_loop"] == "uvloop"  # UJOBS_EVENT_LOOP's default where installed
        mail = await driver.enqueue(_request("send_mail", "mail", 1))
        report = await driver.enqueue(_request("build_report", "reports", 1))
        async with asyncio.timeout(30):
            for queued in (mail, report):
                while (
                    row := await driver.introspect.get(queued.id)
                ) is None or row.state != "done":
                    await asyncio.sleep(0.05)
        worker.terminate()
        assert await worker.exit_code(15) == 0
    finally:
        await worker.kill()


async def test_named_queues_are_the_only_ones_served(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    env = service_env(
        DATABASE_URL=pg_dsn,
        UJOBS_APP="tests.e2e.queues_app:api",
        UJOBS_QUEUES="mail",
        UJOBS_EVENT_LOOP="asyncio",
    )
    driver = postgres_driver(pg_pool)
    worker = await ServiceProcess.start("worker", env=env)
    try:
        started = await worker.log_event("ujobs.service.started")
        assert started["event_loop"] == "asyncio"  # the standard loop, asked for: same service
        report = await driver.enqueue(_request("build_report", "reports", 2))
        mail = await driver.enqueue(_request("send_mail", "mail", 2))
        async with asyncio.timeout(30):
            while (row := await driver.introspect.get(mail.id)) is None or row.state != "done":
                await asyncio.sleep(0.05)
        worker.terminate()
        assert await worker.exit_code(15) == 0
    finally:
        await worker.kill()
    row = await driver.introspect.get(report.id)
    assert row is not None
    assert row.state == "ready"
