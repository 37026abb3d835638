"""A worker process for the two-process test: claim up to 25 rows at a time, record each
(job id, claim, worker) in a side table, ack, until the queue has nothing left to do.

    python tests/integration/pg_drain_process.py <dsn> <worker id>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.pool import postgres_pool

RECORD = "insert into drain_runs (job_id, claim, worker_id) values ($1, $2, $3)"
LEFT = "select count(*) from x_jobs where state <> 'done'"


async def main(dsn: str, worker_id: str) -> None:
    pool = await postgres_pool(dsn, min_size=2, max_size=8)
    driver = postgres_driver(pool)
    options = ClaimOptions(queues=["drain"], limit=25, worker_id=worker_id)
    try:
        while True:
            jobs = await driver.claim(options)
            if not jobs:
                if await pool.fetchval(LEFT) == 0:
                    return
                await asyncio.sleep(0.01)
                continue
            await pool.executemany(RECORD, [(j.id, j.claim, worker_id) for j in jobs])
            landed = await asyncio.gather(*(driver.ack(j.id, j.ref) for j in jobs))
            if not all(landed):
                raise SystemExit(f"{worker_id}: an ack of its own claim did not land")
    finally:
        await driver.close()
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
