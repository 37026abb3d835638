"""The two bounds on a stream message that never ends by itself, against a real nats-server:
one delivered past ``REDELIVERY_BOUND`` * ``max_deliveries`` times (an api died with it in hand
each time: no error path ever counted it) is refused at receipt, untouched; and while the store
is away the consumer stops asking, so an outage does not spend a message's deliveries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import orjson
from nats.aio.msg import Msg

from tests.services.api_support import ORG_A, ORG_B, mail
from tests.services.nats_support import InProcess, away_pool, in_process
from ujobs.services.nats.consumer import REDELIVERY_BOUND

WAIT_S = 30.0


async def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


async def _listen(ip: InProcess, subject: str) -> asyncio.Queue[dict[str, Any]]:
    got: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def cb(msg: Msg) -> None:
        await got.put(orjson.loads(msg.data))

    await ip.nc.subscribe(subject, cb=cb)
    await ip.nc.flush()
    return got


async def _die_with_it_in_hand(ip: InProcess, times: int) -> None:
    """Take the next message from the api's own durable consumer ``times`` times and never
    finish it, as an api that crashes on it would (a nak stands in for ``ack_wait``)."""
    sub = await ip.js.pull_subscribe_bind(durable=ip.names.durable, stream=ip.names.enqueue_stream)
    for _ in range(times):
        (msg,) = await sub.fetch(1, timeout=10)
        await msg.nak()
    await sub.unsubscribe()


async def test_a_message_delivered_past_the_bound_is_refused_untouched(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async with in_process(pg_pool, nats_url, max_deliveries=1) as ip:
        bound = REDELIVERY_BOUND * 1
        token = (await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:send_mail"])).secret
        rejected = await _listen(ip, ip.names.rejected_subject("send_mail"))
        subject = ip.names.js_enqueue_subject("send_mail")
        await ip.publish(subject, {"input": mail(subject="crashes")}, token, msg_id="m-1")
        await _die_with_it_in_hand(ip, bound)
        assert await ip.consumer.run_once() == 1
        body = await asyncio.wait_for(rejected.get(), WAIT_S)
        assert body["error"]["code"] == "X_NATS_REDELIVERED"
        assert body["error"]["meta"] == {"deliveries": bound + 1, "bound": bound}
        assert (body["msgId"], body["deliveries"]) == ("m-1", bound + 1)
        assert (ip.consumer.redelivered, ip.consumer.refused, ip.consumer.acked) == (1, 1, 0)
        assert await pg_pool.fetchval("select count(*) from x_jobs") == 0  # untouched
        info = await ip.js.stream_info(ip.names.enqueue_stream)
        assert info.state.messages == 0  # terminated: it ends here


async def test_a_message_at_the_bound_still_lands(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    """The bound is strict: delivery number ``bound`` is handled as any other."""
    async with in_process(pg_pool, nats_url, max_deliveries=1) as ip:
        bound = REDELIVERY_BOUND * 1
        token = (await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:send_mail"])).secret
        subject = ip.names.js_enqueue_subject("send_mail")
        await ip.publish(subject, {"input": mail(subject="late")}, token, msg_id="m-1")
        await _die_with_it_in_hand(ip, bound - 1)
        assert await ip.consumer.run_once() == 1
        assert (ip.consumer.acked, ip.consumer.redelivered) == (1, 0)
        assert await pg_pool.fetchval("select count(*) from x_jobs") == 1


async def test_a_worn_message_does_not_hold_back_another_tenants(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async with in_process(pg_pool, nats_url, max_deliveries=1) as ip:
        bound = REDELIVERY_BOUND * 1
        token_a = (await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:send_mail"])).secret
        token_b = (await ip.tokens.create(tenant=ORG_B, scopes=["enqueue:send_mail"])).secret
        subject = ip.names.js_enqueue_subject("send_mail")
        await ip.publish(subject, {"input": mail(subject="worn")}, token_a, msg_id="m-2")
        await _die_with_it_in_hand(ip, bound)
        await ip.publish(
            subject, {"input": mail(org=ORG_B, to="b@example.com", subject="b")}, token_b
        )
        taken = 0
        while taken < 2:
            taken += await ip.consumer.run_once()
        assert (ip.consumer.acked, ip.consumer.redelivered) == (1, 1)
        tenants = await pg_pool.fetch("select tenant_id from x_jobs")
        assert [r["tenant_id"] for r in tenants] == [ORG_B]


async def test_while_the_store_is_away_the_consumer_stops_asking(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    broken = await away_pool()
    store_up = asyncio.Event()
    pings = 0

    async def ping() -> None:
        nonlocal pings
        pings += 1
        if not store_up.is_set():
            raise ConnectionRefusedError("the database is away")

    async with in_process(pg_pool, nats_url, pool_for_edge=broken, ping=ping) as ip:
        token = (await ip.tokens.create(tenant=None, scopes=["enqueue:*"])).secret
        await ip.consumer.start()
        await ip.publish(ip.names.js_enqueue_subject("send_mail"), {"input": mail()}, token)
        await _until(lambda: ip.consumer.retried == 1, "the first failed delivery")
        assert ip.consumer.store_away  # paused before the nak went out
        # The nak asks for the message again after a second; paused, nobody takes it.
        await _until(lambda: pings >= 2, "two failed pings")
        assert ip.consumer.retried == 1
        assert ip.consumer.store_away
        store_up.set()
        await _until(lambda: ip.consumer.retried == 2, "the delivery after the store answered")
        assert ip.consumer.refused == 0
    await broken.close()
