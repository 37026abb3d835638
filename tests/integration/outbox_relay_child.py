"""A relay in a process of its own, for the crash test: ``python -m
tests.integration.outbox_relay_child DSN STALL_AT [REDIS_URL PREFIX]``.

It publishes onto the Postgres driver, or onto the Redis driver under key prefix ``PREFIX``
when ``REDIS_URL`` is given (the outbox stays in Postgres either way). It runs one pass.
After publishing its STALL_AT-th row — BEFORE marking it published — it prints
``STALLED <id>`` and waits, so the parent can SIGKILL it at exactly that point.
"""

from __future__ import annotations

import asyncio
import sys

import asyncpg

from ujobs.drivers.base import Enqueued, JobDriver
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.outbox import OutboxRecord, RelayOptions, outbox_relay, postgres_outbox_store


async def main(dsn: str, stall_at: int, redis_target: list[str]) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    assert pool is not None
    published = 0
    driver: JobDriver = postgres_driver(pool)
    if redis_target:
        from redis.asyncio import Redis

        from ujobs.drivers.redis.driver import redis_driver

        url, prefix = redis_target
        driver = redis_driver(Redis.from_url(url), prefix=prefix)

    async def on_published(row: OutboxRecord, answer: Enqueued) -> None:
        nonlocal published
        published += 1
        sys.stdout.write(f"PUBLISHED {row.id}\n")
        if published == stall_at:
            sys.stdout.write(f"STALLED {row.id}\n")
            sys.stdout.flush()
            await asyncio.Event().wait()
        sys.stdout.flush()

    relay = outbox_relay(
        store=postgres_outbox_store(executor=pool),
        driver=driver,
        options=RelayOptions(relay_id="child", drain_on_shutdown=False),
        on_published=on_published,
    )
    await relay.run_once()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:5]))
