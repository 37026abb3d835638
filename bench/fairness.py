"""Issue 41's tenant-fair claims under load, on Postgres: prints ONE JSON line (the last).

    /work/wt-fairness/.venv/bin/python bench/fairness.py

One worker in this process, as ``ujobs worker`` runs on one queue: 16 slots, claim-ahead as
its default (``CLAIM_AHEAD_PER_SLOT`` rows a slot at most, the buffer following the pace),
the ``postgres_pool`` the services build, a no-op body that notes when it started. Each
scenario starts from an empty ``x_jobs`` (and no weights, no cursor), its jobs enqueued
before the worker starts (``enqueue_many``, 1,000 a statement):

- ``quiet_tenant_wait_ms``: tenant ``flood`` has ``BENCH_FAIR_BACKLOG`` (100,000) jobs, then
  ``BENCH_FAIR_QUIET`` (10) quiet tenants enqueue one job each after it; the figure is the
  LAST quiet job's start, in ms after the worker's ``start()`` (issue 41's bar: 100 ms).
  ``quiet_tenant_wait_ms_fifo`` is the same with the queue strict, for contrast (the worker is
  stopped once every quiet job started, or after ``BENCH_FAIR_FIFO_WAIT_S`` (60 s): then the
  figure is a lower bound and ``quiet_fifo_capped`` says so).
- ``ratios.fair_vs_fifo_drain``: ``BENCH_FAIR_DRAIN`` (50,000) jobs of ONE tenant drained fair
  and strict; the ratio is strict seconds / fair seconds (1.0: fairness costs nothing; the bar
  is 0.9).
- ``ratios.fair_vs_fifo_drain_10k_tenants``: ``BENCH_FAIR_SPREAD`` (100,000) jobs over
  ``BENCH_FAIR_TENANTS`` (10,000) tenants, enqueued tenant after tenant, drained fair and
  strict (bar: 0.8).
- ``weight_share_error``: tenants ``heavy`` (weight 3) and ``light`` (weight 1),
  ``BENCH_FAIR_WEIGHTED`` (20,000) jobs each; of the first ``BENCH_FAIR_WEIGHTED`` jobs started
  (both tenants still have work throughout), heavy's count over light's against 3:
  ``|ratio / 3 - 1|`` (bar: 0.10).

It uses the database ``BENCH_FAIR_DB`` (default ``bench_fairness``), dropped and created anew.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_db import drop_database, fresh_database

from ujobs import job, t
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.execution.run import Run
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.services.config.variables import CLAIM_AHEAD_PER_SLOT
from ujobs.worker import job_worker

DB_NAME = os.environ.get("BENCH_FAIR_DB", "bench_fairness")
BACKLOG = int(os.environ.get("BENCH_FAIR_BACKLOG", "100000"))
QUIET = int(os.environ.get("BENCH_FAIR_QUIET", "10"))
DRAIN = int(os.environ.get("BENCH_FAIR_DRAIN", "50000"))
SPREAD = int(os.environ.get("BENCH_FAIR_SPREAD", "100000"))
TENANTS = int(os.environ.get("BENCH_FAIR_TENANTS", "10000"))
WEIGHTED = int(os.environ.get("BENCH_FAIR_WEIGHTED", "20000"))
FIFO_WAIT_S = float(os.environ.get("BENCH_FAIR_FIFO_WAIT_S", "60"))
SLOTS = 16
HEAVY_WEIGHT = 3


@dataclass
class Starts:
    """Who started, in order, and when (``time.perf_counter``)."""

    tenants: list[str] = field(default_factory=list)
    at: list[float] = field(default_factory=list)

    def note(self, tenant: str) -> None:
        self.tenants.append(tenant)
        self.at.append(time.perf_counter())


STARTS = Starts()


@job(
    input=t.object(org=t.string, n=t.number.int()),
    idempotency_key=lambda i: f"fair:{i.org}:{i.n}",
    tenant=lambda i: i.org,
)
async def fair_noop(run: Run[Any]) -> None:
    """Notes its start: the figures are the order and time jobs are handed out."""
    STARTS.note(run.input.org)


async def reset(pool: asyncpg.Pool[Any]) -> None:
    await pool.execute("truncate x_jobs, x_fair_cursors, x_tenant_weights")
    STARTS.tenants.clear()
    STARTS.at.clear()


async def enqueue(driver: PostgresDriver, jobs: Sequence[tuple[str, int]]) -> None:
    for start in range(0, len(jobs), 1_000):
        await driver.enqueue_many(
            [fair_noop.request({"org": o, "n": n}) for o, n in jobs[start : start + 1_000]]
        )


async def run_worker(
    pool: asyncpg.Pool[Any], *, fair: bool, until: Any, cap_s: float
) -> tuple[float, float]:
    """A worker on ``pool`` until ``until()`` is true (or ``cap_s`` passed); answers when it
    started (``time.perf_counter``) and the seconds from then to the end. ``analyze`` first,
    as autovacuum would have by then, outside the timing."""
    await pool.execute("analyze x_jobs")
    reg = Registry()
    reg.register_job(fair_noop)
    driver = postgres_driver(pool)
    worker = job_worker(
        driver=driver,
        context=None,
        registry=reg,
        concurrency=SLOTS,
        claim_ahead=CLAIM_AHEAD_PER_SLOT * SLOTS,
        fair=fair,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )
    began = time.perf_counter()
    await worker.start()
    try:
        while not until() and time.perf_counter() - began < cap_s:
            await asyncio.sleep(0.002)
        return began, time.perf_counter() - began
    finally:
        await worker.stop()
        await driver.close()


async def quiet_wait(
    pool: asyncpg.Pool[Any], backlog: int, quiet: int, *, fair: bool, cap_s: float = 600
) -> dict[str, Any]:
    """The flood then the quiet tenants; the last quiet job's start after the worker's."""
    await reset(pool)
    driver = postgres_driver(pool)
    try:
        await enqueue(driver, [("flood", n) for n in range(backlog)])
        await enqueue(driver, [(f"quiet-{q:02d}", 0) for q in range(quiet)])
    finally:
        await driver.close()

    def all_quiet() -> bool:
        return sum(tenant != "flood" for tenant in STARTS.tenants) >= quiet

    began, seconds = await run_worker(pool, fair=fair, until=all_quiet, cap_s=cap_s)
    quiet_at = [
        at for tenant, at in zip(STARTS.tenants, STARTS.at, strict=True) if tenant != "flood"
    ]
    done = len(quiet_at) >= quiet
    last = max(quiet_at) - began if done else seconds
    return {
        "wait_ms": round(last * 1000, 1),
        "capped": not done,
        "place": max(i for i, tenant in enumerate(STARTS.tenants) if tenant != "flood") + 1
        if done
        else None,
    }


async def drain(pool: asyncpg.Pool[Any], jobs: Sequence[tuple[str, int]], *, fair: bool) -> float:
    """Seconds to drain ``jobs`` (every one started)."""
    await reset(pool)
    driver = postgres_driver(pool)
    try:
        await enqueue(driver, jobs)
    finally:
        await driver.close()
    _, seconds = await run_worker(
        pool, fair=fair, until=lambda: len(STARTS.tenants) >= len(jobs), cap_s=3_600
    )
    left = await pool.fetchval("select count(*) from x_jobs where state <> 'done'")
    if len(STARTS.tenants) != len(jobs) or left:
        raise RuntimeError(f"the drain left {left} rows; {len(STARTS.tenants)} started")
    return seconds


async def weight_share(pool: asyncpg.Pool[Any], each: int) -> dict[str, Any]:
    """Heavy (weight 3) and light, ``each`` jobs apiece, interleaved in enqueue order; the
    share of the first ``each`` starts."""
    await reset(pool)
    driver = postgres_driver(pool)
    try:
        await driver.weights.set_weight("heavy", HEAVY_WEIGHT)
        await enqueue(driver, [(o, n) for n in range(each) for o in ("heavy", "light")])
    finally:
        await driver.close()
    await run_worker(pool, fair=True, until=lambda: len(STARTS.tenants) >= each, cap_s=3_600)
    counted = Counter(STARTS.tenants[:each])
    ratio = counted["heavy"] / max(1, counted["light"])
    return {
        "heavy": counted["heavy"],
        "light": counted["light"],
        "error": round(abs(ratio / HEAVY_WEIGHT - 1), 4),
    }


def spread(jobs: int, tenants: int) -> list[tuple[str, int]]:
    """``jobs`` jobs over ``tenants`` tenants, enqueued tenant after tenant (each tenant's
    run back to back: the FIFO order serves one tenant at a time)."""
    per = max(1, jobs // tenants)
    return [(f"t{k:05d}", n) for k in range(tenants) for n in range(per)]


async def measure(pool: asyncpg.Pool[Any]) -> dict[str, Any]:
    fair_quiet = await quiet_wait(pool, BACKLOG, QUIET, fair=True)
    fifo_quiet = await quiet_wait(pool, BACKLOG, QUIET, fair=False, cap_s=FIFO_WAIT_S)
    one = [("solo", n) for n in range(DRAIN)]
    one_fair = await drain(pool, one, fair=True)
    one_fifo = await drain(pool, one, fair=False)
    many = spread(SPREAD, TENANTS)
    many_fair = await drain(pool, many, fair=True)
    many_fifo = await drain(pool, many, fair=False)
    weighted = await weight_share(pool, WEIGHTED)
    return {
        "bench": "fairness",
        "driver": "postgres",
        "quiet_tenant_wait_ms": fair_quiet["wait_ms"],
        "quiet_tenant_place": fair_quiet["place"],
        "quiet_tenant_wait_ms_fifo": fifo_quiet["wait_ms"],
        "quiet_fifo_capped": fifo_quiet["capped"],
        "backlog": BACKLOG,
        "quiet_tenants": QUIET,
        "drain_one_tenant_s": {"fair": round(one_fair, 3), "fifo": round(one_fifo, 3)},
        "drain_many_tenants_s": {"fair": round(many_fair, 3), "fifo": round(many_fifo, 3)},
        "drain_jobs": {"one_tenant": len(one), "many_tenants": len(many), "tenants": TENANTS},
        "weight_share": weighted,
        "weight_share_error": weighted["error"],
        "ratios": {
            "fair_vs_fifo_drain": round(one_fifo / one_fair, 3),
            "fair_vs_fifo_drain_10k_tenants": round(many_fifo / many_fair, 3),
        },
    }


async def main() -> None:
    dsn = await fresh_database(DB_NAME)
    pool = await postgres_pool(dsn, min_size=4, max_size=8)
    try:
        figures = await measure(pool)
    finally:
        await pool.close()
        await drop_database(DB_NAME)
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
