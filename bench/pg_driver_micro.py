"""Driver-level micro-benchmark of the Postgres driver: prints ONE JSON line.

    BENCH_N=20000 /work/venv/bin/python bench/pg_driver_micro.py

Figures (jobs/s, wall clock, no job bodies):
- enqueue_single_per_s: ``driver.enqueue`` awaited one at a time (BENCH_SINGLE_N calls)
- enqueue_batch_per_s: ``driver.enqueue_many`` in batches of 500 (BENCH_N jobs)
- drain_per_s: those BENCH_N jobs claimed and acked by 16 slots over one pool, worker-style:
  one loop claims up to the free slots in one statement, each job acks on its own task
- drain_single_claimers_per_s: the same with 16 independent claimers taking one row each
- the same two drains with 1,000,000 finished rows in x_jobs (``*_with_history``)

It runs against a database of its own (BENCH_DB, default ujobs_bench_micro), dropped and
re-created, on BENCH_PG (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest
from shared.drivers.postgres import PostgresDriver, postgres_driver
from shared.drivers.postgres_pool import postgres_pool
from shared.migrate import migrate

PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_DB", "ujobs_bench_micro")
N = int(os.environ.get("BENCH_N", "20000"))
SINGLE_N = int(os.environ.get("BENCH_SINGLE_N", "3000"))
HISTORY = int(os.environ.get("BENCH_HISTORY", "1000000"))
SLOTS = 16
BATCH = 500
QUEUE = "bench"


async def admin(statement: str) -> None:
    conn = await asyncpg.connect(f"{PG}/postgres")
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def request(i: int) -> EnqueueRequest:
    return EnqueueRequest(name="noop", input={"seq": i}, idempotency_key=f"k{i}", queue=QUEUE)


async def enqueue_single(driver: PostgresDriver, n: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        await driver.enqueue(request(-1 - i))
    return n / (time.perf_counter() - started)


async def enqueue_batch(driver: PostgresDriver, n: int, offset: int = 0) -> float:
    started = time.perf_counter()
    for lo in range(0, n, BATCH):
        await driver.enqueue_many([request(offset + i) for i in range(lo, min(n, lo + BATCH))])
    return n / (time.perf_counter() - started)


async def drain_worker_style(driver: PostgresDriver, n: int) -> float:
    """One claim loop over 16 slots; every claimed job acks on its own task."""
    done = 0
    free = asyncio.Semaphore(SLOTS)
    in_flight = 0
    finished = asyncio.Event()
    kick = asyncio.Event()

    async def run(job: ClaimedJob) -> None:
        nonlocal done, in_flight
        try:
            await driver.ack(job.id, job.ref, duration_ms=0)
            done += 1
            if done >= n:
                finished.set()
        finally:
            in_flight -= 1
            free.release()
            kick.set()

    started = time.perf_counter()
    tasks: set[asyncio.Task[None]] = set()
    while not finished.is_set():
        room = SLOTS - in_flight
        if room == 0:
            kick.clear()
            await kick.wait()
            continue
        jobs = await driver.claim(ClaimOptions(queues=[QUEUE], limit=room, worker_id="bench"))
        if not jobs:
            if in_flight == 0 and done < n:
                await asyncio.sleep(0.001)
            else:
                kick.clear()
                await kick.wait()
            continue
        for job in jobs:
            await free.acquire()
            in_flight += 1
            task = asyncio.create_task(run(job))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    elapsed = time.perf_counter() - started
    await asyncio.gather(*tasks)
    return n / elapsed


async def drain_single_claimers(driver: PostgresDriver, n: int) -> float:
    """16 independent claimers, each claiming one row and acking it."""
    done = 0

    async def claimer(index: int) -> None:
        nonlocal done
        options = ClaimOptions(queues=[QUEUE], limit=1, worker_id=f"bench-{index}")
        while done < n:
            jobs = await driver.claim(options)
            if not jobs:
                if done >= n:
                    return
                await asyncio.sleep(0.001)
                continue
            for job in jobs:
                await driver.ack(job.id, job.ref, duration_ms=0)
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(claimer(i) for i in range(SLOTS)))
    return n / (time.perf_counter() - started)


async def add_history(pool: asyncpg.Pool[Any], rows: int) -> None:
    """``rows`` finished jobs, written straight into x_jobs (what a busy month leaves)."""
    await pool.execute(
        """
        insert into x_jobs (id, run_id, name, queue, state, input, idempotency_key, attempt,
                            max_attempts, claim, claimed_by, run_at, created_at, updated_at,
                            finished_at)
        select 'h' || g, 'hr' || g, 'noop', $1, 'done', '{"seq": 0}', 'hk' || g, 1, 3, 1, 'old',
               now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
               now() - interval '2 days'
          from generate_series(1, $2::int) g
        """,
        QUEUE,
        rows,
    )
    await pool.execute("vacuum analyze x_jobs")


async def reset_queue(pool: asyncpg.Pool[Any]) -> None:
    await pool.execute("delete from x_jobs where state <> 'done' or id not like 'h%'")
    await pool.execute("vacuum analyze x_jobs")


async def drains(pool: asyncpg.Pool[Any], driver: PostgresDriver) -> tuple[float, float]:
    await reset_queue(pool)
    await enqueue_batch(driver, N, offset=10_000_000)
    worker = await drain_worker_style(driver, N)
    await reset_queue(pool)
    await enqueue_batch(driver, N, offset=20_000_000)
    single = await drain_single_claimers(driver, N)
    return worker, single


async def main() -> None:
    await admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    await admin(f'CREATE DATABASE "{DB}"')
    conn = await asyncpg.connect(f"{PG}/{DB}")
    try:
        await migrate(conn)
    finally:
        await conn.close()
    pool = await postgres_pool(f"{PG}/{DB}", min_size=SLOTS + 2, max_size=SLOTS + 4)
    driver = postgres_driver(pool)
    try:
        single = await enqueue_single(driver, SINGLE_N)
        await reset_queue(pool)
        batch = await enqueue_batch(driver, N)
        await reset_queue(pool)
        drain, drain_single = await drains(pool, driver)
        await add_history(pool, HISTORY)
        drain_h, drain_single_h = await drains(pool, driver)
    finally:
        await driver.close()
        await pool.close()
        await admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    figures = {
        "bench": "pg_driver_micro",
        "n": N,
        "single_n": SINGLE_N,
        "history_rows": HISTORY,
        "slots": SLOTS,
        "enqueue_single_per_s": round(single),
        "enqueue_batch_per_s": round(batch),
        "drain_per_s": round(drain),
        "drain_per_s_with_history": round(drain_h),
        "drain_single_claimers_per_s": round(drain_single),
        "drain_single_claimers_per_s_with_history": round(drain_single_h),
        "history_slowdown": round(1 - drain_h / drain, 3),
    }
    sys.stdout.write(orjson.dumps(figures).decode() + "\n")


if __name__ == "__main__":
    asyncio.run(main())
