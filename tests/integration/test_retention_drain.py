"""A sweep under a concurrent drain: a worker settles a queue while ``x.purge``'s jobs target
deletes expired history beside it. Every job runs once and settles, the sweep never deletes a
row the drain just finished (it is inside its window) and never waits on one it holds."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from ujobs import job, t
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.execution.run import Run
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.retention import jobs_purge_target
from ujobs.worker import job_worker

JOBS = 300
HISTORY = 6_000


async def test_a_sweep_beside_a_drain_deletes_only_history_and_stalls_no_claim(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    # Expired history: done 30 days ago, each with a step.
    await pg_pool.execute(
        "insert into x_jobs (id, run_id, name, state, input, idempotency_key, max_attempts,"
        " run_at, created_at, updated_at, finished_at)"
        " select 'old-' || n, 'old-' || n, 'old', 'done', '{}', 'old-' || n, 1, now(), now(),"
        " now(), now() - interval '30 days' from generate_series(1, $1::int) n",
        HISTORY,
    )
    await pg_pool.execute(
        "insert into x_job_steps (run_id, tenant_id, name, started_at, finished_at)"
        " select 'old-' || n, '', 's', now(), now() from generate_series(1, $1::int) n",
        HISTORY,
    )
    ran: list[int] = []

    async def work(run: Run[Any]) -> None:
        await run.step.run("write", lambda _signal: run.input.n)
        ran.append(run.input.n)

    handle = job(
        name="drained",
        run=work,
        input=t.object(n=t.number.int()),
        idempotency_key=lambda i: str(i.n),
        tenant="none",
    )
    driver = postgres_driver(pg_pool)
    await driver.enqueue_many(handle.request({"n": n}) for n in range(JOBS))
    registry = Registry()
    registry.register_job(handle)
    worker = job_worker(
        driver=driver,
        context=None,
        registry=registry,
        queues=["default"],
        concurrency=8,
        poll_interval_ms=50,
        idle_poll_max_ms=50,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )
    target = jobs_purge_target(executor=pg_pool, batch_size=200, max_batches=5)
    removed = 0
    drained = asyncio.Event()

    async def sweep() -> None:
        nonlocal removed
        while not drained.is_set():
            removed += await target.purge_expired(driver.clock.now_ms())
            await asyncio.sleep(0)

    sweeping = asyncio.ensure_future(sweep())
    await worker.start()
    try:
        async with asyncio.timeout(120):
            while len(ran) < JOBS:
                await asyncio.sleep(0.02)
            while await pg_pool.fetchval("select count(*) from x_jobs where name = 'old'"):
                await asyncio.sleep(0.02)
    finally:
        drained.set()
        await sweeping
        await worker.stop()
    assert sorted(ran) == list(range(JOBS))  # each ran once
    states = await pg_pool.fetch("select state, count(*) as n from x_jobs group by state")
    assert {r["state"]: r["n"] for r in states} == {"done": JOBS}
    assert await pg_pool.fetchval("select count(*) from x_job_steps") == JOBS
    assert removed == 2 * HISTORY
