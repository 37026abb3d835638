"""The "Controlling when jobs run" page's snooze example, as pasted, under a real ``ujobs
worker``: the partner answers "pending" once, the run snoozes (no attempt spent, no error) and
completes on its next claim; the worker's /metrics counts the snooze."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from tests.support.docs import marked_block, page
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver

pytestmark = pytest.mark.slow


async def test_the_snooze_example_runs_as_pasted_under_ujobs_worker(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    code = marked_block(page("guides/controlling-jobs.md"), "snooze")
    assert code.splitlines()[0] == "# app/partner.py"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "partner.py").write_text(code)
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="app.partner:api")
    worker = await ServiceProcess.start("worker", env=env, cwd=tmp_path)
    driver = postgres_driver(pg_pool)
    try:
        listening = await worker.log_event("ujobs.metrics.listening")
        await worker.log_event("ujobs.service.started")
        queued = await driver.enqueue(
            EnqueueRequest(
                name="fetch_report", input={"order": "o-7"}, idempotency_key="fetch-report:o-7"
            )
        )
        snoozed = await worker.log_event("jobs.attempt.snoozed")
        async with asyncio.timeout(30):
            while (row := await driver.introspect.get(queued.id)) is None or row.state != "done":
                await asyncio.sleep(0.05)
        address = listening["addresses"][0]
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://{address}/metrics") as answer,
        ):
            scraped = await answer.text()
        worker.terminate()
        assert await worker.exit_code(15) == 0
    finally:
        await worker.kill()
    assert (snoozed["snoozes"], snoozed["retry_in_ms"], snoozed["attempt"]) == (1, 1000, 1)
    assert (row.attempt, row.last_error) == (1, None)
    assert 'jobs_snoozed_total{queue="default"} 1.0' in scraped
