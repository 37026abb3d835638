"""The fair claim's own plan (``EXPLAIN (ANALYZE, FORMAT JSON)`` of the prepared statement on the
driver's held connections, rolled back): the walk over tenants and each tenant's rows read
``x_jobs_fair_idx``; what they read is bounded by the claim's limit, not by how many tenants
have work (a loose index scan from the cursor); and the statement is not JIT-compiled, on a
generic and a custom plan alike. Priority first: a lower band's rows, however many tenants
hold them, are not read."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson
import pytest

from tests.support.plans import fresh_jobs_table, plan_nodes, rows_read
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import counter_bucket, postgres_driver
from ujobs.drivers.postgres.held_connections import HeldConnections
from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.sql import query

if TYPE_CHECKING:
    Conn = asyncpg.pool.PoolConnectionProxy[Any]

T0 = 1_700_000_000_000
NOW = T0 + 3_600_000
LIMIT = 16
FLOOD = 50_000


async def _fill(pool: asyncpg.Pool[Any], tenants: int) -> None:
    """One flooding tenant and ``tenants`` quiet ones with three due rows each, the quiet rows
    enqueued after the flood."""
    await fresh_jobs_table(pool)
    await pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at)"
        " select 'j' || lpad(n::text, 9, '0'), 'r' || n, 'send', 'default', 'ready', '{}',"
        " case when n <= $2::int then 'flood' else 't' || lpad((n % $3::int)::text, 6, '0') end,"
        " 'k' || n, 3, x_ts($1::bigint + n), x_ts($1::bigint), x_ts($1::bigint)"
        " from generate_series(1, $2::int + 3 * $3::int) n",
        T0,
        FLOOD,
        tenants,
    )
    # A lower band of many tenants, older than everything above: the fair scan walks the top
    # band (0) only, so none of it is read.
    await pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at, priority)"
        " select 'l' || lpad(n::text, 9, '0'), 'l' || n, 'send', 'default', 'ready', '{}',"
        " 'late-' || lpad(n::text, 6, '0'), 'l' || n, 3, x_ts($1::bigint - n),"
        " x_ts($1::bigint), x_ts($1::bigint), 9"
        " from generate_series(1, 2000) n",
        T0,
    )
    await pool.execute("analyze x_jobs")


async def _explain(
    pool: asyncpg.Pool[Any], plan_mode: str, now: int = NOW
) -> tuple[dict[str, Any], list[Any]]:
    width, start = counter_bucket(now)
    args = (
        f"('{{default}}', {LIMIT}, 'w', {now}, 60000, '{{}}', {width}, {start}, null, 3, false,"
        " '{}')"
    )

    async def call(conn: Conn) -> tuple[dict[str, Any], list[Any]]:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute("set local plan_cache_mode = " + plan_mode)
            await conn.execute("prepare fair_under_test as " + query("claim"))
            line = await conn.fetchval(
                "explain (analyze, format json) execute fair_under_test" + args
            )
            tenants = await conn.fetch(
                "select tenant_id from x_jobs where claimed_by = 'w' order by tenant_id"
            )
        finally:
            await tx.rollback()
            await conn.execute("deallocate fair_under_test")
        return orjson.loads(line)[0], [r["tenant_id"] for r in tenants]

    held = HeldConnections(pool)
    try:
        return await held.run(call)
    finally:
        await held.close()


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_the_fair_scan_reads_its_index_a_bounded_amount_and_is_not_jit_compiled(
    pg_pool: asyncpg.Pool[Any], plan_mode: str
) -> None:
    read: dict[int, int] = {}
    for tenants in (100, 5_000):
        await _fill(pg_pool, tenants)
        explained, claimed = await _explain(pg_pool, plan_mode)
        assert "JIT" not in explained, explained["JIT"]
        fair = [
            n for n in plan_nodes(explained["Plan"]) if n.get("Index Name") == "x_jobs_fair_idx"
        ]
        assert fair, sorted(
            {n.get("Index Name", n["Node Type"]) for n in plan_nodes(explained["Plan"])}
        )
        read[tenants] = sum(rows_read(n) for n in fair)
        # Sixteen slots, sixteen tenants: the flood one row like every quiet tenant, all of
        # the top band.
        assert len(claimed) == LIMIT
        assert len(set(claimed)) == LIMIT
        assert not [t for t in claimed if t.startswith("late-")]
    # The walk visits at most LIMIT tenants: fifty times the tenants, the same reads.
    assert read[5_000] <= 4 * LIMIT + LIMIT * LIMIT, read
    assert read[5_000] <= 2 * read[100], read


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_new_queues_backlog_is_read_a_bounded_amount(
    pg_fresh_dsn: str, plan_mode: str
) -> None:
    """A brand-new database, as a new user's first import meets it: migrated, 20,000
    tenant-less rows enqueued as the driver does (COPY), never analyzed. The top band's probe
    once read every due row of the queue (an EXISTS under min() planned as a semi join over
    x_jobs_fair_idx: 18 ms of a 20 ms claim); every x_jobs scan of the claim now reads a
    bounded amount, whatever the backlog."""
    conn = await asyncpg.connect(pg_fresh_dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    async with asyncpg.create_pool(pg_fresh_dsn, min_size=1, max_size=4) as pool:
        driver = postgres_driver(pool)
        try:
            for batch in range(20):
                await driver.enqueue_many(
                    EnqueueRequest(name="send", input={"n": n}, idempotency_key=f"{batch}-{n}")
                    for n in range(1_000)
                )
        finally:
            await driver.close()
        explained, claimed = await _explain(pool, plan_mode, int(time.time() * 1000) + 1_000)
    assert claimed == [None] * LIMIT
    scans = [
        (n["Node Type"], n.get("Index Name"), rows_read(n))
        for n in plan_nodes(explained["Plan"])
        if n.get("Relation Name") == "x_jobs" or n.get("Index Name", "").startswith("x_jobs")
    ]
    assert sum(read for _, _, read in scans) <= 20 * LIMIT, scans
