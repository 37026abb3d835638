"""``ujobs webhook-deliverer`` as a real process: it runs the built-in families with no app,
drains on SIGTERM, and a deliverer SIGKILLed mid-POST has its delivery re-sent by the next one
without the ledger counting the lost attempt."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from redis.asyncio import Redis

from tests.e2e.service_process import ServiceProcess, service_env
from tests.support.webhook_receiver import Receiver
from tests.webhooks.kit import LOCAL
from ujobs.drivers import redis_driver
from ujobs.drivers.postgres import postgres_driver
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver
from ujobs.webhooks import builtin
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.signature import verify_standard
from ujobs.webhooks.store_pg import PgWebhookStore

pytestmark = pytest.mark.slow

KEY = base64.b64encode(os.urandom(32)).decode()
WAIT_S = 30.0


def deliverer_env(dsn: str) -> dict[str, str]:
    return service_env(
        DATABASE_URL=dsn,
        UJOBS_SECRET_KEY=KEY,
        UJOBS_WEBHOOK_ALLOW_PRIVATE="127.0.0.1/32",
        UJOBS_WEBHOOK_ALLOW_HTTP="1",
        UJOBS_VISIBILITY_TIMEOUT_MS="1500",
        UJOBS_DRAIN_DEADLINE_MS="5000",
    )


@pytest.fixture
async def store(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[PgWebhookStore]:
    found = PgWebhookStore(pg_pool, SecretBox.parse(KEY), policy=LOCAL)
    driver = postgres_driver(pg_pool)
    set_job_driver(driver)
    try:
        yield found
    finally:
        reset_job_driver()
        await driver.close()


async def wait_for(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), WAIT_S)


async def until_row(pool: asyncpg.Pool[Any], sql: str, want: Any) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while (got := await pool.fetchval(sql)) != want:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{sql!r} stayed {got!r}, never {want!r}")
        await asyncio.sleep(0.05)


async def test_the_deliverer_runs_the_built_in_family_with_no_app(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], store: PgWebhookStore, receiver: Receiver
) -> None:
    created = await store.add_endpoint(receiver.url(), tenant="org_a", endpoint_id="ep_1")
    # A row from before migration 0019: its header value in clear; the deliverer's start seals it.
    await pg_pool.execute(
        """update x_webhook_endpoints set headers = '{"X-Api-Key": "k-clear-1"}'::jsonb"""
    )
    deliverer = await ServiceProcess.start("webhook-deliverer", env=deliverer_env(pg_dsn))
    try:
        await deliverer.log_event("ujobs.service.started")
        row = await pg_pool.fetchrow(
            "select headers::text, headers_sealed from x_webhook_endpoints"
        )
        assert row is not None
        assert row["headers"] == '{"X-Api-Key": ""}'
        assert row["headers_sealed"].startswith("v1:k1:")
        assert "k-clear-1" not in str(tuple(row))
        await builtin.publish("orders.paid", b'{"n": 1}', tenant="org_a", store=store)
        await wait_for(receiver.arrived)
        got = receiver.requests[0]
        verify_standard(created.secret, got.headers, got.body)
        assert got.headers["X-Api-Key"] == "k-clear-1"
        await until_row(
            pg_pool, "select count(*) from x_webhook_deliveries where outcome = 'delivered'", 1
        )
        deliverer.terminate()
        assert await deliverer.exit_code(WAIT_S) == 0
    finally:
        await deliverer.kill()


async def test_a_deliverer_killed_mid_post_is_redelivered_and_counted_once(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], store: PgWebhookStore, receiver: Receiver
) -> None:
    await store.add_endpoint(receiver.url(), tenant="org_a", endpoint_id="ep_1")
    hold = asyncio.Event()

    async def first_hangs(request: web.Request, body: bytes) -> web.StreamResponse:
        if len(receiver.requests) == 1:
            await hold.wait()
        return web.Response(status=200, text="ok")

    receiver.answer = first_hangs
    first = await ServiceProcess.start("webhook-deliverer", env=deliverer_env(pg_dsn))
    second: ServiceProcess | None = None
    try:
        await first.log_event("ujobs.service.started")
        published = await builtin.publish(
            "orders.paid", b"{}", tenant="org_a", event_id="evt_1", store=store
        )
        [delivery] = published.deliveries
        await wait_for(receiver.arrived)  # the POST is on the wire
        first.proc.send_signal(signal.SIGKILL)
        assert await first.exit_code(WAIT_S) == -signal.SIGKILL
        hold.set()
        second = await ServiceProcess.start("webhook-deliverer", env=deliverer_env(pg_dsn))
        await until_row(pg_pool, f"select state from x_jobs where id = '{delivery.id}'", "done")
        # Successes reach the ledger in batches a few milliseconds apart.
        await until_row(pg_pool, "select count(*) from x_webhook_deliveries", 1)
        rows = await pg_pool.fetch(
            "select attempt, outcome, status from x_webhook_deliveries order by seq"
        )
        assert [tuple(r) for r in rows] == [(2, "delivered", 200)]
        assert await pg_pool.fetchval("select consecutive_failures from x_webhook_endpoints") == 0
        assert [r.headers["webhook-id"] for r in receiver.requests] == ["evt_1", "evt_1"]
        second.terminate()
        assert await second.exit_code(WAIT_S) == 0
    finally:
        hold.set()
        await first.kill()
        if second is not None:
            await second.kill()


async def test_the_deliverer_runs_on_the_redis_driver_without_the_cap(
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    redis_url: str,
    redis_prefix: str,
    receiver: Receiver,
) -> None:
    store = PgWebhookStore(pg_pool, SecretBox.parse(KEY), policy=LOCAL)
    created = await store.add_endpoint(receiver.url(), endpoint_id="ep_1")
    client = Redis.from_url(redis_url)
    set_job_driver(redis_driver(client, prefix=redis_prefix))
    env = {
        **deliverer_env(pg_dsn),
        "REDIS_URL": redis_url,
        "UJOBS_DRIVER": "redis",
        "UJOBS_REDIS_PREFIX": redis_prefix,
        "UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY": "0",
    }
    deliverer = await ServiceProcess.start("webhook-deliverer", env=env)
    try:
        await deliverer.log_event("ujobs.service.started")
        await builtin.publish("orders.paid", b"{}", store=store)
        await wait_for(receiver.arrived)
        verify_standard(created.secret, receiver.requests[0].headers, receiver.requests[0].body)
        deliverer.terminate()
        assert await deliverer.exit_code(WAIT_S) == 0
    finally:
        await deliverer.kill()
        reset_job_driver()
        await client.aclose()
