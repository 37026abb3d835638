"""A backfill pass in a real worker process, SIGKILLed mid-page: the next worker resumes it on
the page it stopped at, and no row is handled twice beyond the spec's promise (``handle`` runs
at least once per page: only the interrupted page runs again)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 30.0
POSTS = 45  # pages of 10: 1-10, 11-20, 21-30, 31-40, 41-45


async def spawn(dsn: str, *args: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.e2e.backfill_main", dsn, *args,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await until(proc, "ready")
    return proc


async def until(proc: asyncio.subprocess.Process, event: str) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), WAIT_S)
        if not raw:
            assert proc.stderr is not None
            raise AssertionError(f"the worker exited: {(await proc.stderr.read()).decode()}")
        line: dict[str, Any] = orjson.loads(raw)
        if line["event"] == event:
            return line


async def poll(pool: asyncpg.Pool[Any], statement: str, *args: Any, want: Any) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while (got := await pool.fetchval(statement, *args)) != want:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{statement!r} answered {got!r}, never {want!r}")
        await asyncio.sleep(0.05)


async def test_a_pass_sigkilled_mid_page_resumes_on_that_page(
    pg_pool: asyncpg.Pool[Any], pg_dsn: str
) -> None:
    await pg_pool.execute(
        "create table bf_posts (id int primary key, slug text);"
        "create table bf_touches (n bigserial primary key, post_id int not null)"
    )
    try:
        await pg_pool.execute("insert into bf_posts (id) select generate_series(1, $1::int)", POSTS)
        driver = postgres_driver(pg_pool)
        request = EnqueueRequest(name="slugs", input={}, idempotency_key="slugs")
        job = await driver.enqueue(request)

        first = await spawn(pg_dsn, "--hang-at", "20")
        await until(first, "hanging")  # pages 1-10 and 11-20 checkpointed; 21-30 touched
        row = await pg_pool.fetchrow(
            "select status, rows_processed, last_cursor::text as cursor from x_backfills"
        )
        assert row is not None
        # The row is a report, written at most once a second: page 1's count at least.
        assert row["status"] == "running"
        assert (row["rows_processed"], row["cursor"]) in ((10, "10"), (20, "20"))
        first.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(first.wait(), WAIT_S) == -signal.SIGKILL

        second = await spawn(pg_dsn)
        try:
            await poll(pg_pool, "select state from x_jobs where id = $1", job.id, want="done")
        finally:
            second.send_signal(signal.SIGTERM)
            await asyncio.wait_for(second.wait(), WAIT_S)

        touches = {
            r["post_id"]: r["n"]
            for r in await pg_pool.fetch(
                "select post_id, count(*) as n from bf_touches group by post_id"
            )
        }
        assert sorted(touches) == list(range(1, POSTS + 1))  # every row at least once
        twice = sorted(post for post, n in touches.items() if n > 1)
        assert twice == list(range(21, 31))  # only the page the kill interrupted, once more
        assert max(touches.values()) == 2
        assert await pg_pool.fetchval("select count(*) from bf_posts where slug is null") == 0
        done = await pg_pool.fetchrow(
            "select run_id, status, rows_processed, started_at <= completed_at as ordered"
            " from x_backfills"
        )
        assert done is not None
        assert (done["run_id"], done["status"], done["rows_processed"]) == (
            job.run_id,
            "completed",
            POSTS,
        )
        steps = await pg_pool.fetch(
            "select name from x_job_steps where run_id = $1 order by seq", job.run_id
        )
        assert [s["name"] for s in steps] == [f"batch:{n}" for n in range(5)]
    finally:
        await pg_pool.execute("drop table if exists bf_posts; drop table if exists bf_touches")


async def test_a_pass_drained_in_its_throttle_pause_is_handed_back_running(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    """A deploy's SIGTERM while the pass waits out its rate: the attempt is handed back
    uncounted and the ledger row stays ``running`` (not ``failed``, which ``--pending`` would
    report after every deploy); the next worker resumes the pass and completes the row."""
    await pg_pool.execute(
        "create table bf_posts (id int primary key, slug text);"
        "create table bf_touches (n bigserial primary key, post_id int not null)"
    )
    try:
        await pg_pool.execute("insert into bf_posts (id) select generate_series(1, $1::int)", 15)
        job = await postgres_driver(pg_pool).enqueue(
            EnqueueRequest(name="slugs", input={}, idempotency_key="slugs")
        )
        paced = await spawn(pg_dsn, "--rate", "0.01")  # 100 s between batch starts
        # Page 1 handled and reported: the next thing the pass does is the 100 s pause.
        await poll(pg_pool, "select rows_processed from x_backfills", want=10)
        paced.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(paced.wait(), WAIT_S) == 0  # drained, nothing abandoned
        row = await pg_pool.fetchrow("select status, error from x_backfills")
        assert row is not None
        assert (row["status"], row["error"]) == ("running", None)
        queued = await pg_pool.fetchrow("select state, attempt from x_jobs where id = $1", job.id)
        assert queued is not None
        assert (queued["state"], queued["attempt"]) == ("ready", 0)  # handed back uncounted

        resumed = await spawn(pg_dsn)
        try:
            await poll(pg_pool, "select state from x_jobs where id = $1", job.id, want="done")
        finally:
            resumed.send_signal(signal.SIGTERM)
            await asyncio.wait_for(resumed.wait(), WAIT_S)
        done = await pg_pool.fetchrow("select status, rows_processed from x_backfills")
        assert done is not None
        assert (done["status"], done["rows_processed"]) == ("completed", 15)
    finally:
        await pg_pool.execute("drop table if exists bf_posts; drop table if exists bf_touches")
