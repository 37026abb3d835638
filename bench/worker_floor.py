"""The floor under the worker's CPU per job: the least a Python asyncio worker on asyncpg pays
for a no-op job on this machine, measured beside ``bench/worker_drain_micro.py`` in the same run.

What it keeps of a real worker is what no worker can drop: a claim of many rows in one
statement (``FOR UPDATE SKIP LOCKED``, rows decoded by asyncpg), the job's input decoded
(orjson), ONE task per job running the body (a no-op coroutine), a slot pool that starts the
next row as one ends, and acks coalesced into one statement while one is in flight. What it
drops is everything a job queue promises: no lease, no fence, no heartbeat, no step store, no
retry verdict, no metrics, no tracing, no second task to abandon a body that swallows its
cancel. Its table is a bare one (``id``, ``state``, ``input``), so the figure is the process's
asyncio and driver cost, not Postgres's.

    python bench/worker_floor.py             # BENCH_N=20000, BENCH_SLOTS=16: one JSON line
    BENCH_CALLGRIND=1 BENCH_N=2000 valgrind --tool=callgrind --instr-atstart=no \
        python bench/worker_floor.py         # instructions of the drain alone ("Collected")

Under callgrind (``BENCH_CALLGRIND=1``, the collection off at start) ``instrument()`` counts the
drain alone: an instruction count does not move with the machine's load, so it compares two
trees, or the worker with this floor, where CPU seconds on a shared 2-core VM cannot.

``floor_drain()`` is what ``worker_drain_micro.py`` calls for its ``floor_cpu_ms_per_job``.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import time
import uuid
from typing import Any

import asyncpg
import orjson

ADMIN = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

SCHEMA = """
create table floor_jobs (id bigint generated always as identity primary key,
                         state text not null default 'ready', input jsonb not null);
create index floor_jobs_ready_idx on floor_jobs (id) where state = 'ready';
"""
FILL = (
    "insert into floor_jobs (input) select jsonb_build_object('n', g) from generate_series(1, $1) g"
)
CLAIM = """
update floor_jobs j set state = 'running'
  from (select id from floor_jobs where state = 'ready' order by id
         limit $1 for update skip locked) c
 where j.id = c.id
returning j.id, j.input
"""
ACK = "update floor_jobs set state = 'done' where id = any($1::bigint[])"
CLAIM_BATCH = 64


async def _noop(_: Any) -> None:
    """The body: nothing."""


class _Floor:
    """One process draining ``floor_jobs``: a claim loop, a task per job, coalesced acks."""

    def __init__(self, pool: asyncpg.Pool[Any], n: int, slots: int) -> None:
        self.pool = pool
        self.n = n
        self.free = slots
        self.done = 0
        self.acks: list[int] = []
        self.acking: asyncio.Task[None] | None = None
        self.kick = asyncio.Event()
        self.finished = asyncio.Event()
        self.buffer: list[tuple[int, str]] = []
        self.running: set[asyncio.Task[None]] = set()

    async def claim_loop(self) -> None:
        while self.done + len(self.buffer) < self.n:
            if len(self.buffer) < CLAIM_BATCH:
                rows = await self.pool.fetch(CLAIM, CLAIM_BATCH)
                self.buffer.extend((r["id"], r["input"]) for r in rows)
                self.start()
                if rows:
                    continue
            self.kick.clear()
            await self.kick.wait()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        while self.free > 0 and self.buffer:
            self.free -= 1
            job_id, raw = self.buffer.pop(0)
            task = loop.create_task(self.run(job_id, raw))
            self.running.add(task)  # held, as a worker holds its runs
            task.add_done_callback(self.running.discard)

    async def run(self, job_id: int, raw: str) -> None:
        await _noop(orjson.loads(raw))
        self.free += 1
        self.start()
        self.kick.set()
        self.acks.append(job_id)
        if self.acking is None or self.acking.done():
            self.acking = asyncio.get_running_loop().create_task(self.flush())

    async def flush(self) -> None:
        while self.acks:
            batch, self.acks = self.acks, []
            await self.pool.execute(ACK, batch)
            self.done += len(batch)
        if self.done >= self.n:
            self.finished.set()


def instrument(state: str) -> None:
    """``callgrind_control -i on|off`` on this process when ``BENCH_CALLGRIND=1``."""
    if os.environ.get("BENCH_CALLGRIND") == "1":
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True)


async def floor_drain(admin_dsn: str, n: int, slots: int) -> dict[str, float]:
    """Drain ``n`` no-op rows of a bare table in a throwaway database; answers jobs/s and the
    process's CPU per job (user + system, ms)."""
    name = f"ujobs_floor_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    head = admin_dsn.rpartition("/")[0]
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        pool = await asyncpg.create_pool(f"{head}/{name}", min_size=4, max_size=8)
        try:
            await pool.execute(SCHEMA)
            await pool.execute(FILL, n)
            await pool.execute("analyze floor_jobs")
            floor = _Floor(pool, n, slots)
            instrument("on")
            began, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            claimer = asyncio.get_running_loop().create_task(floor.claim_loop())
            await floor.finished.wait()
            seconds = time.perf_counter() - began
            after = resource.getrusage(resource.RUSAGE_SELF)
            instrument("off")
            claimer.cancel()
            cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
        finally:
            await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return {"jobs_per_s": round(n / seconds, 1), "cpu_ms_per_job": round(cpu * 1000 / n, 4)}


async def main() -> None:
    n = int(os.environ.get("BENCH_N", "20000"))
    slots = int(os.environ.get("BENCH_SLOTS", "16"))
    figures = await floor_drain(ADMIN, n, slots)
    print(orjson.dumps({"bench": "worker_floor", "jobs": n, "slots": slots, **figures}).decode())


if __name__ == "__main__":
    asyncio.run(main())
