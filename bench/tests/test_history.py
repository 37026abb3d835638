"""The throughput bench's history (``bench/bench_history.py``, ``BENCH_UJOBS_HISTORY``): finished
rows with valid, unique, older ids and keys, which the claim never hands out and which leave
an enqueue of the same job alone."""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg

from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.ids import new_id

BENCH = Path(__file__).resolve().parents[1]


def bench_history() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("bench_history")


async def test_history_rows_are_finished_valid_unique_and_older(pg_pool: asyncpg.Pool[Any]) -> None:
    adapter = bench_history()
    async with pg_pool.acquire() as conn:
        await adapter.insert_history(conn, 1_000, name="bench-noop", queue="bench")
        states = dict(await conn.fetch("select state, count(*) from x_jobs group by state"))
        rows = await conn.fetch(
            "select id, run_id, name, queue, idempotency_key, attempt, max_attempts,"
            " created_at, finished_at, finished_at < now() - interval '59 minutes' as old"
            " from x_jobs"
        )
    assert states == {"done": 980, "dead": 10, "failed": 10}
    ids = [r["id"] for r in rows]
    assert all(str(uuid.UUID(i)) == i and uuid.UUID(i).version == 7 for i in ids)
    assert all(str(uuid.UUID(r["run_id"])) == r["run_id"] for r in rows)
    assert len(set(ids)) == len({r["run_id"] for r in rows}) == 1_000
    assert len({r["idempotency_key"] for r in rows}) == 1_000
    assert max(ids) < new_id()  # left of every id minted now, as history is in a live table
    assert all(r["name"] == "bench-noop" and r["queue"] == "bench" for r in rows)
    assert all(r["old"] and r["created_at"] < r["finished_at"] for r in rows)
    assert all(1 <= r["attempt"] <= r["max_attempts"] for r in rows)


async def test_the_claim_takes_only_the_new_job_over_the_history(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    adapter = bench_history()
    async with pg_pool.acquire() as conn:
        await adapter.insert_history(conn, 500, name="bench-noop", queue="bench")
        key = await conn.fetchval("select idempotency_key from x_jobs limit 1")
    driver = postgres_driver(pg_pool)
    # A finished row's key is free again: the enqueue under it makes a new job.
    enqueued = await driver.enqueue(
        EnqueueRequest(
            name="bench-noop", input={"seq": 1, "ts": 0.0}, idempotency_key=key, queue="bench"
        )
    )
    assert not enqueued.deduped
    claimed = await driver.claim(ClaimOptions(queues=["bench"], limit=16, worker_id="w"))
    assert [j.id for j in claimed] == [enqueued.id]
