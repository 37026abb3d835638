"""Throughput as the backlog grows: the same figures at 10,000, 100,000 and 1,000,000 rows.
Prints a progress line per phase on stderr and ONE JSON line last on stdout.

    .venv/bin/python bench/backlog_scaling.py
    BENCH_BACKLOG_SIZES=2000,20000 BENCH_BACKLOG_WINDOW=2000 \
        .venv/bin/python bench/backlog_scaling.py

A queue earns its keep on its worst day, with a big backlog (issue 42). Each scenario fills a
backlog fast (``backlog_fill``: one server-side INSERT for Postgres, the driver's batch enqueue
for Redis), then measures, with the backlog in place:

- ``drain_per_s``: the first ``BENCH_BACKLOG_WINDOW`` (40,000) jobs at the head of the
  backlog, run by one in-process ``job_worker`` (16 slots, claim-ahead 48, no-op bodies), as
  ``ujobs worker`` runs them (its pool: ``postgres_pool()``). A bounded window rather than the
  whole million, so one run fits in minutes; the backlog is the window plus ``backlog`` rows
  behind it, so the head is claimed from a table of that size.
- ``enqueue_per_s`` (4,000 single enqueues, one at a time) and ``batch_enqueue_per_s`` (20
  batches of 500: ``enqueue_many``, the COPY) of the same job on a queue nobody drains.
- ``pickup_p50_ms``: 60 jobs enqueued 30 ms apart on a second queue with its own idle worker
  (the Redis wake, as deployed), from the enqueue call to the body's start: what the claim
  costs a fresh job while the backlog sits in the same table.
- Redis only, ``raw_batch_enqueue_per_s``: the same batches written by a bare pipeline of the
  commands the enqueue script makes (``backlog_redis_bound``), one after each of ours, and
  ``keyspace_doubled``: whether the keyspace passed a power of two while the scenario ran
  (Redis then moves every key to a table twice the size, a step on each access, until done).
  ``bounds.raw_batch_enqueue_1m_vs_10k_redis`` is the ceiling the Redis batch ratio is read
  against.
- ``queues_ms``: ``GET /v1/queues``'s body (``ujobs.introspect.inspect_queues``), median of 5.
- Postgres only, the plans behind the figures: the claim's ``EXPLAIN (ANALYZE)`` on the
  worker's session settings (its execution ms, whether it was JIT-compiled, the index its
  head walk used) and the same of the queues read (``stats.sql``), so a figure that misses
  its target shows why.

Scenarios: ``ready`` at each of ``BENCH_BACKLOG_SIZES`` (10,000, 100,000, 1,000,000) on the
Postgres and the Redis drivers; on Postgres also the window in front of 1,000,000 sleeping
(``suspended``, due in a day) rows and of 1,000,000 finished rows (``bench_history``). Then the
outbox relay publishing ``BENCH_BACKLOG_RELAY_WINDOW`` (5,000) rows from 10,000 and from
1,000,000 unpublished ones, and the webhook deliverer (``backlog_webhooks``) delivering 2,000
of 2,000 and of 100,000 deliveries queued for ONE endpoint. Every size compared in a ratio is
measured twice, first to last then back (``both_ways``), each figure the mean of its two runs.

``ratios`` are each figure at the biggest backlog over the same at the smallest (targets:
>= 0.9; ``pickup_p50_ms_1m`` <= 5). ``load_avg`` is the machine's 1-minute load at the start
and the end: the machine is shared, so read the ratios of one line, not figures across runs.
Postgres is ``BENCH_PG`` (a database of its own, dropped after); Redis DB 7 under the key
prefix ``ujobs-backlog`` (that prefix's keys deleted before and after). Runs under the bench
lock. ``BENCH_BACKLOG_DRIVERS`` (default ``postgres,redis``) runs one driver's part alone
(``redis``: the Redis scenarios only, no relay, no webhooks, no curve).
``BENCH_BACKLOG_SVG`` (default ``docs/img/backlog_scaling.svg``) is where the curve is drawn
(``backlog_svg``), ``-`` for nowhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for entry in (str(ROOT), str(ROOT / "bench")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import asyncpg  # noqa: E402
import backlog_svg  # noqa: E402
import backlog_webhooks  # noqa: E402
from backlog_fill import fill_jobs, fill_outbox, settle_tables  # noqa: E402
from backlog_order import both_ways, note  # noqa: E402
from backlog_plans import claim_plan, queues_plan  # noqa: E402
from backlog_redis_bound import keyspace_doubled, raw_batch  # noqa: E402
from bench_db import PG_BASE, drop_database, fresh_database  # noqa: E402
from bench_history import insert_history  # noqa: E402
from harness_run import bench_lock  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from ujobs import job, t  # noqa: E402
from ujobs.drivers.base import JobDriver  # noqa: E402
from ujobs.drivers.postgres.driver import postgres_driver  # noqa: E402
from ujobs.drivers.postgres.pool import postgres_pool  # noqa: E402
from ujobs.drivers.redis.driver import RedisDriver  # noqa: E402
from ujobs.execution.run import Run  # noqa: E402
from ujobs.introspect import inspect_queues  # noqa: E402
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver  # noqa: E402
from ujobs.jobs.registry import Registry  # noqa: E402
from ujobs.lifecycle import Lifecycle  # noqa: E402
from ujobs.metrics import JobMetrics  # noqa: E402
from ujobs.outbox import outbox_relay, postgres_outbox_store  # noqa: E402
from ujobs.services.runtime.gc_tuning import DEFAULT_GC_THRESHOLD, tune_gc  # noqa: E402
from ujobs.wake.announce import RedisAnnouncer, announcing  # noqa: E402
from ujobs.wake.listener import redis_wake  # noqa: E402
from ujobs.worker import job_worker  # noqa: E402

SIZES = [int(s) for s in os.environ.get("BENCH_BACKLOG_SIZES", "10000,100000,1000000").split(",")]
DRIVERS = os.environ.get("BENCH_BACKLOG_DRIVERS", "postgres,redis").split(",")
WINDOW = int(os.environ.get("BENCH_BACKLOG_WINDOW", "40000"))
RELAY_WINDOW = int(os.environ.get("BENCH_BACKLOG_RELAY_WINDOW", "5000"))
SINGLES = 4_000
BATCHES, BATCH = 20, 500
PICKUPS, PICKUP_GAP_S = 60, 0.03
SLOTS, CLAIM_AHEAD = 16, 48
DB_NAME = "bench_backlog"
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_DB_URL = REDIS_URL.rsplit("/", 1)[0] + "/7"
REDIS_PREFIX = "ujobs-backlog"
CHANNEL = "ujobs:wake:backlog"
SVG = os.environ.get("BENCH_BACKLOG_SVG", str(ROOT / "docs/img/backlog_scaling.svg"))
BIG = 1_000_000
RawBatch = Callable[[], Awaitable[float]]


# -- the jobs --------------------------------------------------------------------------------

_window: dict[str, Any] = {"target": 0, "done": 0, "event": None}
_pickups: list[float] = []


@job(
    name="backlog",
    input=t.object(seq=t.number.int(), ts=t.number),
    idempotency_key=lambda i: f"backlog:{i.seq}:{i.ts!r}",
    tenant="none",
    queue="backlog",
)
async def backlog_job(run: Run[Any]) -> None:
    _window["done"] += 1
    if _window["done"] >= _window["target"] and _window["event"] is not None:
        _window["event"].set()


@job(
    name="backlog-pickup",
    input=t.object(seq=t.number.int(), ts=t.number),
    idempotency_key=lambda i: f"pickup:{i.seq}:{i.ts!r}",
    tenant="none",
    queue="pickup",
)
async def pickup_job(run: Run[Any]) -> None:
    _pickups.append((time.time() - run.input.ts) * 1000)


@job(
    name="backlog-enqueued",
    input=t.object(seq=t.number.int(), ts=t.number),
    idempotency_key=lambda i: f"enqueued:{i.seq}:{i.ts!r}",
    tenant="none",
    queue="enqueued",
)
async def enqueued_job(run: Run[Any]) -> None:
    """Never run: its queue has no worker."""


def registry() -> Registry:
    found = Registry()
    for handle in (backlog_job, pickup_job, enqueued_job):
        found.register_job(handle)
    return found


# -- one scenario's measures -----------------------------------------------------------------


def worker_on(driver: JobDriver, queue: str, wake: Any) -> Any:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry(),
        queues=[queue],
        concurrency=SLOTS,
        claim_ahead=CLAIM_AHEAD,
        wake=wake,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )


async def drain(worker_driver: JobDriver, count: int) -> float:
    """Jobs a second over the first ``count`` of the backlog, from the worker's start."""
    _window.update(target=count, done=0, event=asyncio.Event())
    worker = worker_on(worker_driver, "backlog", None)
    began = time.perf_counter()
    await worker.start()
    await asyncio.wait_for(_window["event"].wait(), 600)
    elapsed = time.perf_counter() - began
    await worker.stop()
    return count / elapsed


