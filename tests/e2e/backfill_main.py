"""A worker OS process running one backfill: ``python -m tests.e2e.backfill_main DSN [--hang-at
CURSOR]``.

``slugs`` sweeps ``bf_posts`` (keyset on ``id``, 10 rows a page) and records every row it
handles in ``bf_touches`` — one row per touch, so a test can count how often each post was
handled. With ``--hang-at N`` the page after cursor N records its touches and then hangs, for
the test to SIGKILL the process mid-page. ``--rate R`` paces the pass at R batches a second
(``0.01``: the second page waits 100 s in the throttle's pause, for a test to drain it there).
Prints ``{"event": "ready"}`` once claiming; exits 0 once drained, 1 if a run was abandoned.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from ujobs.backfill import KeysetSource, backfill, keyset
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import configure_lifecycle, handle_signals, wait_drained
from ujobs.worker import job_worker

BATCH = 10
_PAGE = "select id from bf_posts where id > coalesce($1::int, 0) order by id limit $2"
_TOUCH = "insert into bf_touches (post_id) select unnest($1::int[])"
_WRITE = "update bf_posts set slug = 'post-' || id where id = any($1::int[])"


def _say(event: str, **fields: object) -> None:
    sys.stdout.write(orjson.dumps({"event": event, **fields}).decode() + "\n")
    sys.stdout.flush()


def declare(pool: asyncpg.Pool[Any], hang_at: int | None, rate: float = 200) -> Any:
    def source(_ctx: Any) -> KeysetSource:
        async def fetch(after: Any, limit: int) -> list[asyncpg.Record]:
            return list(await pool.fetch(_PAGE, after, limit))

        return keyset(fetch, key="id")

    async def handle(rows: Sequence[asyncpg.Record], signal: Any) -> None:
        ids = [r["id"] for r in rows]
        await pool.execute(_TOUCH, ids)
        await pool.execute(_WRITE, ids)
        if hang_at is not None and ids[0] == hang_at + 1:
            _say("hanging", first=ids[0])
            await asyncio.sleep(3_600)

    return backfill(
        name="slugs", tenant="none", source=source, handle=handle, batch=BATCH, rate=rate
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("--hang-at", type=int, default=None)
    parser.add_argument("--visibility-ms", type=int, default=1_500)
    parser.add_argument("--rate", type=float, default=200)
    args = parser.parse_args()
    configure_lifecycle(deadline_ms=2_000)
    pool = await asyncpg.create_pool(args.dsn, min_size=1, max_size=4)
    assert pool is not None
    driver = postgres_driver(pool)
    set_job_driver(driver)  # the pass finds the ledger on the installed driver
    registry = Registry()
    registry.register_job(declare(pool, args.hang_at, args.rate))
    worker = job_worker(
        driver=driver,
        context=None,
        registry=registry,
        queues=["default"],
        visibility_timeout_ms=args.visibility_ms,
        poll_interval_ms=100,
        idle_poll_max_ms=200,
    )
    handle_signals()
    await worker.start()
    _say("ready", worker_id=worker.id)
    await wait_drained()
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
