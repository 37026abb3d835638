"""Reading a statement's own plan in tests: ``EXPLAIN ANALYZE`` of a prepared driver statement
under a chosen plan cache mode, inside a transaction that is rolled back, and the nodes of that
plan that read ``x_jobs``."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson


async def fresh_jobs_table(pool: asyncpg.Pool[Any]) -> None:
    """Empty ``x_jobs`` down to its files. The fixture empties tables with DELETE, which leaves
    an earlier test's dead rows and pages behind; on a table of a few thousand rows they sway
    the planner's costs (a sequential scan of the whole table becomes the cheaper-looking
    choice), and a plan test would depend on which test ran before it."""
    await pool.execute("truncate x_jobs")


async def explain_prepared(
    pool: asyncpg.Pool[Any], sql: str, args: str, plan_mode: str, *, count: str
) -> tuple[dict[str, Any], int]:
    """The plan of ``sql`` run once as a prepared statement on ``args`` (a literal argument
    list: EXPLAIN takes no bind parameters), and what ``count`` answered before the rollback."""
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute("set local plan_cache_mode = " + plan_mode)
            await conn.execute("prepare plan_under_test as " + sql)
            line = await conn.fetchval(
                "explain (analyze, format json) execute plan_under_test" + args
            )
            counted = int(await conn.fetchval(count))
        finally:
            await tx.rollback()
            await conn.execute("deallocate plan_under_test")
    return orjson.loads(line)[0]["Plan"], counted


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a plan, depth first."""
    found = [node]
    for child in node.get("Plans", []):
        found.extend(plan_nodes(child))
    return found


def looped_nodes(node: dict[str, Any], *, allowed: frozenset[str] = frozenset()) -> list[Any]:
    """Every node of a plan that ran more than once, other than the node types in ``allowed``
    (a statement's deliberate per-row probes), as (type, relation or CTE, loops)."""
    return [
        (n["Node Type"], n.get("CTE Name") or n.get("Relation Name"), n["Actual Loops"])
        for n in plan_nodes(node)
        if int(n.get("Actual Loops", 1)) > 1 and n["Node Type"] not in allowed
    ]


def job_scans(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every plan node that reads ``x_jobs`` or one of its indexes (a bitmap index scan names
    only its index), depth first."""
    return [
        n
        for n in plan_nodes(node)
        if n.get("Relation Name") == "x_jobs" or n.get("Index Name", "").startswith("x_jobs")
    ]


def rows_read(node: dict[str, Any]) -> int:
    """The rows a scan node looked at: those it returned and those its filter threw away."""
    loops = int(node.get("Actual Loops", 1))
    kept = int(node.get("Actual Rows", 0)) * loops
    return (
        kept
        + int(node.get("Rows Removed by Filter", 0))
        + int(node.get("Rows Removed by Index Recheck", 0))
    )