async def enqueue_rates(raw: RawBatch | None = None) -> tuple[float, float, float | None]:
    """Single and batch enqueues a second; with ``raw`` (Redis), one raw batch after each
    of ours (``backlog_redis_bound``), timed apart, and its rate third."""
    began = time.perf_counter()
    for i in range(SINGLES):
        await enqueued_job.enqueue({"seq": i, "ts": time.time()})
    singles = SINGLES / (time.perf_counter() - began)
    ours = bare = 0.0
    for b in range(BATCHES):
        ts = time.time()
        began = time.perf_counter()
        await enqueued_job.enqueue_many({"seq": b * BATCH + i, "ts": ts} for i in range(BATCH))
        ours += time.perf_counter() - began
        if raw is not None:
            bare += await raw()
    return singles, BATCHES * BATCH / ours, BATCHES * BATCH / bare if raw is not None else None


async def pickup_p50(worker_driver: JobDriver) -> float:
    _pickups.clear()
    wake = redis_wake(REDIS_URL, CHANNEL)
    await wake.start()
    worker = worker_on(worker_driver, "pickup", wake)
    await worker.start()
    try:
        await wake.signals.wait("live", timeout_s=10)
        base = int(time.time() * 1000)
        for i in range(PICKUPS):
            await pickup_job.enqueue({"seq": base + i, "ts": time.time()})
            await asyncio.sleep(PICKUP_GAP_S)
        deadline = time.monotonic() + 30
        while len(_pickups) < PICKUPS and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await worker.stop()
        await wake.stop()
    return statistics.median(_pickups)


