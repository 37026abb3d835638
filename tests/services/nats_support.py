"""The api with its NATS edge on (a prefix of the test's own), a NATS client, and tokens."""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import nats
import orjson
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from tests.services.api_support import Api, MakeClient, make_api
from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.events.bus import set_event_bus
from ujobs.events.bus_postgres import postgres_event_bus
from ujobs.services.api.enqueue_batcher import EnqueueBatcher
from ujobs.services.api.token_facts import KnownTokens
from ujobs.services.api.token_guard import token_guard
from ujobs.services.api.tokens import TokenRecord, TokenStore
from ujobs.services.nats.consumer import MAX_DELIVERIES, StreamConsumer
from ujobs.services.nats.edge import NatsEdge
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.streams import ensure_streams
from ujobs.services.runtime.app_loader import load_api
from ujobs.wake.announce import announcing

SAMPLE_APP = "tests.unit.sample_app:api"


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@dataclass
class NatsApi:
    """A live api whose NATS edge listens under ``names``, and a client of the same NATS."""

    api: Api
    nc: Client
    names: NatsNames

    async def token(self, *scopes: str, tenant: str | None = None) -> str:
        return await self.api.token(*scopes, tenant=tenant)

    async def request(
        self, subject: str, body: Any, token: str | None, *, raw: bytes | None = None
    ) -> Any:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        data = raw if raw is not None else orjson.dumps(body)
        reply = await self.nc.request(subject, data, timeout=10, headers=headers)
        return orjson.loads(reply.data)

    async def jobs(self) -> list[asyncpg.Record]:
        return await self.api.jobs()


async def start_nats_api(
    aiohttp_client: MakeClient,
    dsn: str,
    pool: asyncpg.Pool[Any],
    nats_url: str,
    *,
    clock: Clock = SYSTEM_CLOCK,
    **env: str,
) -> AsyncIterator[NatsApi]:
    """``env``: more of the api's variables (``UJOBS_APP``, ...); ``clock``: the api's."""
    prefix = unique_prefix()
    api = await make_api(
        aiohttp_client, dsn, pool, clock=clock, NATS_URL=nats_url, UJOBS_NATS_PREFIX=prefix, **env
    )
    nc = await nats.connect(nats_url)
    try:
        yield NatsApi(api=api, nc=nc, names=NatsNames(prefix))
    finally:
        await drop_streams(nc, NatsNames(prefix))
        await nc.drain()


async def drop_streams(nc: Client, names: NatsNames) -> None:
    """Remove the test's streams from the shared NATS (each test has a prefix of its own)."""
    js = nc.jetstream()
    for stream in (names.enqueue_stream, names.settled_stream):
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(stream)


@dataclass
class InProcess:
    """The consumer side of the edge built by hand over a pool: what the api builds at start."""

    nc: Client
    js: JetStreamContext
    names: NatsNames
    edge: NatsEdge
    consumer: StreamConsumer
    tokens: TokenStore

    async def publish(
        self, subject: str, body: Any, token: str | None, *, msg_id: str | None = None
    ) -> int:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if msg_id is not None:
            headers["Nats-Msg-Id"] = msg_id
        ack = await self.js.publish(subject, orjson.dumps(body), headers=headers or None)
        return ack.seq


async def away_pool() -> asyncpg.Pool[Any]:
    """A pool whose database is away: nothing listens on its port, so every statement fails
    to connect (the driver's ``X_DRIVER_UNREACHABLE``, as in an outage)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = await asyncpg.create_pool(
        f"postgresql://postgres@127.0.0.1:{port}/postgres", min_size=0, max_size=2, timeout=2
    )
    assert pool is not None
    return pool


class CountedLookup:
    """A token lookup that counts its reads (which batches read the tokens table)."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        self.reads = 0

    async def find(self, secret: str) -> TokenRecord | None:
        self.reads += 1
        return await self.store.find(secret)


@contextlib.asynccontextmanager
async def in_process(
    pool: asyncpg.Pool[Any],
    nats_url: str,
    *,
    pool_for_edge: asyncpg.Pool[Any] | None = None,
    cached_tokens: bool = False,
    max_deliveries: int = MAX_DELIVERIES,
    ping: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[InProcess]:
    """``cached_tokens``: the api's Postgres wiring, tokens' fixed facts kept (``KnownTokens``)
    and their liveness checked by the batcher's guard; else every batch reads its tokens.
    ``max_deliveries`` and ``ping`` are the consumer's (``ping``: the api's readiness ping)."""
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    edge_pool = pool_for_edge or pool
    driver = postgres_driver(edge_pool)
    edge_store = TokenStore(edge_pool)
    guard = token_guard(driver, announcing(driver), edge_store) if cached_tokens else None
    batcher = EnqueueBatcher(driver, guard=guard)
    tokens = TokenStore(pool)
    edge = NatsEdge(
        registry=load_api(SAMPLE_APP),
        driver=driver,
        tokens=CountedLookup(edge_store),
        batcher=batcher,
        known=None if guard is None else KnownTokens(),
    )
    set_event_bus(postgres_event_bus(edge_pool))  # as the api installs it
    try:
        await ensure_streams(js, names)
        consumer = StreamConsumer(nc, js, edge, names, max_deliveries=max_deliveries, ping=ping)
        yield InProcess(nc, js, names, edge, consumer, tokens)
        await consumer.stop()
    finally:
        await batcher.close()
        await driver.close()
        await drop_streams(nc, names)
        await nc.drain()
