"""The per-token rate limit on the NATS request/reply subjects: the HTTP edge's buckets (one
per token, the same instance, so HTTP and NATS requests count together), answered with the
HTTP 429's error body and nothing enqueued."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import nats
import orjson
import pytest
from nats.aio.client import Client

from tests.services.api_support import Api, MakeClient, mail, make_api
from tests.services.nats_support import drop_streams, unique_prefix
from ujobs.clock import FrozenClock
from ujobs.services.nats.names import NatsNames

RATE = 2


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def throttled(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    nats_url: str,
    clock: FrozenClock,
) -> AsyncIterator[tuple[Api, Client, NatsNames]]:
    names = NatsNames(unique_prefix())
    api = await make_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        clock=clock,
        NATS_URL=nats_url,
        UJOBS_NATS_PREFIX=names.prefix,
        UJOBS_API_RATE_PER_TOKEN=str(RATE),
    )
    nc = await nats.connect(nats_url)
    try:
        yield api, nc, names
    finally:
        await drop_streams(nc, names)
        await nc.drain()


async def _ask(nc: Client, subject: str, body: Any, token: str) -> Any:
    reply = await nc.request(
        subject, orjson.dumps(body), timeout=10, headers={"Authorization": f"Bearer {token}"}
    )
    return orjson.loads(reply.data)


async def test_over_the_rate_a_request_gets_the_429_body_and_enqueues_nothing(
    throttled: tuple[Api, Client, NatsNames], clock: FrozenClock
) -> None:
    api, nc, names = throttled
    busy = await api.token("enqueue:*", "events:publish")
    calm = await api.token("enqueue:*")
    subject = names.enqueue_subject("send_mail")
    for n in range(RATE):
        assert "id" in await _ask(nc, subject, {"input": mail(to=f"{n}@x.io")}, busy)
    over = await _ask(nc, subject, {"input": mail(to="over@x.io")}, busy)
    assert over["error"]["code"] == "X_RATE_LIMITED"
    assert over["error"]["meta"] == {"retryAfterMs": 1000 // RATE, "rate": RATE}
    assert len(await api.jobs()) == RATE
    events = await _ask(nc, names.event_subject("paid"), {"payload": {}}, busy)
    assert events["error"]["code"] == "X_RATE_LIMITED"
    # Another token has a bucket of its own.
    assert "id" in await _ask(nc, subject, {"input": mail(to="calm@x.io")}, calm)
    # The bucket refills on the api's clock.
    clock.advance(1000 // RATE)
    assert "id" in await _ask(nc, subject, {"input": mail(to="later@x.io")}, busy)


async def test_http_and_nats_requests_share_one_bucket(
    throttled: tuple[Api, Client, NatsNames],
) -> None:
    api, nc, names = throttled
    token = await api.token("enqueue:*", "read")
    subject = names.enqueue_subject("send_mail")
    for n in range(RATE):
        assert "id" in await _ask(nc, subject, {"input": mail(to=f"{n}@x.io")}, token)
    http = await api.client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert http.status == 429
    body = await http.json()
    assert body["error"]["code"] == "X_RATE_LIMITED"


async def test_the_stream_form_is_never_throttled(
    throttled: tuple[Api, Client, NatsNames],
) -> None:
    """A refused stream message is terminated: throttling it would drop promised work."""
    api, nc, names = throttled
    token = await api.token("enqueue:*")
    js = nc.jetstream()
    over = 3 * RATE
    for n in range(over):
        await js.publish(
            names.js_enqueue_subject("send_mail"),
            orjson.dumps({"input": mail(to=f"{n}@x.io")}),
            headers={"Authorization": f"Bearer {token}"},
        )
    deadline = asyncio.get_running_loop().time() + 20
    while len(await api.jobs()) < over and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    assert len(await api.jobs()) == over