async def queues_ms(driver: JobDriver) -> float:
    times = []
    for _ in range(5):
        began = time.perf_counter()
        await inspect_queues(driver, int(time.time() * 1000))
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


async def measure(
    enqueue_driver: JobDriver,
    worker_driver: JobDriver,
    between: Callable[[], Awaitable[None]],
    raw: RawBatch | None = None,
) -> dict[str, Any]:
    """Every figure of one scenario, the backlog already in place; ``between`` runs before
    each phase (Postgres: a CHECKPOINT, so one phase's writes are not flushed in the next
    one's time: right after a drain, single enqueues, one commit each, ran at a quarter of
    their rate while the drain's pages were written out)."""
    set_job_driver(enqueue_driver)
    try:
        await between()
        singles, batches, bare = await enqueue_rates(raw)
        await between()
        drained = await drain(worker_driver, WINDOW)
        await between()
        pickup = await pickup_p50(worker_driver)
        listing = await queues_ms(enqueue_driver)
    finally:
        reset_job_driver()
    figures = {
        "drain_per_s": round(drained, 1),
        "enqueue_per_s": round(singles, 1),
        "batch_enqueue_per_s": round(batches, 1),
        "pickup_p50_ms": round(pickup, 2),
        "queues_ms": round(listing, 3),  # Redis reads take under a millisecond
    }
    if bare is not None:
        figures["raw_batch_enqueue_per_s"] = round(bare, 1)
    return figures


