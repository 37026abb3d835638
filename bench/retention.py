"""Retention and backfills on Postgres, one JSON line:

    python bench/retention.py
    BENCH_PURGE_N=100000 BENCH_DRAIN_N=5000 python bench/retention.py     # a quick run

* ``purge_rows_per_s``: ``x_jobs`` rows the built-in jobs target deletes a second (each with its
  step, deleted in the same statement), over ``BENCH_PURGE_N`` (1,000,000) finished runs 100-120
  days old, swept by back-to-back passes of the default shape (batches of 1,000, skip locked).
  Two stretches of the sweep overlap drains below, on purpose; its seconds count only while it
  sweeps.
* ``drain_per_s_alone`` and ``drain_per_s_during_purge``: one worker (16 slots, claim-ahead as
  ``ujobs worker``) draining ``BENCH_DRAIN_N`` (20,000) no-op jobs — the drain of
  ``bench/worker_drain_micro.py`` — over that history, in four halves taking turns: alone,
  beside the sweep, beside the sweep, alone, after an uncounted warm-up drain of a fifth of a
  half (the first drain reads a cold table; the sweep pauses between its turns; the machine's
  load drifts). ``ratios.drain_during_purge_vs_alone`` is the second figure over the first.
* ``backfill_rows_per_s``: a backfill at the default rate (5 batches a second, 1,000 rows a
  batch) over ``BENCH_BACKFILL_ROWS`` (50,000) rows of a table, one UPDATE a page.
* ``backfill_rate_error``: |measured - asked| / asked for ``rate=200`` (pages of
  ``BENCH_FAST_BATCH``, 10 rows), the measured rate being the pages handled over the time from
  the first page to the last (the worker's start and the claim are not the throttle's). Beside
  it, the same at ``rate=50`` and with no wait at all (``backfill_unthrottled_batches_per_s``:
  what the batches can achieve; a rate above it produces no wait), and
  ``backfill_rate_shortfall_vs_ceiling``: how far the rate=200 pass fell short of the lower of
  the rate asked and that ceiling (the throttle's own share: on a loaded machine the pages
  alone can be slower than 200 a second, and no pause can make them faster).
  These three passes read the first ``BENCH_CADENCE_ROWS`` (5,000) rows, taking turns for
  ``BENCH_CADENCE_ROUNDS`` (3) rounds; each figure is the median of its rounds.
* ``BENCH_PURGE_REST`` / ``BENCH_PURGE_BUSY_REST`` / ``BENCH_PURGE_BATCH``: the jobs target's
  ``rest_ratio`` (1), ``busy_rest_ratio`` (9) and ``batch_size`` (1,000), to explore;
  ``purge_busy_rests`` counts the rests the sweep took at its busy pace (the drain beside it).

Everything runs in one throwaway database (created from ``TEST_DATABASE_URL``'s server,
migrated, dropped), in this process, on the pool ``ujobs worker`` builds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_history import HISTORY_SQL  # beside this script: on sys.path when it runs

from ujobs import job, t
from ujobs.backfill import KeysetSource, backfill, keyset
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.job import JobHandle
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.retention import jobs_purge_target
from ujobs.services.config.variables import CLAIM_AHEAD_PER_SLOT
from ujobs.services.runtime.gc_tuning import DEFAULT_GC_THRESHOLD, tune_gc
from ujobs.worker import job_worker

ADMIN = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
DAY_MS = 86_400_000
SLOTS = 16

_STEPS = (
    "insert into x_job_steps (run_id, tenant_id, name, output, started_at, finished_at)"
    " select j.run_id, coalesce(j.tenant_id, ''), 'work', '1', j.finished_at, j.finished_at"
    " from x_jobs j"
    " where j.name = 'history'"
)
_POSTS = "insert into bench_posts (id) select generate_series(1, $1::int)"
_PAGE = (
    "select id from bench_posts where id > coalesce($1::int, 0) and id <= $3 order by id limit $2"
)
_WRITE = "update bench_posts set slug = 'post-' || id where id = any($1::int[])"


@job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"noop:{i.n}", tenant="none")
async def noop(run: Run[Any]) -> None:
    """Does nothing: the figure is the queue's cost per job."""


