"""NATS restarted (a PRIVATE nats-server, never the shared one) while settles keep landing in
Postgres: every settlement of the outbox reaches ``<PREFIX>_SETTLED`` exactly once, each job's
in the order they happened."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import nats
import orjson
import pytest

from tests.services.nats_support import unique_prefix
from tests.support.conformance import claim, req
from tests.support.restartable import PrivateNats
from ujobs.drivers.base import NackOptions
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.service import connect
from ujobs.services.nats.settlements import SettlementsRelay
from ujobs.services.nats.streams import ensure_streams

pytestmark = pytest.mark.slow

JOBS = 300
WAIT_S = 60.0


async def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


async def test_nats_restarted_while_workers_settle_loses_no_settlement(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    with PrivateNats() as server:
        names = NatsNames(unique_prefix())
        nc = await connect(server.url, name="restart-test")
        js = nc.jetstream()
        await ensure_streams(js, names)
        relay = SettlementsRelay(pg_pool, js, names, retry_s=0.1, publish_timeout_s=0.5)
        await relay.start()
        driver = postgres_driver(pg_pool, settlements=True)
        await driver.enqueue_many(
            [req("billing.charge", key=str(uuid.uuid4()), max_attempts=3) for _ in range(JOBS)]
        )
        finished = 0

        async def settle_everything() -> None:
            # Every third job fails its first attempt and retries: two settlements, in order.
            nonlocal finished
            while finished < JOBS:
                for job in await claim(driver, limit=10):
                    if job.attempt == 1 and int(job.id[-4:], 16) % 3 == 0:
                        retry = NackOptions(error="X_LATER: again", run_at_ms=0)
                        assert await driver.nack(job.id, job.ref, retry)
                    else:
                        assert await driver.ack(job.id, job.ref)
                        finished += 1
                await asyncio.sleep(0.01)

        settling = asyncio.get_running_loop().create_task(settle_everything())

        async def a_quarter_settled() -> bool:
            return finished >= JOBS // 4

        await _until(a_quarter_settled, "a quarter of the jobs")
        await asyncio.to_thread(server.stop)
        failures_before = relay.failures
        # Settles keep landing in Postgres; NATS is away for longer than a publish waits (a
        # shorter outage is ridden out inside the client's reconnect buffer).
        await asyncio.sleep(2.0)
        await asyncio.to_thread(server.start)
        await settling
        await driver.close()

        async def all_published() -> bool:
            n = await pg_pool.fetchval(
                "select count(*) from x_settlements where published_at is null"
            )
            return int(n) == 0

        await _until(all_published, "every settlement published")
        await relay.stop()
        assert relay.failures > failures_before, "the relay never met NATS away"
        expected = [
            (r["job_id"], r["attempt"], r["outcome"])
            for r in await pg_pool.fetch(
                "select job_id, attempt, outcome from x_settlements order by seq"
            )
        ]
        assert len(expected) > JOBS  # some jobs settled twice (retried, then completed)
        reader = await nats.connect(server.url)
        sub = await reader.jetstream().pull_subscribe(
            names.settled_wildcard, stream=names.settled_stream
        )
        got: list[tuple[str, int, str]] = []
        while len(got) < len(expected):
            for m in await sub.fetch(batch=200, timeout=5):
                body = orjson.loads(m.data)
                got.append((body["id"], body["attempt"], body["outcome"]))
                await m.ack()
        await reader.close()
        await nc.close()
        assert sorted(got) == sorted(expected), "lost or doubled settlements"
        seen: dict[str, list[int]] = {}
        for job_id, attempt, _ in got:
            seen.setdefault(job_id, []).append(attempt)
        assert all(attempts == sorted(attempts) for attempts in seen.values())
