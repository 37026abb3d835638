"""A deployment with no app code keeps every table bounded: ``ujobs scheduler`` fires the
built-in ``x.purge`` on ``UJOBS_PURGE_CRON`` and ``ujobs worker`` sweeps, so rows past their
windows go and nothing else does."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env

pytestmark = pytest.mark.slow

WAIT_S = 60.0

_JOB = (
    "insert into x_jobs (id, run_id, name, queue, state, input, idempotency_key, max_attempts,"
    " run_at, created_at, updated_at, finished_at) values ($1, $1, 'j', 'elsewhere', $2, '{}', $1,"
    " 1, now(), now() - $3::text::interval, now(), case when $2 in ('done', 'dead', 'failed',"
    " 'cancelled') then now() - $3::text::interval end)"
)
_STEP = (
    "insert into x_job_steps (run_id, name, started_at, finished_at) values ($1, 's', now(), now())"
)
_OUTBOX = (
    "insert into x_outbox (id, run_id, name, queue, input, idempotency_key, max_attempts,"
    " staged_at, published_at) values ($1, $1, 'j', 'elsewhere', '{}', $1, 1,"
    " now() - interval '30 days', now() - $2::text::interval)"
)


async def seed(pool: asyncpg.Pool[Any]) -> None:
    for job_id, state, age in (
        ("done-15d", "done", "15 days"),
        ("done-1d", "done", "1 day"),
        ("dead-91d", "dead", "91 days"),
        ("failed-89d", "failed", "89 days"),
        ("cancelled-91d", "cancelled", "91 days"),
        ("ready-200d", "ready", "200 days"),
    ):
        await pool.execute(_JOB, job_id, state, age)
        await pool.execute(_STEP, job_id)
    await pool.execute(_OUTBOX, "published-8d", "8 days")
    await pool.execute(_OUTBOX, "published-6d", "6 days")
    await pool.execute(
        "insert into x_outbox (id, run_id, name, queue, input, idempotency_key, max_attempts,"
        " staged_at) values ('unpublished', 'u', 'j', 'elsewhere', '{}', 'u', 1,"
        " now() - interval '300 days')"
    )
    await pool.execute(
        "insert into x_job_events (id, name, payload, published_at, expires_at) values"
        " ('expired', 'e', '{}', now() - interval '9 days', now() - interval '2 days'),"
        " ('live', 'e', '{}', now(), now() + interval '7 days')"
    )
    await pool.execute(
        "insert into x_job_leases (key, slot, holder, acquired_at, expires_at) values"
        " ('job:j', 0, 'gone', now() - interval '1 hour', now() - interval '59 minutes')"
    )


async def ids(pool: asyncpg.Pool[Any], table: str) -> list[str]:
    statements = {
        "x_jobs": "select id from x_jobs where name = 'j' order by id",
        "x_job_steps": "select run_id as id from x_job_steps where name = 's' order by run_id",
        "x_outbox": "select id from x_outbox order by id",
        "x_job_events": "select id from x_job_events order by id",
        "x_job_leases": "select holder as id from x_job_leases where key = 'job:j'",
    }
    return [r["id"] for r in await pool.fetch(statements[table])]


async def test_the_services_alone_leave_nothing_expired(
    pg_pool: asyncpg.Pool[Any], pg_dsn: str
) -> None:
    await seed(pg_pool)
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_PURGE_CRON="* * * * * */2")
    services = [
        await ServiceProcess.start("scheduler", env=env),
        await ServiceProcess.start("worker", env=env),
    ]
    try:
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while await pg_pool.fetchval("select count(*) from x_jobs where id = 'done-15d'"):
            assert asyncio.get_running_loop().time() < deadline, [s.logs for s in services]
            await asyncio.sleep(0.2)
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while await pg_pool.fetchval("select count(*) from x_job_events where id = 'expired'"):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.2)
        assert await ids(pg_pool, "x_jobs") == ["done-1d", "failed-89d", "ready-200d"]
        assert await ids(pg_pool, "x_job_steps") == ["done-1d", "failed-89d", "ready-200d"]
        assert await ids(pg_pool, "x_outbox") == ["published-6d", "unpublished"]
        assert await ids(pg_pool, "x_job_events") == ["live"]
        assert await ids(pg_pool, "x_job_leases") == []
        swept = await pg_pool.fetchval(
            "select count(*) from x_jobs where name = 'x.purge' and state = 'done'"
        )
        assert swept >= 1
    finally:
        for service in services:
            service.terminate()
        codes = [await service.exit_code(30) for service in services]
    assert codes == [0, 0]
