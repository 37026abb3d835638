"""Issue 38's queue controls under load, on Postgres: prints ONE JSON line.

    /work/venv/bin/python bench/queue_controls.py

The debounce burst: ``BENCH_QC_BURST`` (default 10,000) enqueues sent at once over
``BENCH_QC_KEYS`` (default 100) idempotency keys of a job declared with a debounce, each
through the driver's one controlled statement (``sql/queries/enqueue_controlled.sql``) on a pool
of ``BENCH_QC_CONNECTIONS`` (default 16) connections. The issue's bar is exact: the burst makes
one run per key (``debounce_runs`` == keys), whatever the interleaving, and each key's run holds
the input of one of its own enqueues. ``debounce_s`` is the burst's wall time, a figure to
read, not a bar.

The drain with and without priorities (issue 38 item 1): ``BENCH_QC_DRAIN`` (default 20,000)
no-op jobs enqueued first (``enqueue_many``, 1,000 a statement), then drained by ONE worker in
this process (``BENCH_QC_SLOTS``, default 16 slots, claiming ahead as ``ujobs worker`` does) on
the pool ``ujobs worker`` builds, from ``start()`` to the last settle: once with every job at
priority 0, once with the same jobs spread over the ten priorities (job ``n`` at ``n % 10``, so
every claim walks the bands). ``BENCH_QC_ROUNDS`` (default 5) rounds, each a drain without
and one with, in turn first (the machine's drift then falls on both alike), the table emptied
before each; ``ratios.drain_with_priorities_vs_without`` is the median of the rounds' ratios
(with / without, jobs per second), the issue's bar at least 0.95.
The drain with priorities also checks its hand-out order: the worker's claims, in order, never
hand out a run of a lower priority before one of a higher priority that was due at that claim
(``priority_order_kept``; with claim-ahead, runs already buffered are not re-sorted, so the
check is per claim).

It uses the database ``BENCH_QC_DB`` (default ``bench_queue_controls``), dropped and created anew.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_db import fresh_database

from ujobs import job, t
from ujobs.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.execution.run import Run
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.services.config.variables import CLAIM_AHEAD_PER_SLOT
from ujobs.worker import job_worker

DB_NAME = os.environ.get("BENCH_QC_DB", "bench_queue_controls")
BURST = int(os.environ.get("BENCH_QC_BURST", "10000"))
KEYS = int(os.environ.get("BENCH_QC_KEYS", "100"))
CONNECTIONS = int(os.environ.get("BENCH_QC_CONNECTIONS", "16"))
DEBOUNCE_MS = 60_000
"""Longer than the burst: no run may start (and free its key) before the burst is over."""
DRAIN = int(os.environ.get("BENCH_QC_DRAIN", "20000"))
SLOTS = int(os.environ.get("BENCH_QC_SLOTS", "16"))
ROUNDS = int(os.environ.get("BENCH_QC_ROUNDS", "5"))
PRIORITY_BAR = 0.95


@job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"noop:{i.n}", tenant="none")
async def noop(run: Run[Any]) -> None:
    """Does nothing: the figure is the queue's cost per job."""


class ClaimLog:
    """The priorities of each claim's rows, in hand-out order, recorded around the driver's
    ``claim`` (a bench's probe, not an API)."""

    def __init__(self, driver: PostgresDriver) -> None:
        self.claims: list[list[int]] = []
        claim = driver.claim

        async def logged(options: ClaimOptions) -> list[ClaimedJob]:
            got = await claim(options)
            if got:
                self.claims.append([j.priority for j in got])
            return got

        driver.claim = logged  # type: ignore[method-assign]

    def order_kept(self) -> bool:
        """Every claim handed out its rows by priority, and no later claim handed out a
        higher priority than an earlier one left waiting (all the jobs were due from the
        start, so a claim that took priority p found nothing due above it)."""
        floor = 0
        for priorities in self.claims:
            if priorities != sorted(priorities) or priorities[0] < floor:
                return False
            floor = priorities[-1]
        return True


async def drain(dsn: str, n: int, *, priorities: bool) -> dict[str, Any]:
    """Empty the table, enqueue ``n`` no-op jobs (spread over the ten priorities when
    ``priorities``, else all at 0) and drain them with one worker; its figures."""
    pool = await postgres_pool(dsn, min_size=4, max_size=8)
    try:
        await pool.execute("truncate x_jobs")
        driver = postgres_driver(pool)
        for start in range(0, n, 1_000):
            await driver.enqueue_many(
                [
                    noop.request({"n": i}, priority=i % 10 if priorities else 0)
                    for i in range(start, min(n, start + 1_000))
                ]
            )
        await pool.execute("analyze x_jobs")
        log = ClaimLog(driver)
        registry = Registry()
        registry.register_job(noop)
        worker = job_worker(
            driver=driver,
            context=None,
            registry=registry,
            concurrency=SLOTS,
            claim_ahead=CLAIM_AHEAD_PER_SLOT * SLOTS,
            metrics=JobMetrics(CollectorRegistry()),
            lifecycle=Lifecycle(),
            close_driver=False,
        )
        began = time.perf_counter()
        await worker.start()
        while worker.runner.counters.settled < n:
            await asyncio.sleep(0.002)
        seconds = time.perf_counter() - began
        await worker.stop()
        left = await pool.fetchval("select count(*) from x_jobs where state <> 'done'")
    finally:
        await pool.close()
    return {
        "jobs_per_s": round(n / seconds, 1),
        "seconds": round(seconds, 3),
        "not_done": left,
        "claims": len(log.claims),
        "order_kept": log.order_kept(),
    }


async def drains(dsn: str, n: int, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of a drain without priorities and one with (in turn first: round 0
    without first, round 1 with first, ...); the median ratio."""
    taken: list[dict[str, Any]] = []
    for index in range(rounds):
        if index % 2 == 0:
            without = await drain(dsn, n, priorities=False)
            with_ = await drain(dsn, n, priorities=True)
        else:
            with_ = await drain(dsn, n, priorities=True)
            without = await drain(dsn, n, priorities=False)
        taken.append(
            {
                "without_per_s": without["jobs_per_s"],
                "with_per_s": with_["jobs_per_s"],
                "ratio": round(with_["jobs_per_s"] / without["jobs_per_s"], 3),
                "not_done": without["not_done"] + with_["not_done"],
                "order_kept": with_["order_kept"],
                "claims_with": with_["claims"],
            }
        )
    ratio = statistics.median(r["ratio"] for r in taken)
    return {
        "drain_jobs": n,
        "drain_slots": SLOTS,
        "drain_rounds": taken,
        "drain_not_done": sum(r["not_done"] for r in taken),
        "priority_order_kept": all(r["order_kept"] for r in taken),
        "ratios": {"drain_with_priorities_vs_without": ratio},
        "targets": {
            "drain_with_priorities_vs_without": {
                "at_least": PRIORITY_BAR,
                "value": ratio,
                "met": ratio >= PRIORITY_BAR,
            }
        },
    }


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
    drained = await drains(dsn, DRAIN, ROUNDS)
    return {"bench": "queue_controls", **figures, **drained}


def main() -> None:
    print(json.dumps(asyncio.run(measure())), flush=True)


if __name__ == "__main__":
    main()
