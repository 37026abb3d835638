"""The poison flood of issue 34 against a real ``ujobs api`` process with its defaults: more
poison messages than the consumer's ``max_ack_pending`` (2,048) ahead of another tenant's
message. The other tenant's message lands, every poison message ends on the rejected subject
within ``UJOBS_NATS_MAX_DELIVERIES`` (5) deliveries, and the api's log is not one line per
failing delivery."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import nats
import orjson
import pytest
from nats.aio.msg import Msg

from tests.e2e.service_process import ServiceProcess, service_env
from tests.services.api_support import ORG_A, ORG_B
from tests.services.nats_support import drop_streams, unique_prefix
from tests.services.poison_app import POISON
from ujobs.services.api.tokens import TokenStore
from ujobs.services.config.variables import (
    DEFAULT_NATS_MAX_ACK_PENDING,
    DEFAULT_NATS_MAX_DELIVERIES,
)
from ujobs.services.nats.names import NatsNames

pytestmark = pytest.mark.slow

POISON_MESSAGES = DEFAULT_NATS_MAX_ACK_PENDING + 52
WAIT_S = 180.0
FAILING_LINES = ("ujobs.nats.enqueue-retried", "ujobs.nats.enqueue-gave-up")


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.1)


async def test_a_poison_flood_past_max_ack_pending_ends_and_strands_nobody(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    store = TokenStore(pg_pool)
    hostile = (await store.create(tenant=ORG_A, scopes=["enqueue:fragile"])).secret
    victim = (await store.create(tenant=ORG_B, scopes=["enqueue:fragile"])).secret
    rejected: list[dict[str, Any]] = []

    async def on_rejected(msg: Msg) -> None:
        rejected.append(orjson.loads(msg.data))

    await nc.subscribe(names.rejected_subject("fragile"), cb=on_rejected)
    env = service_env(
        DATABASE_URL=pg_dsn,
        NATS_URL=nats_url,
        UJOBS_NATS_PREFIX=names.prefix,
        UJOBS_APP="tests.services.poison_app:api",
    )
    api = await ServiceProcess.start("api", "--port", "0", env=env)
    try:
        await api.log_event("ujobs.api.listening", 60)
        subject = names.js_enqueue_subject("fragile")
        for start in range(0, POISON_MESSAGES, 200):
            acks = [
                js.publish(
                    subject,
                    orjson.dumps({"input": {"org_id": ORG_A, "note": POISON}}),
                    headers={"Authorization": f"Bearer {hostile}", "Nats-Msg-Id": f"p-{i}"},
                )
                for i in range(start, min(start + 200, POISON_MESSAGES))
            ]
            await asyncio.gather(*acks)
        await js.publish(
            subject,
            orjson.dumps({"input": {"org_id": ORG_B, "note": "paid"}}),
            headers={"Authorization": f"Bearer {victim}"},
        )

        async def landed() -> bool:
            return bool(await pg_pool.fetchval("select count(*) from x_jobs"))

        async def all_rejected() -> bool:
            return len(rejected) >= POISON_MESSAGES

        await _until(landed, "the other tenant's message to land")
        await _until(all_rejected, "every poison message on the rejected subject")
        [row] = await pg_pool.fetch("select tenant_id from x_jobs")
        assert row["tenant_id"] == ORG_B
        assert {r["msgId"] for r in rejected} == {f"p-{i}" for i in range(POISON_MESSAGES)}
        assert {(r["error"]["code"], r["deliveries"]) for r in rejected} == {
            ("X_INTERNAL", DEFAULT_NATS_MAX_DELIVERIES)
        }
        lines = [line for event in FAILING_LINES for line in api.events(event)]
        failing = POISON_MESSAGES * DEFAULT_NATS_MAX_DELIVERIES
        # One line per kind per 10 s, each counting the lines it stands for: every failing
        # delivery is accounted for, by far the most of them left out.
        assert len(lines) + sum(line["suppressed"] for line in lines) <= failing
        assert len(lines) * 100 < failing
    finally:
        await api.kill()
        await drop_streams(nc, names)
        await nc.drain()
