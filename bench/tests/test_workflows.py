"""bench/workflows.py, small and untimed: the fan-out gathers every child it made (one step
for the batch), the batch drains every job, and each result wait over HTTP answers the job's
own result after its settle."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg

from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.wake.announce import announcing

BENCH = Path(__file__).resolve().parents[1]


def workflows() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("workflows")


async def test_the_fanout_and_the_batch_both_finish_every_job(pg_pool: asyncpg.Pool[Any]) -> None:
    driver = postgres_driver(pg_pool)
    try:
        figures = await workflows().fanout_vs_batch(announcing(driver), 40, rounds=1)
    finally:
        await driver.close()
    assert figures["jobs"] == 40
    assert figures["fanout_jobs_per_s"] > 0
    assert figures["batch_jobs_per_s"] > 0
    states = await pg_pool.fetch("select name, state, count(*) from x_jobs group by 1, 2")
    warm = workflows().WARM_UP  # each path's unmeasured first round
    assert {(r["name"], r["state"]): r["count"] for r in states} == {
        ("bench.wf.noop", "done"): (40 + warm) * 3,
        ("bench.wf.fanout", "done"): 2,
        ("bench.wf.fanout_each", "done"): 2,
    }
    steps = await pg_pool.fetch("select name from x_job_steps where name like 'enqueue_many:%'")
    assert [r["name"] for r in steps] == ["enqueue_many:bench.wf.noop#1"] * 2


async def test_each_result_wait_answers_its_jobs_result(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    bench = workflows()
    api_process = importlib.import_module("api_process")
    driver = postgres_driver(pg_pool)
    proc, url = api_process.start_api(pg_dsn, UJOBS_APP="workflows_app:api")
    try:
        figures = await bench.result_waits(pg_pool, driver, url, await bench.mint(pg_pool), 12)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        await driver.close()
    assert figures["waits"] == 12
    assert figures["result_wait_p50_ms"] >= 0  # answered after the settle it reports
    assert figures["pickup_p50_ms"] >= 0  # the body started after the enqueue returned
    states = await pg_pool.fetch("select name, state, count(*) from x_jobs group by 1, 2")
    assert {(r["name"], r["state"]): r["count"] for r in states} == {
        ("bench.wf.stamped", "done"): 12
    }