def worker_for(driver: PostgresDriver, *handles: JobHandle[Any]) -> Any:
    registry = Registry()
    for handle in handles:
        registry.register_job(handle)
    return job_worker(
        driver=driver,
        context=None,
        registry=registry,
        concurrency=SLOTS,
        claim_ahead=CLAIM_AHEAD_PER_SLOT * SLOTS,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )


async def drain(driver: PostgresDriver, first: int, n: int) -> float:
    """Enqueue ``n`` no-op jobs, then drain them with one worker; answers the seconds."""
    for start in range(first, first + n, 1_000):
        await driver.enqueue_many(
            [noop.request({"n": i}) for i in range(start, min(first + n, start + 1_000))]
        )
    worker = worker_for(driver, noop)
    began = time.perf_counter()
    await worker.start()
    while worker.runner.counters.settled < n:
        await asyncio.sleep(0.002)
    seconds = time.perf_counter() - began
    await worker.stop()
    return seconds


class Sweep:
    """Back-to-back passes of the default jobs target while ``on`` is set, until the history
    is gone; ``seconds`` counts only the time it was sweeping."""

    def __init__(self, pool: Any, driver: PostgresDriver, history: int) -> None:
        rest = float(os.environ.get("BENCH_PURGE_REST", "1"))
        busy_rest = float(os.environ.get("BENCH_PURGE_BUSY_REST", "9"))
        batch = int(os.environ.get("BENCH_PURGE_BATCH", "1000"))
        self.target = jobs_purge_target(
            executor=pool, rest_ratio=rest, busy_rest_ratio=busy_rest, batch_size=batch
        )
        self.driver = driver
        self.history = history
        self.on = asyncio.Event()
        self.seconds = 0.0
        self.jobs = 0
        self.busy_rests = 0

    async def run(self) -> None:
        while self.jobs < self.history:
            await self.on.wait()
            began = time.perf_counter()
            await self.target.purge_expired(self.driver.clock.now_ms())
            self.seconds += time.perf_counter() - began
            self.jobs += self.target.last.jobs
            self.busy_rests += self.target.last.busy_rests
            if self.target.last.jobs == 0:
                break


def sweeper(
    pool: Any, name: str, batch: int, rate: float, starts: list[float], upto: int
) -> JobHandle[Any]:
    def source(_ctx: Any) -> KeysetSource:
        async def fetch(after: Any, limit: int) -> list[Any]:
            return list(await pool.fetch(_PAGE, after, limit, upto))

        return keyset(fetch, key="id")

    async def handle(rows: Sequence[Any], _signal: Any) -> None:
        starts.append(time.monotonic())
        await pool.execute(_WRITE, [r["id"] for r in rows])

    return backfill(name=name, tenant="none", source=source, handle=handle, batch=batch, rate=rate)


async def run_backfill(driver: PostgresDriver, handle: JobHandle[Any]) -> tuple[float, int, int]:
    """One pass through a worker; answers (seconds, rows, batches)."""
    enqueued = await driver.enqueue(handle.request({}))
    worker = worker_for(driver, handle)
    began = time.perf_counter()
    await worker.start()
    while worker.runner.counters.settled < 1:
        await asyncio.sleep(0.002)
    seconds = time.perf_counter() - began
    await worker.stop()
    ledger = driver.backfills
    rows = (await ledger.list(name=handle.name))[0].rows_processed
    batches = await driver.pool.fetchval(
        "select count(*) from x_job_steps where run_id = $1", enqueued.run_id
    )
    return seconds, rows, int(batches)


