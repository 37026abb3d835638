"""A deployment with no app code keeps every table bounded: ``ujobs scheduler`` fires the
built-in ``x.purge`` every minute (``UJOBS_PURGE_CRON``) and ``ujobs worker`` sweeps, so rows
past their windows go and nothing else does.

Time is frozen, not slept: the rows are written at instants of a ``FrozenClock`` that only
moves forward, then the two services start with their clock moved past the windows
(``UJOBS_CLOCK_OFFSET_MS``, the test-only shift a clock object cannot cross a process
boundary without), placed a few seconds before a minute so the first fire comes at once."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.clock import SYSTEM_CLOCK, FrozenClock

pytestmark = pytest.mark.slow

WAIT_S = 90.0
DAY = 86_400_000
MINUTE = 60_000
LEAD_MS = 15_000
"""The services start this long before a minute of their clock: time to boot and arm the
task, which fires at the minute (a task is armed at start, never fired for the past)."""

_JOB = (
    "insert into x_jobs (id, run_id, name, queue, state, input, idempotency_key, max_attempts,"
    " run_at, created_at, updated_at, finished_at) values ($1, $1, 'j', 'elsewhere', $2, '{}',"
    " $1, 1, x_ts($3), x_ts($3), x_ts($3), case when $2 in ('done', 'dead', 'failed',"
    " 'cancelled') then x_ts($3) end)"
)
_STEP = (
    "insert into x_job_steps (run_id, tenant_id, name, started_at, finished_at)"
    " values ($1, '', 's', x_ts($2), x_ts($2))"
)
_OUTBOX = (
    "insert into x_outbox (id, run_id, name, queue, input, idempotency_key, max_attempts,"
    " staged_at, published_at) values ($1, $1, 'j', 'elsewhere', '{}', $1, 1, x_ts($2),"
    " x_ts($3))"
)
_DELIVERY = (
    "insert into x_webhook_deliveries (endpoint_id, event_id, job_id, attempt, outcome,"
    " latency_ms, at) values ('ep', $1, $2, 1, 'failed', 1, x_ts($3))"
)
_EVENT = (
    "insert into x_webhook_events (id, tenant_id, topic, body, created_at)"
    " values ($1, 'org_1', 'orders.paid', '{}'::bytea, x_ts($2))"
)
_SETTLEMENT = (
    "insert into x_settlements (job_id, run_id, name, outcome, attempt, settled_at,"
    " published_at) values ($1, $1, 'j', 'completed', 1, x_ts($2), x_ts($3))"
)


async def seed(pool: asyncpg.Pool[Any], clock: FrozenClock) -> int:
    """The history, written as the frozen clock moves forward; answers the instant the
    services' clock starts from (every window is measured back from there)."""

    async def job(job_id: str, state: str) -> None:
        await pool.execute(_JOB, job_id, state, clock.now_ms())
        await pool.execute(_STEP, job_id, clock.now_ms())

    t0 = clock.now_ms()
    await job("dead-92d", "dead")
    await job("ready-92d", "ready")
    await pool.execute(
        "insert into x_outbox (id, run_id, name, queue, input, idempotency_key, max_attempts,"
        " staged_at) values ('unpublished', 'u', 'j', 'elsewhere', '{}', 'u', 1, x_ts($1))",
        t0,
    )
    await pool.execute(_SETTLEMENT, "pending", t0, None)
    await pool.execute(
        "insert into x_job_leases (key, slot, holder, acquired_at, expires_at) values"
        " ('job:j', 0, 'gone', x_ts($1), x_ts($1 + 3600000))",
        t0,
    )
    clock.advance(DAY)
    await job("cancelled-91d", "cancelled")
    clock.advance(2 * DAY)
    await job("failed-89d", "failed")
    clock.advance(58 * DAY)  # T0 + 61 days
    await pool.execute(_DELIVERY, "evt-young", "delivery-31d", clock.now_ms())
    await pool.execute(_EVENT, "evt-31d", clock.now_ms())
    await pool.execute(_EVENT, "evt-young", clock.now_ms())
    clock.advance(9 * DAY)  # T0 + 70 days
    await pool.execute(_DELIVERY, "evt-young", "delivery-22d", clock.now_ms())
    clock.advance(7 * DAY)  # T0 + 77 days
    await job("done-15d", "done")
    clock.advance(7 * DAY)  # T0 + 84 days
    await pool.execute(_OUTBOX, "published-8d", t0, clock.now_ms())
    clock.advance(2 * DAY)  # T0 + 86 days
    await pool.execute(_OUTBOX, "published-6d", t0, clock.now_ms())
    clock.advance(4 * DAY)  # T0 + 90 days
    await pool.execute(_SETTLEMENT, "settled-2d", t0, clock.now_ms())
    clock.advance(DAY)  # T0 + 91 days
    await job("done-1d", "done")
    clock.advance(DAY // 2)
    await pool.execute(_SETTLEMENT, "settled-12h", t0, clock.now_ms())
    # The bus measures expiry on the database's clock, which no offset moves.
    await pool.execute(
        "insert into x_job_events (id, name, payload, published_at, expires_at) values"
        " ('expired', 'e', '{}', now() - interval '9 days', now() - interval '2 days'),"
        " ('live', 'e', '{}', now(), now() + interval '7 days')"
    )
    return t0 + 92 * DAY


async def ids(pool: asyncpg.Pool[Any], table: str) -> list[str]:
    statements = {
        "x_jobs": "select id from x_jobs where name = 'j' order by id",
        "x_job_steps": "select run_id as id from x_job_steps where name = 's' order by run_id",
        "x_outbox": "select id from x_outbox order by id",
        "x_job_events": "select id from x_job_events order by id",
        "x_job_leases": "select holder as id from x_job_leases where key = 'job:j'",
        "x_webhook_deliveries": "select job_id as id from x_webhook_deliveries order by seq",
        "x_webhook_events": "select id from x_webhook_events order by id",
        "x_settlements": "select job_id as id from x_settlements order by seq",
    }
    return [r["id"] for r in await pool.fetch(statements[table])]


def offset_to(start_ms: int) -> int:
    """The clock offset that puts the services at ``start_ms`` (or later), ``LEAD_MS`` before
    one of their minutes."""
    minute = -(-(start_ms + LEAD_MS) // MINUTE) * MINUTE
    return minute - LEAD_MS - SYSTEM_CLOCK.now_ms()


async def test_the_services_alone_leave_nothing_expired(
    pg_pool: asyncpg.Pool[Any], pg_dsn: str
) -> None:
    clock = FrozenClock(SYSTEM_CLOCK.now_ms())
    start = await seed(pg_pool, clock)
    env = service_env(
        DATABASE_URL=pg_dsn,
        UJOBS_PURGE_CRON="* * * * *",
        UJOBS_CLOCK_OFFSET_MS=str(offset_to(start)),
    )
    services = [
        await ServiceProcess.start("scheduler", env=env),
        await ServiceProcess.start("worker", env=env),
    ]
    try:
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not await pg_pool.fetchval(
            "select count(*) from x_jobs where name = 'x.purge' and state = 'done'"
        ):
            assert asyncio.get_running_loop().time() < deadline, [s.logs for s in services]
            await asyncio.sleep(0.2)
        assert await ids(pg_pool, "x_jobs") == ["done-1d", "failed-89d", "ready-92d"]
        assert await ids(pg_pool, "x_job_steps") == ["done-1d", "failed-89d", "ready-92d"]
        assert await ids(pg_pool, "x_outbox") == ["published-6d", "unpublished"]
        assert await ids(pg_pool, "x_job_events") == ["live"]
        assert await ids(pg_pool, "x_job_leases") == []
        assert await ids(pg_pool, "x_webhook_deliveries") == ["delivery-22d"]
        assert await ids(pg_pool, "x_webhook_events") == ["evt-young"]
        assert await ids(pg_pool, "x_settlements") == ["pending", "settled-12h"]
        # Enqueued on the services' clock, moved past the windows (the wall clock is not).
        fired = await pg_pool.fetchval("select x_ms(created_at) from x_jobs where name = 'x.purge'")
        assert fired >= start
    finally:
        for service in services:
            service.terminate()
        codes = [await service.exit_code(30) for service in services]
    assert codes == [0, 0]
