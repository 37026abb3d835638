"""``bench/backlog_scaling.py``'s webhook part: one endpoint's deliveries from a small and a
big backlog, through a real ``ujobs webhook-deliverer`` process.

The receiver, the deliverer's start and the seeding are ``bench/webhook_deliveries.py``'s.
For each backlog (``SMALL``, then ``BIG``, deliveries queued for ONE endpoint while the
``webhooks`` queue is paused: each an event row and its delivery job, as ``publish`` writes
them), the queue is resumed and the first ``WINDOW`` receipts timed: every delivery takes the
endpoint's slot (the per-endpoint cap, ``x_job_leases``) and reserves its pace
(``x_webhook_pace``: the endpoint has a rate far above what one process reaches, so the pace
statement runs without ever making a delivery wait). Beside each rate: the database's commits
a delivery over the window (``webhook_deliveries.commits``) and the most
claims one row took (a row claimed and handed back because its endpoint had no free slot is
claimed again).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import webhook_deliveries as wd

from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.sql import query
from ujobs.introspect import pause_queues
from ujobs.webhooks import builtin
from ujobs.webhooks.family import WEBHOOKS_QUEUE, fan_out_inputs

SMALL = int(os.environ.get("BENCH_BACKLOG_WEBHOOKS_SMALL", "2000"))
BIG = int(os.environ.get("BENCH_BACKLOG_WEBHOOKS_BIG", "100000"))
WINDOW = min(SMALL, int(os.environ.get("BENCH_BACKLOG_WEBHOOKS_WINDOW", "2000")))
ENDPOINT = "ep_one"
RATE_PER_S = 1_000_000.0


async def _seed(dsn: str, base: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    async with wd.Bench(dsn) as bench:
        await bench.store.add_endpoint(
            f"{base}/hook/0", topics=["bench.tick"], endpoint_id=ENDPOINT, rate_per_s=RATE_PER_S
        )


async def _queue(bench: wd.Bench, rows: int) -> None:
    """``rows`` deliveries for the one endpoint, queued behind the paused queue."""
    await pause_queues(bench.driver, [WEBHOOKS_QUEUE], pause=True)
    await bench.pool.execute("truncate x_jobs, x_webhook_events, x_webhook_deliveries")
    now = int(time.time() * 1000)
    events = [f"evt_{rows}_{i:07d}" for i in range(rows)]
    for start in range(0, rows, 5000):
        chunk = events[start : start + 5000]
        await bench.pool.executemany(
            query("webhooks_event_store"),
            [(event, None, "bench.tick", wd.BODY.encode(), now) for event in chunk],
        )
        inputs = [item for event in chunk for item in fan_out_inputs(event, [(ENDPOINT, None)])]
        await builtin.deliver_global.enqueue_many(inputs)
    await bench.pool.execute("vacuum analyze")


async def _rate(dsn: str, base: str, rows: int) -> dict[str, Any]:
    async with wd.Bench(dsn) as bench, aiohttp.ClientSession() as http:
        began_fill = time.perf_counter()
        await _queue(bench, rows)
        filled_s = time.perf_counter() - began_fill
        await http.post(f"{base}/reset")
        before = await wd.commits(bench.pool)
        began = time.time_ns()
        await pause_queues(bench.driver, [WEBHOOKS_QUEUE], pause=False)
        last_ns = await wd.until_count(http, base, WINDOW)
        await pause_queues(bench.driver, [WEBHOOKS_QUEUE], pause=True)
        commits = await wd.commits(bench.pool) - before
        claims = await bench.pool.fetchval("select max(claim) from x_jobs")
    rate = WINDOW / ((last_ns - began) / 1e9)
    return {
        "backlog": rows,
        "fill_s": round(filled_s, 1),
        "deliveries_per_s": round(rate, 1),
        "commits_per_delivery": round(commits / WINDOW, 2),
        "most_claims_a_row": claims,
    }


def run() -> dict[str, Any]:
    database = f"ujobs_bench_backlog_wh_{os.getpid()}"
    asyncio.run(wd.admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
    asyncio.run(wd.admin(f'CREATE DATABASE "{database}"'))
    dsn = wd.dsn_for(database)
    receiver = subprocess.Popen(
        [sys.executable, str(Path(wd.__file__).resolve()), "receive"], stdout=subprocess.PIPE
    )
    deliverer: subprocess.Popen[bytes] | None = None
    log = Path(tempfile.mkstemp(prefix="ujobs-bench-backlog-", suffix=".log")[1])
    try:
        assert receiver.stdout is not None
        base = f"http://127.0.0.1:{int(receiver.stdout.readline())}"
        asyncio.run(_seed(dsn, base))
        deliverer = wd.start_deliverer(dsn, log)
        wd.until_started(log, deliverer)
        # small, big, big, small: a steady drift of the machine's load cancels out of the ratio
        runs = [asyncio.run(_rate(dsn, base, rows)) for rows in (SMALL, BIG, BIG, SMALL)]
        wd.stop(deliverer)
    finally:
        if deliverer is not None and deliverer.poll() is None:
            deliverer.kill()
        receiver.kill()
        receiver.wait()
        asyncio.run(wd.admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        log.unlink(missing_ok=True)
    small = _mean([runs[0], runs[3]])
    big = _mean([runs[1], runs[2]])
    ratio = round(big["deliveries_per_s"] / small["deliveries_per_s"], 3)
    return {"window": WINDOW, "small": small, "big": big, "ratio": ratio}


def _mean(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["deliveries_per_s"] for r in runs]
    return {
        "backlog": runs[0]["backlog"],
        "deliveries_per_s": round(sum(rates) / len(rates), 1),
        "runs": rates,
        "commits_per_delivery": [r["commits_per_delivery"] for r in runs],
        "most_claims_a_row": max(r["most_claims_a_row"] for r in runs),
    }
