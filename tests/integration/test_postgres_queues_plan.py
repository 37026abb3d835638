"""The queues read (``stats.sql``: ``GET /v1/queues``, ``ujobs queues list``, the queue gauges)
on a big table: it reads x_jobs through its indexes only, never whole, so its cost does not
grow with the backlog (issue 42), and the figures it stopped counting say so (``capped``).

Filled like the hot statements' plan test (800,000 ready rows, 2,000 running, 50,000 done, in
one queue), plus a few rows of the last band older than all of them, on the pool the services
use (``postgres_pool``: JIT off). The claimable rows are read band by band from
``x_jobs_claim_priority_idx`` (``x_jobs_claim_idx`` is gone since 0031), so the capped sample is
band 0's, and the oldest due run_at, band 9's, is exact all the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.integration.test_postgres_hot_plans import (
    NOW,
    RUNNING,
    T0,
    explaining,
    fill,
    indexes_used,
    whole_scans,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.driver import QUEUE_COUNT_CAP, postgres_driver
from ujobs.drivers.postgres.held_connections import HeldConnections
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.drivers.postgres.sql import query


@pytest.fixture
async def filled(pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[str]:
    await fill(pg_pool)
    await pg_pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at, priority)"
        " select 'late-' || n, 'late-' || n, 'send', 'default', 'ready', '{}', 'late-' || n, 3,"
        " x_ts($1::bigint - n), x_ts($1::bigint), x_ts($1::bigint), 9"
        " from generate_series(1, 5) n",
        T0,
    )
    yield pg_dsn
    await pg_pool.execute("truncate x_jobs, x_outbox, x_settlements, x_job_leases")
    await pg_pool.execute("analyze")


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_the_queues_read_uses_the_indexes_and_never_scans_x_jobs_whole(
    filled: str, plan_mode: str
) -> None:
    pool = await postgres_pool(filled, min_size=1, max_size=1)
    held = HeldConnections(pool)
    try:
        explained = await held.run(
            explaining(query("stats"), f"({NOW}, {QUEUE_COUNT_CAP})", plan_mode)
        )
    finally:
        await held.close()
        await pool.close()
    plan = explained["Plan"]
    assert whole_scans(plan) == []
    assert {"x_jobs_claim_priority_idx", "x_jobs_running_lease_idx", "x_jobs_finished_idx"} <= (
        indexes_used(plan)
    )
    assert "JIT" not in explained


async def test_the_queues_read_is_exact_below_the_cap_and_says_which_figures_it_capped(
    filled: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    pool = await postgres_pool(filled, min_size=1, max_size=1)
    try:
        stats = await postgres_driver(pool, clock=FrozenClock(NOW)).stats()
    finally:
        await pool.close()
    queue = stats.queues["default"]
    # 800,000 ready and 50,000 done rows: counted up to the cap, and named as capped.
    assert queue.capped == frozenset({"ready", "due", "done"})
    assert QUEUE_COUNT_CAP <= queue.ready <= QUEUE_COUNT_CAP + 1
    assert QUEUE_COUNT_CAP <= queue.done <= QUEUE_COUNT_CAP + 1
    # 2,000 running rows: under the cap, exact.
    assert queue.running == RUNNING
    # The oldest due run_at is the least of each band's first due entry: exact whatever the
    # backlog, though band 9's rows are past the capped sample (band 0's).
    oldest = await pg_pool.fetchval(
        "select x_ms(min(run_at)) from x_jobs where state = 'ready' and run_at <= x_ts($1)", NOW
    )
    assert oldest == T0 - 5
    assert queue.oldest_due_run_at_ms == oldest
