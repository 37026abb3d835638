"""The queues read alone, as ``backlog_scaling.py`` measures it: ``queues_ms`` in front of
10,000 and 1,000,000 ready rows (plus the window), and their ratio (issue 42: the read that
scanned x_jobs whole).

    .venv/bin/python bench/backlog_queues_read.py

The full scenario also measures claims, enqueues and the relay; this one fills the same ``ready``
backlog (``backlog_fill.fill_jobs``) into its own database and times only
``ujobs.introspect.inspect_queues``, median of 5. ``BENCH_BACKLOG_SIZES`` and
``BENCH_BACKLOG_WINDOW`` as there. Runs under the bench lock.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for entry in (str(ROOT), str(ROOT / "bench")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import asyncpg  # noqa: E402
from backlog_fill import fill_jobs, settle_tables  # noqa: E402
from backlog_scaling import SIZES, WINDOW, queues_ms, ratio  # noqa: E402
from bench_db import drop_database, fresh_database  # noqa: E402
from harness_run import bench_lock  # noqa: E402

from ujobs.drivers.postgres.driver import postgres_driver  # noqa: E402
from ujobs.drivers.postgres.pool import postgres_pool  # noqa: E402

DB_NAME = "bench_queues_read"


async def one(dsn: str, backlog: int) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("truncate x_jobs")
        await fill_jobs(conn, rows=WINDOW + backlog, name="backlog", queue="backlog")
        await settle_tables(conn)
    finally:
        await conn.close()
    pool = await postgres_pool(dsn, min_size=1, max_size=2)
    driver = postgres_driver(pool)
    try:
        return round(await queues_ms(driver), 1)
    finally:
        await driver.close()
        await pool.close()


async def run() -> dict[str, Any]:
    dsn = await fresh_database(DB_NAME)
    try:
        found = {f"queues_ms_{size}": await one(dsn, size) for size in SIZES}
    finally:
        await drop_database(DB_NAME)
    found["queues_speed_big_vs_small"] = ratio(
        found[f"queues_ms_{SIZES[0]}"], found[f"queues_ms_{SIZES[-1]}"]
    )
    found["load"] = os.getloadavg()[0]
    return found


if __name__ == "__main__":
    with bench_lock():
        result = asyncio.run(run())
    print(json.dumps(result), flush=True)
