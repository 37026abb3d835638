"""The plans behind ``bench/backlog_scaling.py``'s Postgres figures, read on the worker's own
session settings (a ``postgres_pool()``): the claim's ``EXPLAIN (ANALYZE)`` as the worker runs
it, the same with JIT forced on (what the driver's ``jit = off`` saves at that size), and the
queues read's. Each runs inside a transaction that is rolled back, so nothing is claimed;
``update_ms`` is the time of the plan's update of ``x_jobs`` (the claimed rows' new versions and
their index entries), where a claim over many live rows spends most of its time."""

from __future__ import annotations

import statistics
import time
from typing import Any

import orjson

from ujobs.drivers.base import AHEAD_RETURNS_MAX
from ujobs.drivers.postgres.driver import QUEUE_COUNT_CAP, counter_bucket
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.drivers.postgres.sql import query

RUNS = 3


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found.extend(_nodes(child))
    return found


async def _explain(dsn: str, sql: str, args: str, *, jit: bool | None = None) -> dict[str, Any]:
    """The plan of ``sql`` on ``args``, run ``RUNS`` times on one session: the median
    execution time (one sample on a shared machine swings by 2x), the last run's nodes."""
    pool = await postgres_pool(dsn, min_size=1, max_size=1)
    times: list[float] = []
    try:
        async with pool.acquire() as conn:
            await conn.execute("prepare backlog_plan as " + sql)
            try:
                for _ in range(RUNS):
                    tx = conn.transaction()
                    await tx.start()
                    try:
                        if jit is not None:
                            await conn.execute("set local jit = " + ("on" if jit else "off"))
                        line = await conn.fetchval(
                            "explain (analyze, format json) execute backlog_plan" + args
                        )
                    finally:
                        await tx.rollback()
                    explained: dict[str, Any] = orjson.loads(line)[0]
                    times.append(float(explained["Execution Time"]))
            finally:
                await conn.execute("deallocate backlog_plan")
    finally:
        await pool.close()
    nodes = _nodes(explained["Plan"])
    updates = [
        float(n["Actual Total Time"])
        for n in nodes
        if n["Node Type"] == "ModifyTable" and n.get("Relation Name") == "x_jobs"
    ]
    return {
        "ms": round(statistics.median(times), 2),
        "update_ms": round(max(updates), 2) if updates else 0.0,
        "jit": "JIT" in explained,
        "cost": round(float(explained["Plan"]["Total Cost"])),
        "indexes": sorted({n["Index Name"] for n in nodes if "Index Name" in n}),
        "seq_scans": sorted({n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}),
    }


async def claim_plan(dsn: str) -> dict[str, Any]:
    """The worker's claim of 64 rows (16 slots and 48 ahead) at this backlog, the queue fair
    (no strict queues: ``$12`` empty), as ``ujobs worker`` claims by default."""
    now = int(time.time() * 1000)
    width, start = counter_bucket(now)
    args = (
        f"('{{backlog}}', 64, 'plan', {now}, 60000, '{{}}', {width}, {start}, 16, "
        f"{AHEAD_RETURNS_MAX}, false, '{{}}')"
    )
    as_run = await _explain(dsn, query("claim"), args)
    with_jit = await _explain(dsn, query("claim"), args, jit=True)
    return {**as_run, "ms_with_jit_on": with_jit["ms"], "jit_when_on": with_jit["jit"]}


async def queues_plan(dsn: str) -> dict[str, Any]:
    """The read behind ``GET /v1/queues`` (``stats.sql``): bounded index reads, the driver's cap."""
    now = int(time.time() * 1000)
    return await _explain(dsn, query("stats"), f"({now}, {QUEUE_COUNT_CAP})")
