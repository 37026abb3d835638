"""bench/commit_floor.py's round: the floor's INSERT, our enqueue statement and ``SELECT 1``
in turn, where our statement really queues a job each call (a figure for a statement that
deduped, or failed, would flatter the ceiling it reports)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg
import pytest

from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.sql import query

BENCH = Path(__file__).resolve().parents[1]


def commit_floor() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("commit_floor")


async def test_each_call_of_the_enqueue_statement_queues_one_claimable_job(
    pg_pool: asyncpg.Pool[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = commit_floor()
    monkeypatch.setattr(bench, "CALLS", 25)
    async with pg_pool.acquire() as conn:
        await conn.execute("create temp table floor_rows (id bigserial primary key, v text)")
        figures = await bench.one_round(
            conn, "insert into floor_rows (v) values ($1)", query("enqueue_insert"), 0
        )
        floor_rows = await conn.fetchval("select count(*) from floor_rows")
    assert floor_rows == 25
    assert all(us > 0 for us in figures)
    rows = await pg_pool.fetch("select state, idempotency_key from x_jobs order by seq")
    assert [r["state"] for r in rows] == ["ready"] * 25
    assert len({r["idempotency_key"] for r in rows}) == 25
    driver = postgres_driver(pg_pool)
    claimed = await driver.claim(
        ClaimOptions(queues=["default"], limit=100, worker_id="w", visibility_ms=30_000)
    )
    await driver.close()
    assert len(claimed) == 25
    assert {c.name for c in claimed} == {"bench.noop"}
