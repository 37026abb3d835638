"""What the claim statement reads, from its own plan (``EXPLAIN ANALYZE`` of the prepared
statement, rolled back): with thousands of rows running on live leases, a claim reads none of
them. The lapsed-lease arm walks ``x_jobs_running_lease_idx (queue, lease_expires_at)`` up to
now, so it meets only the rows whose lease lapsed (0005); on an index of running rows by queue
alone it read every running row of the queue on every claim."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
import pytest

from shared.clock import FrozenClock
from shared.drivers.base import ClaimOptions, EnqueueRequest
from shared.drivers.postgres import PostgresDriver, counter_bucket
from shared.sql import query

RUNNING = 2_000
LAPSED = 3
DUE = 16


def req(key: str) -> EnqueueRequest:
    return EnqueueRequest(name="send", input={"k": key}, idempotency_key=key)


def claim(limit: int, visibility_ms: int, worker: str = "holder") -> ClaimOptions:
    return ClaimOptions(["default"], limit, worker, visibility_ms=visibility_ms)


def job_scans(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every plan node that reads ``x_jobs`` or one of its indexes (a bitmap index scan names
    only its index), depth first."""
    reads = node.get("Relation Name") == "x_jobs" or node.get("Index Name", "").startswith("x_jobs")
    found = [node] if reads else []
    for child in node.get("Plans", []):
        found.extend(job_scans(child))
    return found


def rows_read(node: dict[str, Any]) -> int:
    """The rows a scan node looked at: those it returned and those its filter threw away."""
    loops = int(node.get("Actual Loops", 1))
    kept = int(node.get("Actual Rows", 0)) * loops
    return (
        kept
        + int(node.get("Rows Removed by Filter", 0))
        + int(node.get("Rows Removed by Index Recheck", 0))
    )


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_claim_reads_none_of_the_rows_running_on_live_leases(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock, plan_mode: str
) -> None:
    await pg.enqueue_many([req(f"lapses-{i}") for i in range(LAPSED)])
    assert len(await pg.claim(claim(LAPSED, 1_000, "died"))) == LAPSED
    await pg.enqueue_many([req(f"held-{i}") for i in range(RUNNING)])
    assert len(await pg.claim(claim(RUNNING, 3_600_000))) == RUNNING
    await pg.enqueue_many([req(f"due-{i}") for i in range(DUE)])
    clock.advance(1_000)  # the first three leases lapse; the 2,000 have an hour left
    await pg_pool.execute("analyze x_jobs")
    now = clock.now_ms()
    width, start = counter_bucket(now)
    async with pg_pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute("set local plan_cache_mode = " + plan_mode)
            await conn.execute("prepare claim_plan as " + query("claim"))
            # EXPLAIN takes no bind parameters: the arguments are literals (all integers here).
            args = f"('{{default}}', {DUE}, 'w', {now}, 60000, '{{}}', {width}, {start})"
            line = await conn.fetchval("explain (analyze, format json) execute claim_plan" + args)
            taken = await conn.fetchval("select count(*) from x_jobs where claimed_by = 'w'")
        finally:
            await tx.rollback()
            await conn.execute("deallocate all")
    plan = orjson.loads(line)[0]["Plan"]
    scans = job_scans(plan)
    assert scans, "the plan reads x_jobs somewhere"
    assert max(rows_read(node) for node in scans) <= DUE + LAPSED, [
        (node.get("Index Name"), rows_read(node)) for node in scans
    ]
    lapsed_arm = [node for node in scans if node.get("Index Name") == "x_jobs_running_lease_idx"]
    assert lapsed_arm, [(n["Node Type"], n.get("Index Name"), rows_read(n)) for n in scans]
    assert sum(int(node["Actual Rows"]) for node in lapsed_arm) == LAPSED
    assert taken == DUE  # it did claim: the three lapsed rows (the oldest) and 13 due ones
