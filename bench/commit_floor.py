"""The durable floor of one awaited enqueue on this Postgres: prints ONE JSON line.

    /work/venv/bin/python bench/commit_floor.py

Issue 4 asks a single enqueue to reach 1.5x pgqueuer's. A single enqueue that returns only
once its job is durable is at least one round trip to the server plus one commit that waits
for its WAL flush, whatever the queue. This bench measures exactly that, with nothing of ours
in it: a one-column ``INSERT`` into a scratch table, awaited ``BENCH_FLOOR_N`` (default 3,000)
times on one asyncpg connection with ``synchronous_commit`` on (the server's default and
ours), and ``SELECT 1`` the same number of times (the round trip alone). ``bench/throughput.py``
runs it beside the peers and reports the ceiling it implies: ``1e6 / insert_us`` calls a second
is the most any durable one-at-a-time enqueue can reach here, ours or a peer's.

It uses the database ``BENCH_FLOOR_DB`` (default ``bench_floor``), dropped and created anew.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import asyncpg

PG_BASE = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
DB_NAME = os.environ.get("BENCH_FLOOR_DB", "bench_floor")
CALLS = int(os.environ.get("BENCH_FLOOR_N", "3000"))
ROUNDS = 3


async def per_call_us(conn: asyncpg.Connection, statement: str, *args: object) -> float:
    """Microseconds per awaited call of ``statement`` over ``CALLS`` calls."""
    started = time.perf_counter()
    for _ in range(CALLS):
        await conn.execute(statement, *args)
    return (time.perf_counter() - started) / CALLS * 1e6


async def measure() -> dict[str, object]:
    """The best of ``ROUNDS`` rounds of each, so a noisy neighbour moment does not count."""
    if not DB_NAME.startswith("bench_"):
        raise SystemExit(f"BENCH_FLOOR_DB must start with bench_: {DB_NAME!r}")
    admin = await asyncpg.connect(f"{PG_BASE}/postgres")
    try:
        await admin.execute(f'drop database if exists "{DB_NAME}" with (force)')
        await admin.execute(f'create database "{DB_NAME}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(f"{PG_BASE}/{DB_NAME}")
    try:
        await conn.execute("create table floor_rows (id bigserial primary key, v text)")
        synchronous_commit = await conn.fetchval("show synchronous_commit")
        inserts, selects = [], []
        for _ in range(ROUNDS):
            inserts.append(await per_call_us(conn, "insert into floor_rows (v) values ($1)", "x"))
            selects.append(await per_call_us(conn, "select 1"))
    finally:
        await conn.close()
    insert_us = min(inserts)
    return {
        "bench": "commit_floor",
        "calls": CALLS,
        "synchronous_commit": synchronous_commit,
        "insert_commit_us": round(insert_us, 1),
        "round_trip_us": round(min(selects), 1),
        "durable_single_ceiling_per_s": round(1e6 / insert_us, 1),
        "rounds_insert_us": [round(x, 1) for x in inserts],
        "rounds_round_trip_us": [round(x, 1) for x in selects],
    }


def main() -> None:
    print(json.dumps(asyncio.run(measure())), flush=True)


if __name__ == "__main__":
    main()