# -- Postgres --------------------------------------------------------------------------------


async def postgres_scenario(dsn: str, kind: str, backlog: int) -> dict[str, Any]:
    """``kind``: ``ready`` (the window then ``backlog`` due rows), ``sleeping`` or
    ``finished`` (the window due in front of ``backlog`` rows of that kind)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("truncate x_jobs, x_job_counters, x_job_wake_slots")
        began = time.perf_counter()
        if kind == "ready":
            await fill_jobs(conn, rows=WINDOW + backlog, name="backlog", queue="backlog")
        elif kind == "sleeping":
            await fill_jobs(conn, rows=backlog, name="backlog", queue="backlog", state="suspended")
            await fill_jobs(conn, rows=WINDOW, name="backlog", queue="backlog", first=backlog)
        else:
            await insert_history(conn, backlog, name="backlog", queue="backlog")
            await fill_jobs(conn, rows=WINDOW, name="backlog", queue="backlog", first=backlog)
        await settle_tables(conn)
        filled_s = time.perf_counter() - began
        plans = {"claim": await claim_plan(dsn), "queues": await queues_plan(dsn)}
    finally:
        await conn.close()
    pool = await postgres_pool(dsn, min_size=2, max_size=8)
    worker_pool = await postgres_pool(dsn, min_size=2, max_size=8)
    announcer = RedisAnnouncer(REDIS_URL, CHANNEL)
    inner, worker_driver = postgres_driver(pool), postgres_driver(worker_pool)

    async def checkpoint() -> None:
        await pool.execute("checkpoint")

    try:
        figures = await measure(announcing(inner, announcer), worker_driver, checkpoint)
    finally:
        await announcer.close()
        await inner.close()
        await worker_driver.close()
        await pool.close()
        await worker_pool.close()
    return {"backlog": backlog, "fill_s": round(filled_s, 1), **figures, "plans": plans}


async def relay_rate(dsn: str, backlog: int) -> dict[str, Any]:
    """Rows a second the relay publishes: the first ``RELAY_WINDOW`` of ``backlog``
    unpublished outbox rows, pass after pass as its loop would run them."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("truncate x_outbox, x_jobs")
        await fill_outbox(conn, rows=backlog, name="backlog", queue="enqueued")
        await settle_tables(conn)
    finally:
        await conn.close()
    pool = await postgres_pool(dsn, min_size=2, max_size=8)
    driver = postgres_driver(pool)
    relay = outbox_relay(store=postgres_outbox_store(executor=pool), driver=driver)
    try:
        published = 0
        began = time.perf_counter()
        while published < RELAY_WINDOW:
            published += len((await relay.run_once()).claimed)
        rate = published / (time.perf_counter() - began)
    finally:
        await driver.close()
        await pool.close()
    return {"backlog": backlog, "published_per_s": round(rate, 1)}


# -- Redis -----------------------------------------------------------------------------------


async def _nothing() -> None:
    """Redis here keeps no dirty pages to flush between phases (no persistence configured)."""


def redis_driver(*, wake: bool) -> RedisDriver:
    return RedisDriver(
        Redis.from_url(REDIS_DB_URL),
        prefix=REDIS_PREFIX,
        owns_client=True,
        wake_channel=CHANNEL if wake else None,
    )


