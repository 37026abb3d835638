"""A real ``ujobs api`` SIGKILLed while it consumes the enqueue stream: every message a
producer got its publish ack for becomes exactly one job — none lost, none doubled — once an
api runs again."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import nats
import orjson
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from tests.services.nats_support import drop_streams, unique_prefix
from ujobs.services.api.tokens import TokenStore
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.streams import ensure_streams

pytestmark = pytest.mark.slow

MESSAGES = 10_000
WAIT_S = 90.0


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


async def test_api_sigkilled_while_consuming_loses_none_and_doubles_none(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, names, ack_wait_s=1.0)
    token = (await TokenStore(pg_pool).create(tenant=None, scopes=["enqueue:*"])).secret
    subject = names.js_enqueue_subject("notify")
    for start in range(0, MESSAGES, 200):
        acks = []
        for i in range(start, start + 200):
            headers = {"Authorization": f"Bearer {token}"}
            if i % 2 == 0:
                headers["Nats-Msg-Id"] = f"order-{i}"
            body = {"input": {"user_id": str(uuid.uuid4()), "items": []}}
            acks.append(js.publish(subject, orjson.dumps(body), headers=headers))
        await asyncio.gather(*acks)  # every message below is acked by the stream
    env = service_env(
        DATABASE_URL=pg_dsn,
        NATS_URL=nats_url,
        UJOBS_NATS_PREFIX=names.prefix,
        UJOBS_APP="tests.unit.sample_app:api",
        UJOBS_NATS_ACK_WAIT_MS="1000",
    )

    async def rows() -> int:
        return int(await pg_pool.fetchval("select count(*) from x_jobs"))

    first = await ServiceProcess.start("api", "--port", "0", env=env)
    try:

        async def some_rows() -> bool:
            return await rows() >= MESSAGES // 10

        await _until(some_rows, "the first api to commit some rows")
        await first.kill()  # SIGKILL, mid-stream
    finally:
        await first.kill()
    at_kill = await rows()
    assert at_kill < MESSAGES, "the api finished before the kill: nothing was in hand"
    # Workers ran what was queued meanwhile: a finished row no longer holds its idempotency
    # key, so only the id derived from the message can make a redelivery meet its row.
    await pg_pool.execute("update x_jobs set state = 'done', finished_at = now()")
    second = await ServiceProcess.start("api", "--port", "0", env=env)
    try:

        async def drained() -> bool:
            info = await js.consumer_info(names.enqueue_stream, names.durable)
            return await rows() >= MESSAGES and info.num_pending == 0 and info.num_ack_pending == 0

        await _until(drained, "the second api to drain the stream")
        await asyncio.sleep(2.5)  # past two ack waits: a late redelivery would show up now
        assert await rows() == MESSAGES
        distinct = await pg_pool.fetchval("select count(distinct idempotency_key) from x_jobs")
        assert distinct == MESSAGES
        second.terminate()
        assert await second.exit_code(30) == 0
    finally:
        await second.kill()
        await drop_streams(nc, names)
        await nc.drain()
