"""A worker OS process for the crash tests: ``python -m tests.e2e.worker_main DSN [options]``.

Builds ``postgres_driver`` (or, when DSN is a ``redis://`` URL, ``redis_driver`` under
``--redis-prefix``) + ``job_worker`` over ``tests/e2e/worker_app``, drains on SIGTERM
(the process lifecycle), prints ``{"event": "ready"}`` once started and exits 0 after the drain.
The ``ujobs worker`` service replaces this in a later issue.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

import asyncpg
import orjson

from tests.e2e.worker_app import QUEUE, app_registry
from ujobs.drivers.base import JobDriver
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.lifecycle import configure_lifecycle, handle_signals, wait_drained
from ujobs.worker import job_worker


def _say(event: str, **fields: object) -> None:
    sys.stdout.write(orjson.dumps({"event": event, **fields}).decode() + "\n")
    sys.stdout.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--visibility-ms", type=int, default=1_500)
    parser.add_argument("--deadline-ms", type=int, default=25_000)
    parser.add_argument("--redis-prefix", default="ujobs")
    parser.add_argument("--heartbeat-ms", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--claim-ahead", type=int, default=0)
    args = parser.parse_args()
    configure_lifecycle(deadline_ms=args.deadline_ms)
    pool: asyncpg.Pool[Any] | None = None
    driver: JobDriver
    if args.dsn.startswith("redis://"):
        from redis.asyncio import Redis

        from ujobs.drivers.redis.driver import RedisDriver

        driver = RedisDriver(Redis.from_url(args.dsn), prefix=args.redis_prefix, owns_client=True)
    else:
        pool = await asyncpg.create_pool(args.dsn, min_size=1, max_size=4)
        assert pool is not None
        driver = postgres_driver(pool)
    worker = job_worker(
        driver=driver,
        context=None,
        registry=app_registry(),
        queues=[QUEUE],
        visibility_timeout_ms=args.visibility_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        concurrency=args.concurrency,
        claim_ahead=args.claim_ahead,
        poll_interval_ms=100,
        idle_poll_max_ms=200,
        worker_id=args.worker_id,
    )
    handle_signals()
    await worker.start()
    _say("ready", worker_id=worker.id)
    await wait_drained()
    if pool is not None:
        await pool.close()
    _say("exited", state=worker.state)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    asyncio.run(main())
