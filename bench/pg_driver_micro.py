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

from bench_db import drop_database, fresh_database  # beside this script

from ujobs.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.pool import postgres_pool

DB = os.environ.get("BENCH_DB", "ujobs_bench_micro")
N = int(os.environ.get("BENCH_N", "20000"))
SINGLE_N = int(os.environ.get("BENCH_SINGLE_N", "5000"))
HISTORY = int(os.environ.get("BENCH_HISTORY", "1000000"))
REPS = int(os.environ.get("BENCH_REPS", "3"))
SLOTS = 16
BATCH = 500
QUEUE = "bench"


def note(what: str) -> None:
    """Progress on stderr (the JSON line is the only stdout)."""
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {what}\n")


def request(i: int) -> EnqueueRequest:
    return EnqueueRequest(name="noop", input={"seq": i}, idempotency_key=f"k{i}", queue=QUEUE)


async def enqueue_single(driver: PostgresDriver, n: int, offset: int = 0) -> float:
    started = time.perf_counter()
    for i in range(n):
        await driver.enqueue(request(-1 - offset - i))
    return n / (time.perf_counter() - started)


async def enqueue_batch(driver: PostgresDriver, n: int, offset: int = 0) -> float:
    started = time.perf_counter()
    for lo in range(0, n, BATCH):
        await driver.enqueue_many([request(offset + i) for i in range(lo, min(n, lo + BATCH))])
    return n / (time.perf_counter() - started)


def backend_cpu_s(pids: list[int]) -> float:
    """User+system CPU seconds the server processes ``pids`` have used (a local server only;
    0.0 when /proc cannot show them). Less sensitive to other work on the machine than wall
    time, so it is the figure to compare with and without history."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def backend_pids(pool: asyncpg.Pool[Any]) -> list[int]:
    rows = await pool.fetch("select pid from pg_stat_activity where datname = current_database()")
    return [r["pid"] for r in rows]


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
    """Back to the history rows only, vacuumed (this server may run without autovacuum)."""
    await pool.execute("delete from x_jobs where state <> 'done' or id not like 'h%'")
    await pool.execute("vacuum analyze x_jobs")


DB_CPU_US: list[float] = []


async def drains(
    pool: asyncpg.Pool[Any], driver: PostgresDriver
) -> tuple[list[float], list[float]]:
    worker: list[float] = []
    single: list[float] = []
    for rep in range(REPS):
        await reset_queue(pool)
        await enqueue_batch(driver, N, offset=10_000_000 + rep * N)
        pids = await backend_pids(pool)
        cpu_before = backend_cpu_s(pids)
        worker.append(await drain_worker_style(driver, N))
        DB_CPU_US.append(1e6 * (backend_cpu_s(pids) - cpu_before) / N)
        note(f"drain worker-style {worker[-1]:.0f}/s, database {DB_CPU_US[-1]:.0f} us/job")
        await reset_queue(pool)
        await enqueue_batch(driver, N, offset=20_000_000 + rep * N)
        single.append(await drain_single_claimers(driver, N))
        note(f"drain single claimers {single[-1]:.0f}/s")
    return worker, single


async def main() -> None:
    dsn = await fresh_database(DB)
    pool = await postgres_pool(dsn, min_size=SLOTS + 2, max_size=SLOTS + 4)
    driver = postgres_driver(pool)
    try:
        single: list[float] = []
        batch: list[float] = []
        for rep in range(REPS):
            await reset_queue(pool)
            single.append(await enqueue_single(driver, SINGLE_N, offset=rep * SINGLE_N))
            note(f"enqueue single {single[-1]:.0f}/s")
            await reset_queue(pool)
            batch.append(await enqueue_batch(driver, N, offset=rep * N))
            note(f"enqueue batch {batch[-1]:.0f}/s")
        drain, drain_single = await drains(pool, driver)
        db_cpu = list(DB_CPU_US)
        DB_CPU_US.clear()
        await add_history(pool, HISTORY)
        note(f"{HISTORY} finished rows added")
        drain_h, drain_single_h = await drains(pool, driver)
    finally:
        await driver.close()
        await pool.close()
        await drop_database(DB)
    figures = {
        "bench": "pg_driver_micro",
        "n": N,
        "single_n": SINGLE_N,
        "history_rows": HISTORY,
        "slots": SLOTS,
        "reps": REPS,
        "figure": "best of reps (a shared 2-core machine: the slow reps are other work)",
        "enqueue_single_per_s": round(max(single)),
        "enqueue_batch_per_s": round(max(batch)),
        "drain_per_s": round(max(drain)),
        "drain_per_s_with_history": round(max(drain_h)),
        "drain_single_claimers_per_s": round(max(drain_single)),
        "drain_single_claimers_per_s_with_history": round(max(drain_single_h)),
        "history_slowdown": round(1 - max(drain_h) / max(drain), 3),
        "drain_db_cpu_us_per_job": round(min(db_cpu)) if db_cpu else None,
        "drain_db_cpu_us_per_job_with_history": round(min(DB_CPU_US)) if DB_CPU_US else None,
        "reps_per_s": {
            "enqueue_single": [round(x) for x in single],
            "enqueue_batch": [round(x) for x in batch],
            "drain": [round(x) for x in drain],
            "drain_with_history": [round(x) for x in drain_h],
        },
    }
    sys.stdout.write(orjson.dumps(figures).decode() + "\n")


if __name__ == "__main__":
    asyncio.run(main())
