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

Beside it, the same connection sends our own single-enqueue statement
(``sql/queries/enqueue_insert.sql``, what ``enqueue()`` sends on its common path) into a
migrated ``x_jobs``, with nothing of the driver around it: ids minted and arguments built
before the clock starts. ``1e6 / statement_us`` is the most OUR single enqueue could reach
here if the client cost nothing, so ``bench/throughput.py`` reports it beside the floor's
ceiling: the row the spec asks for (its dedupe key, claim order, attribution and five index
entries) costs what it costs before any Python runs.

The three statements are sent in turn, one call of each, so a minute when the machine slows
down slows all three alike; each figure is the mean of ``BENCH_FLOOR_N`` calls, the best of
three rounds.

It uses the database ``BENCH_FLOOR_DB`` (default ``bench_floor``), dropped and created anew.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.sql import query
from ujobs.ids import new_ids

PG_BASE = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
DB_NAME = os.environ.get("BENCH_FLOOR_DB", "bench_floor")
CALLS = int(os.environ.get("BENCH_FLOOR_N", "3000"))
ROUNDS = 3


def enqueue_args(seq: int) -> tuple[object, ...]:
    """``enqueue_insert.sql``'s $1..$14 for one job of the bench's shape, due now (priority 0,
    no fleet slot)."""
    job_id, run_id = new_ids(2)
    now = int(time.time() * 1000)
    return (job_id, run_id, "bench.noop", "default", f'{{"seq": {seq}, "ts": 0.0}}', None,
            f"floor:{seq}", 3, now, now, None, None, 0, None)  # fmt: skip


async def one_round(
    conn: asyncpg.Connection, insert: str, statement: str, seq: int
) -> tuple[float, float, float]:
    """Mean microseconds a call of the floor's INSERT, our statement and ``SELECT 1``, sent
    in turn ``CALLS`` times each."""
    spent = [0.0, 0.0, 0.0]
    for n in range(CALLS):
        args = enqueue_args(seq + n)
        started = time.perf_counter()
        await conn.execute(insert, "x")
        mid = time.perf_counter()
        await conn.fetch(statement, *args)
        late = time.perf_counter()
        await conn.execute("select 1")
        spent[0] += mid - started
        spent[1] += late - mid
        spent[2] += time.perf_counter() - late
    return spent[0] / CALLS * 1e6, spent[1] / CALLS * 1e6, spent[2] / CALLS * 1e6


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
        await migrate(conn)
        await conn.execute("create table floor_rows (id bigserial primary key, v text)")
        synchronous_commit = await conn.fetchval("show synchronous_commit")
        insert = "insert into floor_rows (v) values ($1)"
        rounds = [
            await one_round(conn, insert, query("enqueue_insert"), k * CALLS) for k in range(ROUNDS)
        ]
    finally:
        await conn.close()
    inserts, statements, selects = ([r[i] for r in rounds] for i in range(3))
    insert_us, statement_us = min(inserts), min(statements)
    return {
        "bench": "commit_floor",
        "calls": CALLS,
        "synchronous_commit": synchronous_commit,
        "insert_commit_us": round(insert_us, 1),
        "round_trip_us": round(min(selects), 1),
        "durable_single_ceiling_per_s": round(1e6 / insert_us, 1),
        "enqueue_statement_us": round(statement_us, 1),
        "enqueue_statement_ceiling_per_s": round(1e6 / statement_us, 1),
        "rounds_insert_us": [round(x, 1) for x in inserts],
        "rounds_enqueue_statement_us": [round(x, 1) for x in statements],
        "rounds_round_trip_us": [round(x, 1) for x in selects],
    }


def main() -> None:
    print(json.dumps(asyncio.run(measure())), flush=True)


if __name__ == "__main__":
    main()
