"""The pull feed against a real nats-server: it never holds more than its window, ``done``
lets more in, and ``stop`` leaves what the last request delivered for ``take``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from tests.services.nats_support import drop_streams, unique_prefix
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.pull import PullFeed
from ujobs.services.nats.streams import ensure_streams


@contextlib.asynccontextmanager
async def _stream(
    nats_url: str, messages: int
) -> AsyncIterator[tuple[JetStreamContext, NatsNames, PullFeed]]:
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, names)
    for i in range(messages):
        await js.publish(names.js_enqueue_subject("notify"), str(i).encode())
    feed = PullFeed(nc, names.enqueue_stream, names.durable, window=10, batch=8, expires_s=0.5)
    try:
        yield js, names, feed
    finally:
        await feed.close()
        await drop_streams(nc, names)
        await nc.drain()


async def _settle(feed: PullFeed, held: int) -> list[bytes]:
    """What has landed once ``held`` messages are in hand (and a moment for any extra)."""
    got: list[bytes] = []
    for _ in range(200):
        got += [m.data for m in feed.take_now(100)]
        if len(got) >= held:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    return got + [m.data for m in feed.take_now(100)]


async def test_the_feed_holds_at_most_its_window_until_done(nats_url: str) -> None:
    async with _stream(nats_url, 25) as (_, _names, feed):
        await feed.start()
        first = await _settle(feed, 10)
        assert first == [str(i).encode() for i in range(10)]  # the window, in stream order
        feed.done(10)
        second = await _settle(feed, 10)
        assert second == [str(i).encode() for i in range(10, 20)]
        feed.done(10)
        third = await _settle(feed, 5)
        assert third == [str(i).encode() for i in range(20, 25)]


async def test_stop_leaves_what_landed_for_take_then_ends(nats_url: str) -> None:
    async with _stream(nats_url, 3) as (_, _names, feed):
        await feed.start()
        got = await asyncio.wait_for(feed.take(1), 5)
        await feed.stop()
        while msgs := await asyncio.wait_for(feed.take(10), 5):
            got += msgs
        assert [m.data for m in got] == [b"0", b"1", b"2"]
        for msg in got:
            await msg.ack()


async def test_a_refused_request_is_sent_again_after_a_pause_not_at_once(
    nats_url: str,
) -> None:
    names = NatsNames(unique_prefix())  # no stream: a stand-in answers the pull requests
    nc = await nats.connect(nats_url)

    async def refuse(msg: Msg) -> None:
        # What JetStream answers when a consumer has too many requests waiting.
        await nc.publish(msg.reply, b"", headers={"Status": "409"})

    await nc.subscribe(
        f"$JS.API.CONSUMER.MSG.NEXT.{names.enqueue_stream}.{names.durable}", cb=refuse
    )
    feed = PullFeed(nc, names.enqueue_stream, names.durable, window=10, batch=8, expires_s=0.5)
    try:
        await feed.start()
        await asyncio.sleep(0.5)  # a loop asking again at once would send hundreds
        assert 1 <= feed.requests <= 2
    finally:
        await feed.close()
        await nc.drain()
