"""The reads across priority bands on a brand-new database, as a new user's first import meets
it: migrated, filled, never analyzed. Since 0031 the claimable rows are in two indexes,
``x_jobs_claim_priority_idx (queue, priority, run_at, seq)`` and ``x_jobs_fair_idx``, and
``x_jobs_claim_idx (queue, run_at, seq)`` is gone; the queues read (``stats.sql``), a queue's
waiting tenants (``queue_tenants.sql``) and the scaler's depth (``scaler_depth.sql``) walk the
priority index band by band. Read from each statement's own plan (``EXPLAIN (ANALYZE, FORMAT
JSON)`` of the prepared statement, rolled back), on a generic and a custom plan: the first two
read a bounded amount whatever the backlog, and the scaler, which counts every due row, reads
those and never the rows waiting on a future run_at.

The fill has no finished rows: the queues read's finished arm is not what 0031 moved."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.support.plans import explain_prepared, job_scans, rows_read
from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.sql import query

FUTURE = 42_000
"""Rows of band 0 waiting on a run_at an hour or more ahead: the backlog no read may walk."""
BANDS = (0, 4, 9)
DUE_PER_BAND = 2_000
DUE = DUE_PER_BAND * len(BANDS)
RUNNING = 200
OTHER = 50
"""Due rows of a second queue: the queues read probes each queue."""
CAP = 500
"""The queues read's and queue_tenants' cap here (the driver's is 10,000): far below the
backlog, so a read that does not stop at it shows."""

CLAIMABLE = "('ready', 'delayed', 'suspended')"


async def _fill(pool: asyncpg.Pool[Any]) -> int:
    """The backlog, relative to the database's clock (the scaler reads ``now()``), and that
    clock in epoch ms. Band 9's due rows are the oldest, band 0's the newest; tenants
    ``t00``..``t99`` take turns."""
    await pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at, priority)"
        " select 'f' || n, 'f' || n, 'send', 'default', 'delayed', '{}',"
        " 't' || lpad((n % 100)::text, 2, '0'), 'f' || n, 3,"
        " now() + interval '1 hour' + n * interval '1 ms', now(), now(), 0"
        " from generate_series(1, $1::int) n",
        FUTURE,
    )
    for band in BANDS:
        await pool.execute(
            "insert into x_jobs (id, run_id, name, queue, state, input, tenant_id,"
            " idempotency_key, max_attempts, run_at, created_at, updated_at, priority)"
            " select 'd' || $1::int || '-' || n, 'd' || $1::int || '-' || n, 'send', 'default',"
            " 'ready', '{}', 't' || lpad((n % 100)::text, 2, '0'), 'd' || $1::int || '-' || n,"
            " 3, now() - interval '1 hour' - ($1::int * $2::int + n) * interval '1 ms',"
            " now(), now(), $1::int"
            " from generate_series(1, $2::int) n",
            band,
            DUE_PER_BAND,
        )
    await pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at, claimed_by, claim, lease_expires_at)"
        " select 'r' || n, 'r' || n, 'send', 'default', 'running', '{}', 'r' || n, 3,"
        " now() - interval '2 hours', now(), now(), 'w', 1, now() + interval '1 hour'"
        " from generate_series(1, $1::int) n",
        RUNNING,
    )
    await pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at)"
        " select 'o' || n, 'o' || n, 'send', 'other', 'ready', '{}', 'o' || n, 3,"
        " now() - interval '1 minute', now(), now()"
        " from generate_series(1, $1::int) n",
        OTHER,
    )
    never = await pool.fetchval(
        "select reltuples < 0 and not exists (select 1 from pg_statistic s"
        " where s.starelid = 'x_jobs'::regclass) from pg_class where oid = 'x_jobs'::regclass"
    )
    assert never, "the table was analyzed: the test would not be about a fresh one"
    return int(await pool.fetchval("select x_ms(now())"))


def _read(plan: dict[str, Any]) -> int:
    return sum(rows_read(n) for n in job_scans(plan))


@pytest.fixture
async def fresh(pg_fresh_dsn: str) -> AsyncIterator[asyncpg.Pool[Any]]:
    conn = await asyncpg.connect(pg_fresh_dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    async with asyncpg.create_pool(pg_fresh_dsn, min_size=1, max_size=2) as pool:
        yield pool


async def test_a_migrated_database_has_two_indexes_of_claimable_rows(
    fresh: asyncpg.Pool[Any],
) -> None:
    assert await fresh.fetchval("select to_regclass('x_jobs_claim_idx')") is None
    claimable = await fresh.fetch(
        "select indexname from pg_indexes where tablename = 'x_jobs'"
        " and indexdef like '%WHERE (state = ANY (ARRAY[''ready''::text, ''delayed''::text,"
        " ''suspended''::text]))' order by 1"
    )
    assert [r["indexname"] for r in claimable] == ["x_jobs_claim_priority_idx", "x_jobs_fair_idx"]


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_the_reads_across_bands_stay_bounded_on_a_never_analyzed_table(
    fresh: asyncpg.Pool[Any], plan_mode: str
) -> None:
    now = await _fill(fresh)
    backlog = FUTURE + DUE + RUNNING + OTHER

    # The queues read: per queue the first CAP + 1 claimable rows in hand-out order, ten
    # one-row probes for the oldest due row, the running rows up to the cap.
    plan, oldest_band_9 = await explain_prepared(
        fresh,
        query("stats"),
        f"({now}, {CAP})",
        plan_mode,
        count=f"select x_ms(min(run_at)) from x_jobs where priority = 9 and state in {CLAIMABLE}",
    )
    read = _read(plan)
    assert read <= 2 * (CAP + 1) + RUNNING + 100, (read, backlog)
    rows = await fresh.fetch(query("stats"), now, CAP)
    default = {r["state"]: r for r in rows if r["queue"] == "default"}
    # The cap reached in band 0 (its due rows, then its future ones): capped, and the oldest
    # due row, in band 9 and never sampled, exact all the same.
    assert default["ready"]["capped"]
    assert default["ready"]["oldest_due_ms"] == oldest_band_9
    assert default["running"]["n"] == RUNNING

    # A queue's waiting tenants: the first CAP + 1 due rows in hand-out order, band 0's.
    args = f"('default', {now}, {CAP}, 10)"
    plan, _ = await explain_prepared(
        fresh, query("queue_tenants"), args, plan_mode, count="select 0"
    )
    read = _read(plan)
    assert read <= CAP + 1 + 20, (read, backlog)
    tenants = await fresh.fetch(query("queue_tenants"), "default", now, CAP, 10)
    assert tenants
    assert all(t["capped"] for t in tenants)
    # The oldest row read is band 0's oldest, not band 9's (older, but handed out last).
    oldest_band_0 = await fresh.fetchval(
        "select x_ms(min(run_at)) from x_jobs where priority = 0 and state = 'ready'"
        " and queue = 'default'"
    )
    assert min(t["oldest_due_ms"] for t in tenants) == oldest_band_0

    # The scaler's depth: every due row and every running one, and none of the future rows.
    plan, _ = await explain_prepared(
        fresh, query("scaler_depth"), "('{default,other}')", plan_mode, count="select 0"
    )
    read = _read(plan)
    assert read <= DUE + OTHER + 2 * RUNNING + 100, (read, backlog)
    # Every scan of the claimable rows is a range of the priority index up to now: in
    # x_jobs_fair_idx run_at follows the tenant, so it would be a filter over the queue's
    # every claimable row inside the index (which no row count above shows).
    claimable = [
        n
        for n in job_scans(plan)
        if n.get("Index Name") in ("x_jobs_claim_priority_idx", "x_jobs_fair_idx")
    ]
    assert claimable, [n.get("Index Name", n["Node Type"]) for n in job_scans(plan)]
    for node in claimable:
        assert node["Index Name"] == "x_jobs_claim_priority_idx", node
        assert "run_at <= now()" in node["Index Cond"], node["Index Cond"]
    depth = await fresh.fetchval(query("scaler_depth"), ["default", "other"])
    assert depth == DUE + OTHER + RUNNING
