"""``define_api(context=)`` under real ``ujobs worker`` processes: the factory is entered once
at start, every run gets what it yielded as ``run.ctx``, and it is exited after the drain; a
factory that raises stops the service at start with ``X_APP_CONTEXT_FAILED``. The jobs page's
``context=`` example runs as pasted."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.e2e.context_app import CTX_LOG, QUEUE
from tests.e2e.service_process import ServiceProcess, service_env
from tests.support.cli import ujobs_process
from tests.support.docs import marked_block, page
from tests.support.scratch import scratch_table
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres import PostgresDriver, postgres_driver

pytestmark = pytest.mark.slow


async def all_done(driver: PostgresDriver, ids: list[str], timeout_s: float = 60) -> None:
    async with asyncio.timeout(timeout_s):
        while True:
            rows = [await driver.introspect.get(job_id) for job_id in ids]
            if all(row is not None and row.state == "done" for row in rows):
                return
            dead = [row.last_error for row in rows if row is not None and row.state == "dead"]
            assert not dead, dead
            await asyncio.sleep(0.1)


SERVICES = {
    "worker": (QUEUE, {"UJOBS_QUEUES": QUEUE}),
    "exporter": ("exports", {}),
    "webhook-deliverer": ("webhooks", {"UJOBS_SECRET_KEY": base64.b64encode(bytes(32)).decode()}),
    "dev": (QUEUE, {"UJOBS_API_PORT": "0"}),
}


@pytest.mark.parametrize("service", list(SERVICES))
async def test_the_context_is_entered_once_handed_to_every_run_and_closed_after_the_drain(
    service: str, pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    queue, extra = SERVICES[service]
    async with scratch_table(pg_pool, "ctx_log", CTX_LOG):
        await run_three(service, queue, extra, pg_dsn, pg_pool, tmp_path)


async def run_three(
    service: str,
    queue: str,
    extra: dict[str, str],
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    tmp_path: Path,
) -> None:
    driver = postgres_driver(pg_pool)
    queued = [
        await driver.enqueue(
            EnqueueRequest(
                name=f"uses_ctx.{queue}", input={"n": n}, idempotency_key=f"ctx:{n}", queue=queue
            )
        )
        for n in range(3)
    ]
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="tests.e2e.context_app:api", **extra)
    process = await ServiceProcess.start(service, env=env, cwd=tmp_path)
    try:
        await all_done(driver, [q.id for q in queued])
        process.terminate()
        assert await process.exit_code(60) == 0, process.logs
    finally:
        await process.kill()
    log = await pg_pool.fetch("select event, token from ctx_log order by seq")
    events = [r["event"] for r in log]
    assert events[0] == "opened"
    assert events[-1] == "closed"
    assert sorted(events[1:-1]) == ["ran:0", "ran:1", "ran:2"]
    assert len({r["token"] for r in log}) == 1  # one entry, seen by every run


def test_a_factory_that_raises_stops_the_service_at_start(pg_dsn: str) -> None:
    done = ujobs_process(
        "worker",
        env={
            "DATABASE_URL": pg_dsn,
            "UJOBS_APP": "tests.e2e.context_app:api",
            "UJOBS_QUEUES": QUEUE,
            "UJOBS_METRICS_PORT": "0",
            "CONTEXT_APP_FAIL": "1",
        },
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "X_APP_CONTEXT_FAILED" in done.stderr
    assert "the app's database refused the connection" in done.stderr
    assert "Traceback" not in done.stderr


async def test_the_jobs_pages_context_example_runs_as_pasted_under_ujobs_worker(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    code = marked_block(page("concepts/jobs.md"), "app-context")
    first_line = code.splitlines()[0]
    assert first_line == "# app/invoicing.py"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "invoicing.py").write_text(code)
    invoices = (
        "create table invoices (id int primary key, org_id text, closed boolean default false)"
    )
    async with scratch_table(pg_pool, "invoices", invoices):
        await close_acmes_invoices(pg_dsn, pg_pool, tmp_path)


async def close_acmes_invoices(pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path) -> None:
    await pg_pool.execute(
        "insert into invoices (id, org_id) values (1, 'acme'), (2, 'acme'), (3, 'globex')"
    )
    driver = postgres_driver(pg_pool)
    queued = await driver.enqueue(
        EnqueueRequest(
            name="close_invoices",
            input={"org_id": "acme"},
            idempotency_key="close-invoices:acme",
            tenant_id="acme",
        )
    )
    env = service_env(
        DATABASE_URL=pg_dsn, BILLING_DATABASE_URL=pg_dsn, UJOBS_APP="app.invoicing:api"
    )
    worker = await ServiceProcess.start("worker", env=env, cwd=tmp_path)
    try:
        await all_done(driver, [queued.id])
        worker.terminate()
        assert await worker.exit_code(30) == 0
    finally:
        await worker.kill()
    closed = await pg_pool.fetch("select id, closed from invoices order by id")
    assert [(r["id"], r["closed"]) for r in closed] == [(1, True), (2, True), (3, False)]
