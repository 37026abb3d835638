"""Issue 38's queue controls under load, on Postgres: prints ONE JSON line.

    /work/venv/bin/python bench/queue_controls.py

The debounce burst: ``BENCH_QC_BURST`` (default 10,000) enqueues sent at once over
``BENCH_QC_KEYS`` (default 100) idempotency keys of a job declared with a debounce, each
through the driver's one controlled statement (``sql/queries/enqueue_controlled.sql``) on a pool
of ``BENCH_QC_CONNECTIONS`` (default 16) connections. The issue's bar is exact: the burst makes
one run per key (``debounce_runs`` == keys), whatever the interleaving, and each key's run holds
the input of one of its own enqueues. ``debounce_s`` is the burst's wall time, a figure to
read, not a bar.

The drain with and without priorities (``ratios.drain_with_priorities_vs_without``) joins this
line with issue 38's priorities (item 1), which land separately.

It uses the database ``BENCH_QC_DB`` (default ``bench_queue_controls``), dropped and created anew.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_db import fresh_database

from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver

DB_NAME = os.environ.get("BENCH_QC_DB", "bench_queue_controls")
BURST = int(os.environ.get("BENCH_QC_BURST", "10000"))
KEYS = int(os.environ.get("BENCH_QC_KEYS", "100"))
CONNECTIONS = int(os.environ.get("BENCH_QC_CONNECTIONS", "16"))
DEBOUNCE_MS = 60_000
"""Longer than the burst: no run may start (and free its key) before the burst is over."""


def burst_requests(burst: int, keys: int) -> list[EnqueueRequest]:
    """``burst`` debounced enqueues spread round-robin over ``keys`` keys; enqueue ``n``'s
    input names its key and its own number."""
    return [
        EnqueueRequest(
            name="bench.debounced",
            input={"key": n % keys, "n": n},
            idempotency_key=f"debounce:{n % keys}",
            debounce_ms=DEBOUNCE_MS,
        )
        for n in range(burst)
    ]


async def debounce_burst(pool: asyncpg.Pool[Any], burst: int, keys: int) -> dict[str, Any]:
    """Send the burst all at once on ``pool`` (an empty, migrated database) and count what it
    made: the runs, and whether each holds an input of its own key."""
    driver = postgres_driver(pool)
    requests = burst_requests(burst, keys)
    started = time.perf_counter()
    try:
        answers = await asyncio.gather(*(driver.enqueue(r) for r in requests))
    finally:
        await driver.close()
    elapsed = time.perf_counter() - started
    rows = await pool.fetch("select idempotency_key, input from x_jobs")
    own_input = all(
        r["idempotency_key"] == f"debounce:{json.loads(r['input'])['key']}" for r in rows
    )
    return {
        "debounce_runs": len(rows),
        "debounce_burst": burst,
        "debounce_keys": keys,
        "debounce_new": sum(not a.deduped for a in answers),
        "debounce_moved": sum(a.debounced for a in answers),
        "debounce_own_input": own_input,
        "debounce_s": round(elapsed, 3),
    }


async def measure() -> dict[str, Any]:
    if not DB_NAME.startswith("bench_"):
        raise SystemExit(f"BENCH_QC_DB must start with bench_: {DB_NAME!r}")
    dsn = await fresh_database(DB_NAME)
    pool = await asyncpg.create_pool(dsn, min_size=CONNECTIONS, max_size=CONNECTIONS)
    assert pool is not None
    try:
        figures = await debounce_burst(pool, BURST, KEYS)
    finally:
        await pool.close()
    return {"bench": "queue_controls", **figures}


def main() -> None:
    print(json.dumps(asyncio.run(measure())), flush=True)


if __name__ == "__main__":
    main()