async def main() -> None:
    tune_gc(DEFAULT_GC_THRESHOLD)  # the drain and the sweep run as ``ujobs worker`` runs them
    history = int(os.environ.get("BENCH_PURGE_N", "1000000"))
    drain_n = int(os.environ.get("BENCH_DRAIN_N", "20000"))
    posts = int(os.environ.get("BENCH_BACKFILL_ROWS", "50000"))
    name = f"ujobs_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    head = ADMIN.rpartition("/")[0]
    admin = await asyncpg.connect(ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        setup = await asyncpg.connect(f"{head}/{name}")
        try:
            await migrate(setup)
            first = int(time.time() * 1000) - 120 * DAY_MS
            step = max(20 * DAY_MS // max(history, 1), 1)
            await setup.execute(HISTORY_SQL, "history", "default", first, step, history)
            await setup.execute(_STEPS)
            await setup.execute("create table bench_posts (id int primary key, slug text)")
            await setup.execute(_POSTS, posts)
            await setup.execute("vacuum analyze")
            await setup.execute("checkpoint")
        finally:
            await setup.close()
        pool = await postgres_pool(f"{head}/{name}", min_size=4, max_size=10)
        driver = postgres_driver(pool)
        set_job_driver(driver)

        # A warm-up drain first, uncounted (the first drain reads a cold table); then alone,
        # beside the sweep, beside the sweep, alone: the machine's load drifts, so the two
        # conditions take turns in a mirrored order and the ratio is of their sums.
        sweep = Sweep(pool, driver, history)
        sweeping = asyncio.ensure_future(sweep.run())
        half = drain_n // 2
        await drain(driver, 4 * half, max(1, half // 5))
        alone_s = during_s = 0.0
        for turn in range(4):
            beside = turn in (1, 2)
            if beside:
                sweep.on.set()
            seconds = await drain(driver, turn * half, half)
            sweep.on.clear()
            if beside:
                during_s += seconds
            else:
                alone_s += seconds
        alone, during = 2 * half / alone_s, 2 * half / during_s
        sweep.on.set()
        await sweeping
        purge_s, purged = sweep.seconds, sweep.jobs

        default_rate = sweeper(pool, "bench-default", 1_000, 5, [], posts)
        bf_s, bf_rows, _ = await run_backfill(driver, default_rate)
        fast_batch = int(os.environ.get("BENCH_FAST_BATCH", "10"))
        cadence_rows = int(os.environ.get("BENCH_CADENCE_ROWS", "5000"))
        rounds = int(os.environ.get("BENCH_CADENCE_ROUNDS", "3"))
        runs: dict[str, list[float]] = {}
        for n in range(rounds):  # the three passes take turns: the machine's load drifts
            for label, rate in (("unthrottled", 1e9), ("200", 200.0), ("50", 50.0)):
                starts: list[float] = []
                handle = sweeper(pool, f"bench-{label}-{n}", fast_batch, rate, starts, cadence_rows)
                await run_backfill(driver, handle)
                # The pass's cadence: pages handled over the time from the first to the last.
                runs.setdefault(label, []).append((len(starts) - 1) / (starts[-1] - starts[0]))
        cadence = {label: statistics.median(values) for label, values in runs.items()}
        measured = cadence["200"]
        ceiling = min(200.0, cadence["unthrottled"])
        await pool.close()
        ratio = during / alone
        rate_error = abs(measured - 200) / 200
        print(
            orjson.dumps(
                {
                    "bench": "retention",
                    "history_rows": history,
                    "purged_rows": purged,
                    "purge_seconds": round(purge_s, 2),
                    "purge_rows_per_s": round(purged / purge_s, 1),
                    "purge_busy_rests": sweep.busy_rests,
                    "drain_jobs": drain_n,
                    "drain_per_s_alone": round(alone, 1),
                    "drain_per_s_during_purge": round(during, 1),
                    "backfill_rows": bf_rows,
                    "backfill_rows_per_s": round(bf_rows / bf_s, 1),
                    "backfill_rate_asked": 200,
                    "backfill_rate_batch": fast_batch,
                    "backfill_rate_measured": round(measured, 2),
                    "backfill_rate_error": round(rate_error, 4),
                    "backfill_rate_error_at_50": round(abs(cadence["50"] - 50) / 50, 4),
                    "backfill_unthrottled_batches_per_s": round(cadence["unthrottled"], 1),
                    "backfill_rate_shortfall_vs_ceiling": round(
                        max(0.0, ceiling - measured) / ceiling, 4
                    ),
                    "backfill_rate_rounds": {k: [round(x, 1) for x in v] for k, v in runs.items()},
                    "ratios": {"drain_during_purge_vs_alone": round(ratio, 3)},
                    "targets": {
                        "drain_during_purge_vs_alone": ">= 0.9",
                        "backfill_rate_error": "<= 0.05",
                    },
                    "met": {
                        "drain_during_purge_vs_alone": ratio >= 0.9,
                        "backfill_rate_error": rate_error <= 0.05,
                    },
                }
            ).decode()
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main())
