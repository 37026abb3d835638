"""``"debounce"`` over NATS, the HTTP edge's reading: on the request/reply subject (answered
``debounced``, within the token's tenant only) and on the enqueue stream (a batch of messages
of one key makes one run, which takes the last message's input)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
import pytest

from tests.services.api_support import ORG_A, ORG_B, MakeClient
from tests.services.nats_support import NatsApi, in_process, start_nats_api
from ujobs.services.nats.consumer import stream_position


def notify(user: str, *items: str) -> dict[str, Any]:
    """The sample app's ``notify``: tenant "none", key ``notify:<user>`` (per token tenant)."""
    return {"user_id": user, "items": [{"id": i} for i in items]}


@pytest.fixture
async def edge(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> AsyncIterator[NatsApi]:
    async for started in start_nats_api(aiohttp_client, pg_dsn, pg_pool, nats_url):
        yield started


async def test_a_request_debounces_within_its_tenant_and_says_so(edge: NatsApi) -> None:
    a = await edge.token("enqueue:notify", tenant=ORG_A)
    b = await edge.token("enqueue:notify", tenant=ORG_B)
    subject = edge.names.enqueue_subject("notify")
    first = await edge.request(subject, {"input": notify(ORG_A), "debounce": "5s"}, a)
    assert (first["deduped"], first["debounced"]) == (False, False)
    moved = await edge.request(subject, {"input": notify(ORG_A, "x"), "debounce": "5s"}, a)
    assert moved == {**first, "deduped": True, "debounced": True}
    other = await edge.request(subject, {"input": notify(ORG_A, "y"), "debounce": "5s"}, b)
    assert (other["deduped"], other["debounced"]) == (False, False)
    rows = {r["tenant_id"]: r for r in await edge.jobs()}
    assert orjson.loads(rows[ORG_A]["input"]) == notify(ORG_A, "x")
    assert orjson.loads(rows[ORG_B]["input"]) == notify(ORG_A, "y")
    assert rows[ORG_A]["state"] == "delayed"
    bad = await edge.request(subject, {"input": notify(ORG_A), "debounce": "never"}, a)
    assert bad["error"]["code"] == "X_INPUT_INVALID"
    assert bad["error"]["meta"]["issues"][0]["path"] == "debounce"


@pytest.mark.parametrize("cached_tokens", [False, True])
async def test_stream_messages_of_one_key_make_one_run_with_the_last_input(
    pg_pool: asyncpg.Pool[Any], nats_url: str, cached_tokens: bool
) -> None:
    async with in_process(pg_pool, nats_url, cached_tokens=cached_tokens) as ip:
        a = await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:notify"])
        b = await ip.tokens.create(tenant=ORG_B, scopes=["enqueue:notify"])
        subject = ip.names.js_enqueue_subject("notify")
        for item in ("1", "2", "3"):
            await ip.publish(subject, {"input": notify(ORG_A, item), "debounce": "5s"}, a.secret)
        await ip.publish(subject, {"input": notify(ORG_A, "b"), "debounce": "5s"}, b.secret)
        assert await ip.consumer.run_once() == 4
        assert ip.consumer.acked == 4
        rows = list(await pg_pool.fetch("select tenant_id, input from x_jobs"))
        by_tenant = {r["tenant_id"]: orjson.loads(r["input"]) for r in rows}
        assert len(rows) == 2
        assert by_tenant == {ORG_A: notify(ORG_A, "3"), ORG_B: notify(ORG_A, "b")}


@pytest.mark.parametrize("batched", [False, True])
async def test_a_debounce_delivered_again_after_a_newer_one_keeps_the_newer_input(
    pg_pool: asyncpg.Pool[Any], nats_url: str, batched: bool
) -> None:
    """The second message's row commits and its ack is lost; the third moves the run; the
    second comes back: it moves nothing, on the batched path and on the one-by-one path."""
    async with in_process(pg_pool, nats_url, cached_tokens=batched) as ip:
        token = await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:notify"])
        subject = ip.names.js_enqueue_subject("notify")
        for item in ("1", "2", "3"):
            body = {"input": notify(ORG_A, item), "debounce": "5s"}
            await ip.publish(subject, body, token.secret)
        sub = await ip.js.pull_subscribe_bind(
            durable=ip.names.durable, stream=ip.names.enqueue_stream
        )
        msgs = await sub.fetch(batch=3, timeout=5)
        assert len(msgs) == 3
        for msg in msgs:
            await ip.edge.enqueue(
                "notify",
                msg.data,
                f"Bearer {token.secret}",
                job_id=stream_position("notify", msg)[0],
                debounce_seq=stream_position("notify", msg)[1],
            )
            if msg is msgs[1]:
                await msg.nak()  # the api died before this ack
            else:
                await msg.ack()
        await sub.unsubscribe()
        if batched:
            assert await ip.consumer.run_once() == 1
        else:
            [again] = await (
                await ip.js.pull_subscribe_bind(
                    durable=ip.names.durable, stream=ip.names.enqueue_stream
                )
            ).fetch(batch=1, timeout=5)
            await ip.consumer.handle(again)
        [row] = await pg_pool.fetch("select input, debounce_seq from x_jobs")
        assert orjson.loads(row["input"]) == notify(ORG_A, "3")
        assert row["debounce_seq"] == stream_position("notify", msgs[2])[1]