async def drop_redis_keys() -> None:
    client = Redis.from_url(REDIS_DB_URL)
    try:
        batch: list[Any] = []
        async for key in client.scan_iter(match=f"{{{REDIS_PREFIX}}}*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                await client.unlink(*batch)
                batch.clear()
        if batch:
            await client.unlink(*batch)
    finally:
        await client.aclose()


async def redis_scenario(backlog: int) -> dict[str, Any]:
    await drop_redis_keys()
    enqueuer, worker_driver = redis_driver(wake=True), redis_driver(wake=False)
    raw_client = Redis.from_url(REDIS_DB_URL)
    set_job_driver(enqueuer)
    try:
        began = time.perf_counter()
        base = time.time() - 3600
        total = WINDOW + backlog
        for start in range(0, total, 5000):
            await backlog_job.enqueue_many(
                {"seq": g, "ts": base + g / 1000} for g in range(start, min(start + 5000, total))
            )
        filled_s = time.perf_counter() - began
        keys_before = int(await raw_client.dbsize())

        async def raw() -> float:
            return await raw_batch(raw_client, REDIS_PREFIX, BATCH)

        figures = await measure(enqueuer, worker_driver, _nothing, raw)
        keys_after = int(await raw_client.dbsize())
    finally:
        reset_job_driver()
        await enqueuer.close()
        await worker_driver.close()
        await raw_client.aclose()
    return {
        "backlog": backlog,
        "fill_s": round(filled_s, 1),
        **figures,
        "keys_before": keys_before,
        "keys_after": keys_after,
        "keyspace_doubled": keyspace_doubled(keys_before, keys_after),
    }


# -- the run ---------------------------------------------------------------------------------


def ratio(high: float, low: float) -> float:
    return round(high / low, 3) if low else 0.0


async def postgres_part() -> dict[str, Any]:
    """The Postgres scenarios, the relay and the webhook deliverer."""
    dsn = await fresh_database(DB_NAME)
    postgres: dict[str, Any] = {}
    try:
        scenarios = [("ready", size) for size in SIZES] + [("sleeping", BIG), ("finished", BIG)]
        for (kind, size), found in await both_ways(
            scenarios,
            lambda key: f"postgres: the window in front of {key[1]:,} {key[0]} rows",
            lambda key: postgres_scenario(dsn, *key),
        ):
            postgres[f"{kind}_{size}"] = found
        relay = {
            f"outbox_{size}": found
            for size, found in await both_ways(
                [SIZES[0], SIZES[-1]],
                lambda size: f"relay: {RELAY_WINDOW:,} of {size:,} unpublished outbox rows",
                lambda size: relay_rate(dsn, size),
            )
        }
    finally:
        await drop_database(DB_NAME)
    note("webhooks: one endpoint's deliveries from a small and a big backlog, small big big small")
    webhooks = await asyncio.to_thread(backlog_webhooks.run)
    return {"postgres": postgres, "relay": relay, "webhooks": webhooks}


async def redis_part() -> dict[str, Any]:
    redis: dict[str, Any] = {}
    try:
        for size, found in await both_ways(
            SIZES, lambda size: f"redis: the window in front of {size:,} ready rows", redis_scenario
        ):
            redis[f"ready_{size}"] = found
    finally:
        await drop_redis_keys()
    return redis


def postgres_ratios(parts: dict[str, Any]) -> dict[str, float]:
    postgres, relay = parts["postgres"], parts["relay"]
    low, high = postgres[f"ready_{SIZES[0]}"], postgres[f"ready_{SIZES[-1]}"]
    return {
        "drain_1m_vs_10k": ratio(high["drain_per_s"], low["drain_per_s"]),
        "enqueue_1m_vs_10k": ratio(high["enqueue_per_s"], low["enqueue_per_s"]),
        "batch_enqueue_1m_vs_10k": ratio(high["batch_enqueue_per_s"], low["batch_enqueue_per_s"]),
        "drain_sleeping_1m_vs_10k": ratio(
            postgres[f"sleeping_{BIG}"]["drain_per_s"], low["drain_per_s"]
        ),
        "drain_finished_1m_vs_10k": ratio(
            postgres[f"finished_{BIG}"]["drain_per_s"], low["drain_per_s"]
        ),
        "queues_speed_1m_vs_10k": ratio(low["queues_ms"], high["queues_ms"]),
        "relay_1m_vs_10k": ratio(
            relay[f"outbox_{SIZES[-1]}"]["published_per_s"],
            relay[f"outbox_{SIZES[0]}"]["published_per_s"],
        ),
        "webhooks_100k_vs_2k": parts["webhooks"]["ratio"],
    }


def redis_ratios(redis: dict[str, Any]) -> dict[str, float]:
    low, high = redis[f"ready_{SIZES[0]}"], redis[f"ready_{SIZES[-1]}"]
    return {
        "drain_1m_vs_10k_redis": ratio(high["drain_per_s"], low["drain_per_s"]),
        "enqueue_1m_vs_10k_redis": ratio(high["enqueue_per_s"], low["enqueue_per_s"]),
        "batch_enqueue_1m_vs_10k_redis": ratio(
            high["batch_enqueue_per_s"], low["batch_enqueue_per_s"]
        ),
        "queues_speed_1m_vs_10k_redis": ratio(low["queues_ms"], high["queues_ms"]),
    }


RATIO_ORDER = [
    "drain_1m_vs_10k",
    "drain_1m_vs_10k_redis",
    "enqueue_1m_vs_10k",
    "enqueue_1m_vs_10k_redis",
    "batch_enqueue_1m_vs_10k",
    "batch_enqueue_1m_vs_10k_redis",
    "drain_sleeping_1m_vs_10k",
    "drain_finished_1m_vs_10k",
    "queues_speed_1m_vs_10k",
    "queues_speed_1m_vs_10k_redis",
    "relay_1m_vs_10k",
    "webhooks_100k_vs_2k",
]


async def run() -> dict[str, Any]:
    """Every driver of ``DRIVERS`` (``BENCH_BACKLOG_DRIVERS``: postgres, redis or both), Postgres
    first; a part not run leaves its keys out of the line."""
    load_before = os.getloadavg()[0]
    pg = await postgres_part() if "postgres" in DRIVERS else None
    redis = await redis_part() if "redis" in DRIVERS else None
    found = {**(postgres_ratios(pg) if pg else {}), **(redis_ratios(redis) if redis else {})}
    ratios = {key: found[key] for key in RATIO_ORDER if key in found}
    big = f"ready_{SIZES[-1]}"
    pickup = pg["postgres"][big]["pickup_p50_ms"] if pg else None
    line: dict[str, Any] = {"bench": "backlog_scaling", "window": WINDOW, "sizes": SIZES}
    line["ratios"] = ratios
    if pg:
        line["pickup_p50_ms_1m"] = pickup
    if redis:
        line["pickup_p50_ms_1m_redis"] = redis[big]["pickup_p50_ms"]
        low = redis[f"ready_{SIZES[0]}"]
        line["bounds"] = {
            "raw_batch_enqueue_1m_vs_10k_redis": ratio(
                redis[big]["raw_batch_enqueue_per_s"], low["raw_batch_enqueue_per_s"]
            ),
        }
    line["targets"] = {
        "ratios_at_least": 0.9,
        "pickup_p50_ms_1m_at_most": 5,
        "missed": sorted(k for k, v in ratios.items() if v < 0.9)
        + (["pickup_p50_ms_1m"] if pickup is not None and pickup > 5 else []),
    }
    if pg:
        line["postgres"] = pg["postgres"]
    if redis:
        line["redis"] = redis
    if pg:
        line["relay"], line["webhooks"] = pg["relay"], pg["webhooks"]
    line["load_avg"] = {"start": round(load_before, 2), "end": round(os.getloadavg()[0], 2)}
    line["pg"] = PG_BASE.rsplit("@", 1)[-1]
    line["at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return line


def write_curve(line: dict[str, Any]) -> None:
    """The curve needs both drivers' figures: a run of one draws none."""
    if SVG != "-" and "postgres" in line and "redis" in line:
        Path(SVG).parent.mkdir(parents=True, exist_ok=True)
        Path(SVG).write_text(backlog_svg.draw(line), encoding="utf-8")
        note(f"the curve: {SVG}")


if __name__ == "__main__":
    tune_gc(DEFAULT_GC_THRESHOLD)  # the in-process worker runs as ``ujobs worker`` runs it
    with bench_lock():
        result = asyncio.run(run())
    write_curve(result)
    print(json.dumps(result), flush=True)
