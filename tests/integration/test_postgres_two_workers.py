"""Two real worker processes drain one queue of 10,000 jobs: every job completes exactly once
and no row is ever held by two claimers (counted in the rows, not inferred)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver

SCRIPT = Path(__file__).with_name("pg_drain_process.py")
JOBS = 10_000


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_two_processes_complete_every_job_exactly_once(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    await pg_pool.execute(
        """create table drain_runs (job_id text not null, claim int not null,
                                    worker_id text not null, primary key (job_id, claim))"""
    )
    driver = postgres_driver(pg_pool)
    for lo in range(0, JOBS, 1_000):
        await driver.enqueue_many(
            [
                EnqueueRequest(name="n", input={"i": i}, idempotency_key=f"k{i}", queue="drain")
                for i in range(lo, lo + 1_000)
            ]
        )
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, str(SCRIPT), pg_dsn, f"worker-{n}")
        for n in range(2)
    ]
    codes = await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), timeout=240)
    assert codes == [0, 0]
    row = await pg_pool.fetchrow(
        """select count(*) as runs, count(distinct job_id) as jobs,
                  count(distinct worker_id) as workers from drain_runs"""
    )
    assert row is not None
    assert (row["runs"], row["jobs"], row["workers"]) == (JOBS, JOBS, 2)
    jobs = await pg_pool.fetchrow(
        """select count(*) filter (where state = 'done') as done,
                  count(*) filter (where claim <> 1 or attempt <> 1) as reclaimed,
                  count(*) as total from x_jobs"""
    )
    assert jobs is not None
    assert (jobs["done"], jobs["reclaimed"], jobs["total"]) == (JOBS, 0, JOBS)
    assert (
        await pg_pool.fetchval(
            """select count(*) from drain_runs r join x_jobs j on j.id = r.job_id
            where j.claimed_by <> r.worker_id"""
        )
        == 0
    )
    [totals] = await driver.introspect.counter_totals(0)
    assert totals.done == JOBS
