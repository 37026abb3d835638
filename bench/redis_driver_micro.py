"""Driver-level micro-benchmark of the Redis driver; prints one JSON line.

    python bench/redis_driver_micro.py [--n 5000] [--backlog 50000] [--claimers 16] [--reps 1]
                                       [--settlements]

Figures (jobs per second, wall clock, one process, one event loop):
  enqueue_single_per_s    N sequential ``enqueue`` calls (one script call each)
  enqueue_many_per_s      N jobs through ``enqueue_many`` in batches of 500
  claim_ack_per_s         N jobs drained by ``claimers`` concurrent loops of claim(limit=1) + ack
  claim_ack_backlog_per_s the same drain of N jobs with ``backlog`` more rows queued behind them
                          (delayed an hour, so they sit in the same due zset): claim cost must not
                          grow with the backlog

It measures the driver and Redis only: no job bodies, no worker, no wake. The worker-level
comparison against the Redis-backed peers is bench/throughput.py's job. Runs on a key prefix of
its own and deletes exactly that prefix afterwards. With ``--reps R`` each figure is the median
of R runs (a shared 2-core machine is noisy). ``--settlements`` runs the driver with its
settlements outbox on (every ack also adds its entry to ``{prefix}:settled``), to weigh what
``UJOBS_NATS_SETTLEMENTS=on`` costs the drain; the entries are never relayed here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from redis.asyncio import Redis

from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.redis.driver import RedisDriver, redis_driver

BATCH = 500


def request(i: int, queue: str, run_at_ms: int | None = None) -> EnqueueRequest:
    return EnqueueRequest(
        name="bench.noop",
        input={"seq": i, "ts": time.time()},
        idempotency_key=f"{queue}:{i}",
        queue=queue,
        run_at_ms=run_at_ms,
    )


async def drain(driver: RedisDriver, queue: str, n: int, claimers: int) -> float:
    """Seconds for ``claimers`` loops of claim(limit=1) + ack to settle ``n`` jobs."""
    done = 0

    async def claimer(worker: str) -> None:
        nonlocal done
        options = ClaimOptions(queues=[queue], limit=1, worker_id=worker, visibility_ms=30_000)
        while done < n:
            jobs = await driver.claim(options)
            if not jobs:
                return
            for job in jobs:
                await driver.ack(job.id, job.ref, duration_ms=0)
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(claimer(f"bench-{i}") for i in range(claimers)))
    elapsed = time.perf_counter() - started
    if done != n:
        raise RuntimeError(f"drained {done} of {n}")
    return elapsed


async def drop(client: Redis, prefix: str) -> None:
    keys = [k async for k in client.scan_iter(match=f"{{{prefix}}}*", count=5000)]
    for i in range(0, len(keys), 1000):
        await client.delete(*keys[i : i + 1000])


async def main(n: int, backlog: int, claimers: int, settlements: bool) -> dict[str, object]:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    client = Redis.from_url(url)
    prefix = f"ujbench{uuid.uuid4().hex[:8]}"
    driver = redis_driver(client, prefix=prefix, clock=SYSTEM_CLOCK, settlements=settlements)
    try:
        await driver.enqueue(request(-1, "warm"))  # load the scripts, open the connection

        started = time.perf_counter()
        for i in range(n):
            await driver.enqueue(request(i, "single"))
        single = n / (time.perf_counter() - started)

        started = time.perf_counter()
        for i in range(0, n, BATCH):
            await driver.enqueue_many([request(j, "many") for j in range(i, min(n, i + BATCH))])
        many = n / (time.perf_counter() - started)

        claim_ack = n / await drain(driver, "single", n, claimers)

        later = SYSTEM_CLOCK.now_ms() + 3_600_000
        for i in range(0, backlog, BATCH):
            rows = range(i, min(backlog, i + BATCH))
            await driver.enqueue_many([request(j, "many", later) for j in rows])
        claim_ack_backlog = n / await drain(driver, "many", n, claimers)

        info = await client.info("server")
        return {
            "bench": "redis_driver_micro",
            "n": n,
            "claimers": claimers,
            "backlog": backlog,
            "settlements": settlements,
            "enqueue_single_per_s": round(single),
            "enqueue_many_per_s": round(many),
            "claim_ack_per_s": round(claim_ack),
            "claim_ack_backlog_per_s": round(claim_ack_backlog),
            "redis": info.get("redis_version"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
    finally:
        await drop(client, prefix)
        await client.aclose()


def median_of(runs: list[dict[str, object]]) -> dict[str, object]:
    figures = dict(runs[0])
    for key in runs[0]:
        if key.endswith("_per_s"):
            figures[key] = round(statistics.median(float(str(run[key])) for run in runs))
    figures["reps"] = len(runs)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5_000)
    parser.add_argument("--backlog", type=int, default=50_000)
    parser.add_argument("--claimers", type=int, default=16)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--settlements", action="store_true")
    args = parser.parse_args()
    runs = [
        asyncio.run(main(args.n, args.backlog, args.claimers, args.settlements))
        for _ in range(args.reps)
    ]
    sys.stdout.write(orjson.dumps(median_of(runs)).decode() + "\n")
