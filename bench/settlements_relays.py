"""The Redis settlements relay's publish rate against the Postgres relay's: prints ONE JSON line.

    .venv/bin/python bench/settlements_relays.py

Each relay (``SettlementsRelay`` over ``x_settlements`` on the database ``BENCH_SETTLE_DB``,
created anew on ``BENCH_PG`` and dropped at the end; ``RedisSettlementsRelay`` over the stream
``{<prefix>}:settled`` on ``BENCH_REDIS_URL``) gets a backlog of ``BENCH_SETTLE_N`` (5,000)
settlements, one per job, written at once, and publishes it to one settled stream on
``BENCH_NATS_URL`` with ``run_once`` (its default batch of 500) until nothing is left: its
backlog pace, from the first claim to the last publish acked and marked (Postgres) or deleted
(Redis). ``BENCH_SETTLE_ROUNDS`` (5) rounds, the two relays alternating which goes first, so
both see the same minutes of a shared machine; the figures are the medians and
``redis_vs_postgres`` their ratio.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import nats
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_db import drop_database, fresh_database  # noqa: E402

from ujobs.drivers.redis.settlements import RedisSettlementsOutbox  # noqa: E402
from ujobs.services.nats.names import NatsNames  # noqa: E402
from ujobs.services.nats.settlements import SettlementsRelay  # noqa: E402
from ujobs.services.nats.settlements_redis import RedisSettlementsRelay  # noqa: E402
from ujobs.services.nats.streams import ensure_streams  # noqa: E402

NATS_URL = os.environ.get("BENCH_NATS_URL", "nats://127.0.0.1:4222")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
DB_NAME = os.environ.get("BENCH_SETTLE_DB", f"bench_settle_{uuid.uuid4().hex[:8]}")
N = int(os.environ.get("BENCH_SETTLE_N", "5000"))
ROUNDS = int(os.environ.get("BENCH_SETTLE_ROUNDS", "5"))
PREFIX = os.environ.get("BENCH_SETTLE_PREFIX") or f"bsettle{uuid.uuid4().hex[:8]}"

BACKLOG = """
insert into x_settlements (job_id, run_id, name, tenant_id, outcome, code, attempt, settled_at)
select 'job-' || $1::int || '-' || i, 'run-' || i, 'bench.noop', null, 'completed', null, 1, now()
  from generate_series(1, $2::int) i
"""


async def drain(relay: SettlementsRelay | RedisSettlementsRelay) -> tuple[int, float]:
    """Every pending settlement published: how many, and the seconds it took."""
    t0 = time.perf_counter()
    published = 0
    while (done := await relay.run_once()) > 0:
        published += done
    return published, time.perf_counter() - t0


async def redis_backlog(client: Redis, outbox: RedisSettlementsOutbox, round_no: int) -> None:
    """``N`` entries in the shape the Redis driver's ending scripts add."""
    pipe = client.pipeline(transaction=False)
    now_ms = int(time.time() * 1000)
    for i in range(N):
        pipe.xadd(
            outbox.key,
            {
                "id": f"job-{round_no}-{i}",
                "run_id": f"run-{i}",
                "name": "bench.noop",
                "outcome": "completed",
                "attempt": 1,
                "settled_at": now_ms,
            },
        )
    await pipe.execute()


async def main() -> dict[str, Any]:
    dsn = await fresh_database(DB_NAME)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    client = Redis.from_url(REDIS_URL)
    outbox = RedisSettlementsOutbox(client, PREFIX)
    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    names = NatsNames(PREFIX)
    await ensure_streams(js, names)
    rates: dict[str, list[float]] = {"postgres": [], "redis": []}
    try:
        pg_relay = SettlementsRelay(pool, js, names)
        redis_relay = RedisSettlementsRelay(outbox, js, names)
        for round_no in range(ROUNDS):
            order = ["postgres", "redis"] if round_no % 2 == 0 else ["redis", "postgres"]
            for kind in order:
                if kind == "postgres":
                    await pool.execute(BACKLOG, round_no, N)
                    published, seconds = await drain(pg_relay)
                else:
                    await redis_backlog(client, outbox, round_no)
                    published, seconds = await drain(redis_relay)
                if published != N:
                    raise RuntimeError(f"{kind} relay published {published} of {N}")
                rates[kind].append(N / seconds)
    finally:
        for stream in (names.enqueue_stream, names.settled_stream):
            try:
                await js.delete_stream(stream)
            except Exception as exc:
                print(f"settlements_relays: could not delete {stream}: {exc}", file=sys.stderr)
        await nc.drain()
        await client.delete(outbox.key)
        await client.aclose()
        await pool.close()
        await drop_database(DB_NAME)
    pg = statistics.median(rates["postgres"])
    redis = statistics.median(rates["redis"])
    return {
        "bench": "settlements_relays",
        "n": N,
        "rounds": ROUNDS,
        "postgres_relay_per_s": round(pg, 1),
        "redis_relay_per_s": round(redis, 1),
        "rounds_per_s": {k: [round(r) for r in v] for k, v in rates.items()},
        "ratios": {"redis_vs_postgres": round(redis / pg, 3)},
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
