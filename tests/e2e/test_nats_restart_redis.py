"""The Redis-only deployment's settlements through a NATS restart (a PRIVATE nats-server,
never the shared one): settles keep landing in Redis, their entries wait in the stream
``{prefix}:settled``, and every one reaches ``<PREFIX>_SETTLED`` exactly once, each job's in
the order they happened."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import nats
import orjson
import pytest

from tests.services.nats_support import unique_prefix
from tests.support.conformance import claim, req
from tests.support.redis_keys import redis_test_driver
from tests.support.restartable import PrivateNats
from ujobs.drivers.base import NackOptions
from ujobs.drivers.redis.settlements import RedisSettlementsOutbox
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.service import connect
from ujobs.services.nats.settlements_redis import RedisSettlementsRelay
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


async def test_nats_restarted_while_redis_workers_settle_loses_no_settlement(
    redis_url: str, redis_prefix: str
) -> None:
    with PrivateNats() as server:
        async with redis_test_driver(redis_url, redis_prefix, settlements=True) as driver:
            names = NatsNames(unique_prefix())
            nc = await connect(server.url, name="restart-test")
            js = nc.jetstream()
            await ensure_streams(js, names)
            outbox = RedisSettlementsOutbox(driver.client, redis_prefix)
            relay = RedisSettlementsRelay(outbox, js, names, retry_s=0.1, publish_timeout_s=0.5)
            await relay.start()
            await driver.enqueue_many(
                [req("billing.charge", key=str(uuid.uuid4()), max_attempts=3) for _ in range(JOBS)]
            )
            expected: list[tuple[str, int, str]] = []

            async def settle_everything() -> None:
                # Every third job fails its first attempt and retries: two settlements.
                finished = 0
                while finished < JOBS:
                    for job in await claim(driver, limit=10):
                        if job.attempt == 1 and int(job.id[-4:], 16) % 3 == 0:
                            retry = NackOptions(error="X_LATER: again", run_at_ms=0)
                            assert await driver.nack(job.id, job.ref, retry)
                            expected.append((job.id, 1, "retried"))
                        else:
                            assert await driver.ack(job.id, job.ref)
                            expected.append((job.id, job.attempt, "completed"))
                            finished += 1
                    await asyncio.sleep(0.01)

            settling = asyncio.get_running_loop().create_task(settle_everything())

            async def a_quarter_settled() -> bool:
                return len(expected) >= JOBS // 4

            await _until(a_quarter_settled, "a quarter of the jobs")
            await asyncio.to_thread(server.stop)
            failures_before = relay.failures
            # Settles keep landing in Redis; NATS is away for longer than a publish waits.
            await asyncio.sleep(2.0)
            await asyncio.to_thread(server.start)
            await settling

            async def all_published() -> bool:
                return (await outbox.pending())[0] == 0

            await _until(all_published, "every settlement published")
            await relay.stop()
            assert relay.failures > failures_before, "the relay never met NATS away"
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
            info = await reader.jetstream().stream_info(names.settled_stream)
            await reader.close()
            await nc.close()
            assert sorted(got) == sorted(expected), "lost settlements"
            assert info.state.messages == len(expected), "doubled settlements"
            seen: dict[str, list[int]] = {}
            for job_id, attempt, _ in got:
                seen.setdefault(job_id, []).append(attempt)
            assert all(attempts == sorted(attempts) for attempts in seen.values())
