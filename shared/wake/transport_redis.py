"""The Redis transport of the wake: one SUBSCRIBE connection per dial, probes published through
another connection.

redis-py may reconnect a pub/sub connection by itself and re-subscribe: announces published in
the gap are lost and nothing would say so. A second ``subscribe`` confirmation on a session is
therefore treated as a lost session, so the wake re-proves it like any re-dial.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis

from ujobs.wake.session import Deliver, WakeSession

SESSION_CLIENT_NAME = "ujobs-wake"
OPEN_TIMEOUT_S = 5.0
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/\-]")


def session_client_name(channel: str) -> str:
    """The CLIENT SETNAME of a wake's subscription connection: operators (and tests) can find
    it in CLIENT LIST. Names cannot hold spaces, so anything unusual becomes ``_``."""
    return f"{SESSION_CLIENT_NAME}:{_NAME_UNSAFE.sub('_', channel)}"[:120]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else str(value)


class RedisSession:
    def __init__(
        self,
        publisher: aioredis.Redis,
        subscriber: Callable[[Sequence[str]], aioredis.Redis],
        owns_subscriber: bool,
    ) -> None:
        self._publisher = publisher
        self._make_subscriber = subscriber
        self._owns_subscriber = owns_subscriber
        self._subscriber: aioredis.Redis | None = None
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self, channels: Sequence[str], deliver: Deliver) -> None:
        self._subscriber = self._make_subscriber(channels)
        self._pubsub = self._subscriber.pubsub()
        await self._pubsub.subscribe(*channels)
        waiting = set(channels)
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            while waiting:
                message = await self._pubsub.get_message(timeout=OPEN_TIMEOUT_S)
                if message is None:
                    continue
                if message["type"] == "subscribe":
                    waiting.discard(_text(message["channel"]))
                elif message["type"] == "message":
                    deliver(_text(message["channel"]), _text(message["data"]))
        self._reader = asyncio.ensure_future(self._read(deliver))

    async def _read(self, deliver: Deliver) -> None:
        while True:
            message = await self._pubsub.get_message(timeout=None)
            if message is None:
                continue
            kind = message["type"]
            if kind == "message":
                deliver(_text(message["channel"]), _text(message["data"]))
            elif kind == "subscribe":
                raise ConnectionError("the pub/sub connection reconnected by itself")

    async def probe(self, channel: str, token: str) -> None:
        await self._publisher.publish(channel, token)

    async def lost(self) -> None:
        if self._reader is not None:
            await asyncio.wait({self._reader})

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        pubsub, self._pubsub = self._pubsub, None
        subscriber, self._subscriber = self._subscriber, None
        try:
            if pubsub is not None:
                await pubsub.aclose()
        finally:
            if subscriber is not None and self._owns_subscriber:
                await subscriber.aclose()


def redis_session_factory(
    client_or_url: aioredis.Redis | str,
) -> tuple[Callable[[], WakeSession], Callable[[], Awaitable[None]]]:
    """``(new session, close what was built here)`` for a URL or a caller's client."""
    if isinstance(client_or_url, str):
        url = client_or_url
        publisher = aioredis.Redis.from_url(url, socket_connect_timeout=OPEN_TIMEOUT_S)

        def subscriber(channels: Sequence[str]) -> aioredis.Redis:
            return aioredis.Redis.from_url(
                url,
                client_name=session_client_name(channels[0]),
                socket_connect_timeout=OPEN_TIMEOUT_S,
            )

        def make() -> WakeSession:
            return RedisSession(publisher, subscriber, owns_subscriber=True)

        async def close() -> None:
            await publisher.aclose()

        return make, close

    client = client_or_url

    def make_shared() -> WakeSession:
        return RedisSession(client, lambda _channels: client, owns_subscriber=False)

    async def nothing() -> None:
        return None

    return make_shared, nothing
